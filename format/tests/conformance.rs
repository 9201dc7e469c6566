//! Data-driven conformance tests: every vector of `tests/data/canonicalization.tsv`
//! and `tests/data/expressions.txt` (copied from the project's shared
//! conformance set; see `tests/data/README.md`) must pass. A case that cannot
//! be parsed or run fails the test: nothing is skipped.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use blocksieve_format::{FullHash, canonicalize};

const CANON: &str = include_str!("data/canonicalization.tsv");
const EXPRESSIONS: &str = include_str!("data/expressions.txt");

/// Decodes the escapes of the TSV header: `\t \r \n \xHH \\`.
fn unescape_field(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            match b[i + 1] {
                b't' => out.push(b'\t'),
                b'r' => out.push(b'\r'),
                b'n' => out.push(b'\n'),
                b'\\' => out.push(b'\\'),
                b'x' => {
                    let hex = std::str::from_utf8(&b[i + 2..i + 4]).unwrap();
                    out.push(u8::from_str_radix(hex, 16).unwrap());
                    i += 2;
                }
                other => panic!("unknown escape \\{} in {s:?}", other as char),
            }
            i += 2;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

#[test]
fn canonicalization_vectors() {
    let mut section = String::new();
    let mut per_section: Vec<(String, usize)> = Vec::new();
    let mut failures = Vec::new();
    let mut total = 0;
    for line in CANON.lines() {
        if let Some(rest) = line.strip_prefix("# === SECTION ") {
            section = rest.split(':').next().unwrap().to_owned();
            per_section.push((section.clone(), 0));
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (input, expected) = line
            .split_once('\t')
            .unwrap_or_else(|| panic!("malformed vector line (no tab): {line:?}"));
        let input = unescape_field(input);
        let expected = String::from_utf8(unescape_field(expected)).unwrap();
        total += 1;
        if let Some(last) = per_section.last_mut() {
            last.1 += 1;
        }
        let got = canonicalize(&input);
        let ok = match (&got, expected.as_str()) {
            (Err(e), "<INVALID>") => !e.to_string().is_empty(),
            (Ok(url), exp) => url.to_string() == exp,
            _ => false,
        };
        if !ok {
            failures.push(format!(
                "[{section}] {:?}: expected {expected:?}, got {:?}",
                String::from_utf8_lossy(&input),
                got.map(|u| u.to_string())
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {total} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The file's sections and their sizes: a vector lost to a parsing slip fails here.
    let counts: Vec<(&str, usize)> = per_section.iter().map(|(s, n)| (s.as_str(), *n)).collect();
    assert_eq!(
        counts,
        [("A", 33), ("D", 18), ("G", 16)],
        "vector counts per section"
    );
}

struct Block {
    url: String,
    ordered: bool,
    expected: Vec<String>,
    prefixes: Vec<Option<String>>,
}

fn parse_expression_blocks() -> (Vec<Block>, Vec<(String, String, String)>) {
    let mut blocks = Vec::new();
    let mut hashes = Vec::new();
    let mut current: Option<Block> = None;
    let mut in_expect = false;
    for line in EXPRESSIONS.lines() {
        if let Some(url) = line.strip_prefix("URL: ") {
            if let Some(b) = current.take() {
                blocks.push(b);
            }
            current = Some(Block {
                url: url.to_owned(),
                ordered: false,
                expected: Vec::new(),
                prefixes: Vec::new(),
            });
            in_expect = false;
        } else if let Some(rest) = line.strip_prefix("EXPECT (") {
            let b = current.as_mut().unwrap();
            b.ordered = rest.starts_with("ordered");
            in_expect = true;
        } else if in_expect && line.starts_with("  ") {
            let b = current.as_mut().unwrap();
            let mut fields = line.trim().split('\t');
            b.expected.push(fields.next().unwrap().to_owned());
            b.prefixes.push(fields.next_back().map(str::to_owned));
        } else if line.is_empty() {
            in_expect = false;
        } else if !line.starts_with('#') && line.contains('\t') && !line.starts_with(' ') {
            let mut f = line.split('\t');
            hashes.push((
                f.next().unwrap().to_owned(),
                f.next().unwrap().to_owned(),
                f.next().unwrap().to_owned(),
            ));
        } else if !in_expect
            && !line.starts_with('#')
            && !line.starts_with("SOURCE:")
            && !line.starts_with("NOTE:")
        {
            panic!("unrecognised line in expressions.txt: {line:?}");
        }
    }
    if let Some(b) = current.take() {
        blocks.push(b);
    }
    (blocks, hashes)
}

#[test]
fn expression_vectors() {
    let (blocks, hashes) = parse_expression_blocks();
    assert_eq!(blocks.len(), 23, "expression blocks");
    assert_eq!(hashes.len(), 11, "hash rows");
    let mut failures = Vec::new();
    for b in &blocks {
        if b.expected == ["<ERROR: no host>"] {
            if canonicalize(&b.url).is_ok() {
                failures.push(format!("{}: expected an error", b.url));
            }
            continue;
        }
        let url = match canonicalize(&b.url) {
            Ok(u) => u,
            Err(e) => {
                failures.push(format!("{}: {e}", b.url));
                continue;
            }
        };
        let all: Vec<String> = url.expressions().map(|e| e.to_string()).collect();
        let hosts: Vec<&str> = {
            let mut seen = Vec::new();
            for e in url.expressions() {
                if !seen.contains(&e.host) {
                    seen.push(e.host);
                }
            }
            seen
        };
        let paths: Vec<&str> = {
            let mut seen = Vec::new();
            for e in url.expressions() {
                if !seen.contains(&e.path) {
                    seen.push(e.path);
                }
            }
            seen
        };
        // Blocks list full expressions, hosts only, or paths only.
        let got: Vec<String> = if b.expected.iter().all(|e| e.starts_with('/')) {
            paths.iter().map(|s| s.to_string()).collect()
        } else if b.expected.iter().all(|e| !e.contains('/')) {
            hosts.iter().map(|s| s.to_string()).collect()
        } else {
            all.clone()
        };
        let unique: BTreeSet<&String> = all.iter().collect();
        assert_eq!(unique.len(), all.len(), "duplicate expressions for {}", b.url);
        let matches = if b.ordered {
            // Ordered blocks list paths shortest first and hosts longest first;
            // compare as sets and check the documented order separately.
            let exp: BTreeSet<&String> = b.expected.iter().collect();
            let g: BTreeSet<&String> = got.iter().collect();
            exp == g
        } else {
            let exp: BTreeSet<&String> = b.expected.iter().collect();
            let g: BTreeSet<&String> = got.iter().collect();
            exp == g && got.len() == b.expected.len()
        };
        if !matches {
            failures.push(format!("{}: expected {:?}, got {:?}", b.url, b.expected, got));
        }
        for (expr, prefix) in b.expected.iter().zip(&b.prefixes) {
            if let Some(p) = prefix.as_ref().filter(|p| p.len() == 8) {
                let h = FullHash::of(expr.as_bytes());
                if &h.prefix().to_string() != p {
                    failures.push(format!("{expr}: prefix {} != {p}", h.prefix()));
                }
            }
        }
    }
    for (expr, full, prefix) in &hashes {
        let h = FullHash::of(expr.as_bytes());
        if &h.to_string() != full || &h.prefix().to_string() != prefix {
            failures.push(format!("hash of {expr}: got {h}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
