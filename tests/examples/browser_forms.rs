//! Checks every entry of a real feed as Chromium serializes it: what a user
//! who visits the entry's URL holds must hit what its line publishes
//! (`blocksieve_tests::browser_forms`).
//!
//! ```text
//! cargo run --release -p blocksieve-tests --example browser_forms -- \
//!     FEED FORMAT [--differing OUT.jsonl] [--mutate SEED]
//! ```
//!
//! Needs Node.js, Chromium and the extension test's npm packages (`npm ci`
//! in `bindings/wasm/extension/test`): the forms are made by
//! `tests/browser-forms/serialize.mjs` in a headless Chromium page. Line
//! formats only (not `json`). A `.gz` feed is read gunzipped. Entries whose
//! text is not UTF-8 are left out (a browser holds them percent-escaped;
//! `feed_check` checks those). With `--differing`, every entry Chromium
//! wrote otherwise than the feed (beyond `http://` put before a host and
//! the `/` after it) is written there as a [`BrowserForm`]: the pool
//! `tests/fixtures/browser-forms.jsonl` was sampled from.
//!
//! With `--mutate SEED`, each URL entry is first rewritten the ways a URL
//! can be written otherwise and still be visited (one to three changes,
//! drawn with a seeded RNG: host case, default port, trailing or escaped
//! or ideographic dots, userinfo, scheme case, dot segments written plain,
//! escaped or after `//`, backslashes, escapes, bytes browsers escape,
//! non-ASCII, fragments, empty queries, tabs, another host form), and the
//! variant is checked as a feed line of its own: a feed that writes the
//! URL so must be matched by the browser that visits it.
//!
//! Exits 1 when an entry's browser form misses what its line publishes, 2
//! when the check could not run, else 0.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use blocksieve_publisher::internal::sources::{EntryOutcome, feed_lines, read_line};
use blocksieve_tests::browser_forms::{BrowserForm, check, format_of};
use blocksieve_tests::feed_check::{BoxError, read_feed};
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use serde::Deserialize;

#[derive(Deserialize)]
struct Answer {
    k: usize,
    href: Option<String>,
    error: Option<String>,
}

/// One to three rewrites of `url` (`scheme://rest`) a browser still visits.
fn mutate(url: &str, rng: &mut StdRng) -> String {
    const CHARS: &[&str] = &[
        "!",
        "$",
        "&",
        "'",
        "(",
        ")",
        "*",
        "+",
        ",",
        ";",
        "=",
        ":",
        "@",
        "%",
        "/",
        "?",
        "[",
        "]",
        "\\",
        "^",
        "`",
        "{",
        "|",
        "}",
        "<",
        ">",
        "\"",
        " ",
        "~",
        "-",
        ".",
        "_",
        "\u{e9}",
        "\u{20ac}",
        "\u{1d518}",
        "\u{a0}",
        "\u{200b}",
        "\u{df}",
        "\u{131}",
        "\u{130}",
        "\u{ff05}",
        "\u{ff0e}",
        "\u{3002}",
        "\u{ff0f}",
        "\u{3000}",
        "\u{feff}",
        "\u{fb01}",
    ];
    const DOTS: &[&str] = &[
        "/./", "/../", "//", "/.", "/%2e/", "/%2E%2E/", "\\", "/.%2e/", "//../", "//.%2e/",
    ];
    const HOSTS: &[&str] = &[
        "m\u{fc}nchen.example",
        "xn--mnchen-3ya.example",
        "EXAMPLE\u{3002}COM",
        "\u{ff45}vil.example",
        "0x7f000002",
        "3232235777",
        "0300.0250.0.1",
        "192.168.1",
        "[::ffff:1.2.3.4]",
        "[2001:DB8::1]",
    ];
    let escape = |c: char| {
        c.to_string()
            .bytes()
            .map(|b| format!("%{b:02X}"))
            .collect::<String>()
    };
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let mut scheme = scheme.to_owned();
    let split = rest.find('/').unwrap_or(rest.len());
    let (mut host, mut path) = (rest[..split].to_owned(), rest[split..].to_owned());
    // What is inserted into the path stays there (a host written alone
    // would take it into its last label).
    if path.is_empty() || path.starts_with('?') {
        path.insert(0, '/');
    }
    // A place in the path after its first '/'.
    let at = |s: &str, rng: &mut StdRng| {
        let mut i = rng.gen_range(1..=s.len());
        while !s.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    for _ in 0..rng.gen_range(1..=3) {
        match rng.gen_range(0..20) {
            0 => host = host.to_uppercase(),
            1 => host.push_str(if scheme.eq_ignore_ascii_case("https") {
                ":443"
            } else {
                ":80"
            }),
            2 => host.push('.'),
            3 => {
                host = host.replacen(
                    '.',
                    ["\u{3002}", "\u{ff0e}", "%2e", "%2E"][rng.gen_range(0..4)],
                    1,
                )
            }
            4 => {
                host = host
                    .chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() && rng.gen_bool(0.2) {
                            escape(c)
                        } else {
                            c.to_string()
                        }
                    })
                    .collect()
            }
            5 => host = format!("user:pw@{host}"),
            6 => scheme = scheme.to_uppercase(),
            7 | 8 => {
                let i = at(&path, rng);
                path.insert_str(i, DOTS[rng.gen_range(0..DOTS.len())]);
            }
            9..=11 => {
                let i = at(&path, rng);
                path.insert_str(i, CHARS[rng.gen_range(0..CHARS.len())]);
            }
            12 | 13 => {
                path = path
                    .chars()
                    .map(|c| {
                        if rng.gen_bool(0.15) {
                            escape(c)
                        } else {
                            c.to_string()
                        }
                    })
                    .collect()
            }
            14 => path.push_str(["#x", "#a#b", "#%23", "# y"][rng.gen_range(0..4)]),
            15 => path.push('?'),
            16 => {
                let i = at(&path, rng);
                path.insert(i, '\t');
            }
            17 => {
                path = path
                    .chars()
                    .map(|c| {
                        if rng.gen_bool(0.1) {
                            c.to_ascii_uppercase()
                        } else {
                            c
                        }
                    })
                    .collect()
            }
            18 => host = HOSTS[rng.gen_range(0..HOSTS.len())].to_owned(),
            _ => path.push_str(
                ["?a=1&b=%20", "?q=\u{e9}", "?q=%zz", "?q=a+b", "?%", "?q=<x>"][rng.gen_range(0..6)],
            ),
        }
    }
    format!("{scheme}://{host}{path}")
}

fn run(
    feed: &Path,
    format_name: &str,
    differing: Option<PathBuf>,
    seed: Option<u64>,
) -> Result<bool, BoxError> {
    let format = format_of(format_name)?;
    let mut bytes = read_feed(feed)?;
    if let Some(seed) = seed {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut variants = Vec::new();
        for line in feed_lines(&bytes) {
            for entry in read_line(format, line).entries {
                let EntryOutcome::Accepted(readings) = entry else {
                    continue;
                };
                let Some(text) = readings.first().and_then(|r| std::str::from_utf8(&r.text).ok()) else {
                    continue;
                };
                if text.contains("://") {
                    variants.extend_from_slice(mutate(text, &mut rng).replace(['\n', '\r'], "\t").as_bytes());
                    variants.push(b'\n');
                }
            }
        }
        bytes = variants;
    }
    let mut entries: Vec<(String, String)> = Vec::new();
    let mut not_utf8 = 0u64;
    for line in feed_lines(&bytes) {
        for entry in read_line(format, line).entries {
            let EntryOutcome::Accepted(readings) = entry else {
                continue;
            };
            for reading in readings {
                match (std::str::from_utf8(line), String::from_utf8(reading.text)) {
                    (Ok(line), Ok(text)) => entries.push((line.to_owned(), text)),
                    _ => not_utf8 += 1,
                }
            }
        }
    }
    let dir = tempfile::tempdir()?;
    let (input, output) = (dir.path().join("entries.jsonl"), dir.path().join("forms.jsonl"));
    let mut file = std::io::BufWriter::new(std::fs::File::create(&input)?);
    for (k, (_, text)) in entries.iter().enumerate() {
        writeln!(file, "{}", serde_json::json!({ "k": k, "text": text }))?;
    }
    file.flush()?;
    drop(file);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("browser-forms/serialize.mjs");
    let status = Command::new("node")
        .arg(&script)
        .arg(&input)
        .arg(&output)
        .status()?;
    if !status.success() {
        return Err(format!("{} failed: {status}", script.display()).into());
    }
    let mut out = match differing {
        Some(path) => Some(std::io::BufWriter::new(std::fs::File::create(path)?)),
        None => None,
    };
    let (mut matched, mut changed, mut refused, mut misses) = (0u64, 0u64, 0u64, 0u64);
    for line in std::fs::read_to_string(&output)?.lines() {
        let answer: Answer = serde_json::from_str(line)?;
        let (line, text) = entries.get(answer.k).ok_or("an answer for no entry")?;
        let Some(href) = answer.href else {
            refused += 1;
            println!("browser refuses {text:?}: {}", answer.error.unwrap_or_default());
            continue;
        };
        let form = BrowserForm {
            format: format_name.to_owned(),
            line: line.clone(),
            href,
        };
        let with_scheme = if text.contains("://") {
            text.clone()
        } else {
            format!("http://{text}")
        };
        if form.href != with_scheme && form.href != format!("{with_scheme}/") {
            changed += 1;
            if let Some(out) = out.as_mut() {
                writeln!(out, "{}", serde_json::to_string(&form)?)?;
            }
        }
        match check(&form) {
            Ok(()) => matched += 1,
            Err(e) => {
                misses += 1;
                println!("MISS {e}");
            }
        }
    }
    if let Some(mut out) = out {
        out.flush()?;
    }
    println!(
        "{}: {} entries ({not_utf8} not UTF-8, left out); Chromium wrote {changed} otherwise than the feed, refused {refused}; \
         {matched} hit what their line publishes, {misses} missed",
        feed.display(),
        entries.len()
    );
    Ok(misses == 0)
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    const USAGE: &str = "usage: browser_forms FEED FORMAT [--differing OUT.jsonl] [--mutate SEED]";
    let (Some(feed), Some(format)) = (args.next(), args.next()) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let (mut differing, mut seed) = (None, None);
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--differing", Some(out)) => differing = Some(PathBuf::from(out)),
            ("--mutate", Some(s)) if s.parse::<u64>().is_ok() => seed = s.parse().ok(),
            _ => {
                eprintln!("{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    match run(Path::new(&feed), &format, differing, seed) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            println!("FAILED");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("browser_forms: {e}");
            ExitCode::from(2)
        }
    }
}
