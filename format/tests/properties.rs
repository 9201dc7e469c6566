//! Properties of the canonicalizer and the expression generator, checked on
//! generated input with a fixed seed (the same cases every run):
//!
//! 1. `canonicalize` never panics, on arbitrary bytes or on URL-shaped text
//!    built from the pieces real feeds contain (escapes, dots, IP forms, IDN,
//!    backslashes, `..` segments, userinfo, ports, whitespace);
//! 2. a canonical URL canonicalizes to itself;
//! 3. a canonical URL holds no unescaped byte `<= 0x20` or `>= 0x7f`, no `#`,
//!    and `%` only as an uppercase `%XX` escape;
//! 4. every expression is a host suffix / path prefix of the canonical URL:
//!    the host is the canonical host or a dot-suffix of it, the path a prefix
//!    of the path with query; at most 30, no duplicates;
//! 5. tab, CR and LF anywhere in the input change nothing;
//! 6. a URL canonicalizes as its browser form does: the serialization of
//!    the WHATWG URL Standard's parser (the `url` crate, as Chromium's
//!    `new URL(…).href` writes it), which is what a browser hands a Safe
//!    Browsing client when a user visits the URL;
//! 7. raw bytes written as text by `url_text` (each byte that is not UTF-8
//!    percent-escaped, as the agent's `&str` APIs take it) canonicalize as
//!    the bytes do.
//!
//! Properties 2–4 are also the body of the `canonicalize` fuzz target
//! (`blocksieve_format::fuzzing::check_invariants`, run here too), so a fuzz
//! finding and a property failure are the same bug.

#![allow(clippy::unwrap_used)]

use blocksieve_format::fuzzing::check_invariants;
use blocksieve_format::{HostKind, MAX_EXPRESSIONS, MAX_URL_BYTES, canonicalize, url_text};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, RngSeed};

/// Fixed seed and algorithm: a failure reproduces on every run and machine.
/// No persistence file: the seed already makes the cases repeatable.
fn config(cases: u32) -> Config {
    Config {
        cases,
        rng_algorithm: RngAlgorithm::ChaCha,
        rng_seed: RngSeed::Fixed(0x5afe_b10c),
        failure_persistence: None,
        ..Config::default()
    }
}

/// A regex strategy, compiled once (a `&str` strategy re-parses its regex
/// for every case, which dominates the run time in a debug build).
fn re(pattern: &str) -> proptest::string::RegexGeneratorStrategy<String> {
    proptest::string::string_regex(pattern).unwrap()
}

/// Fixed pieces of hosts: every kind of dot, IP forms, IDN (including
/// characters that UTS #46 maps to URL delimiters or deletes), escapes and
/// the bytes that end or split an authority.
const HOST_PIECES: &[&str] = &[
    ".",
    "..",
    "\u{3002}",
    "\u{ff0e}",
    "%2e",
    "%2E%2e",
    "3279880203",
    "[::1]",
    "[2001:DB8:0:0:0:0:0:1]",
    "[::ffff:1.2.3.4]",
    "[",
    "]",
    "\u{fc}mlat",
    "\u{4e2d}\u{6587}",
    "\u{df}",
    "\u{ad}",
    "\u{ff05}\u{ff14}\u{ff11}",
    "\u{ff0f}",
    "\u{ff1a}",
    "\u{ff20}",
    "\u{2488}",
    "xn--mlat-zra",
    "%",
    "%25",
    "%2525",
    "%C3%BC",
    "@",
    ":",
    ":80",
    "%3A",
    " ",
    "\t",
    "\\",
];

/// Pieces of hosts: labels, IPv4 numbers in every base, random escapes and
/// the fixed pieces.
fn host_piece() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => re("[a-zA-Z0-9-]{1,6}"),
        1 => re("(0x[0-9a-fA-F]{1,3}|0[0-7]{1,4}|[0-9]{1,10})"),
        1 => re("%[0-9a-fA-F]{2}"),
        6 => prop::sample::select(HOST_PIECES).prop_map(str::to_owned),
    ]
}

/// Fixed pieces of paths and queries: dot segments (plain and escaped),
/// separators, escapes valid and broken, whitespace, raw non-ASCII.
const PATH_PIECES: &[&str] = &[
    "/", "//", "\\", "/.", "/..", "/./", "/../", "%2E%2E", "%2F", "%5C", "?", "%3F", "#", "%23", "%", "%%",
    "%25", "%2532%35", " ", "%20", "\t", "\r\n", "&amp;", "\u{e9}", "\u{7f}", "http://",
];

/// Pieces of paths and queries.
fn path_piece() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => re("[a-zA-Z0-9_~;=&+-]{1,6}"),
        1 => re("%[0-9a-fA-F]{1,2}"),
        6 => prop::sample::select(PATH_PIECES).prop_map(str::to_owned),
    ]
}

/// Scheme-ish starts, including the ones that make a URL invalid.
const SCHEME_PIECES: &[&str] = &[
    "http://",
    "http://",
    "http://",
    "http://",
    "",
    "",
    "https://",
    "HTTP://",
    "ftp://",
    "//",
    "http:///",
    "http:\\\\",
    "http://http://",
    "mailto:",
    "javascript:",
    "  ",
    "%68ttp%3A%2F%2F",
];

fn scheme_piece() -> impl Strategy<Value = String> {
    prop_oneof![
        9 => prop::sample::select(SCHEME_PIECES).prop_map(str::to_owned),
        1 => re("[a-z][a-z0-9+.-]{0,5}:"),
    ]
}

fn concat(pieces: Vec<String>) -> String {
    pieces.concat()
}

/// A URL-shaped string: scheme, optional userinfo, host, path, query, fragment.
fn url_shaped() -> impl Strategy<Value = String> {
    (
        scheme_piece(),
        prop::option::of(prop::collection::vec(host_piece(), 1..3).prop_map(concat)),
        prop::collection::vec(host_piece(), 0..8).prop_map(concat),
        prop::collection::vec(path_piece(), 0..10).prop_map(concat),
        prop::option::of(prop::collection::vec(path_piece(), 0..4).prop_map(concat)),
        prop::option::of(re("[a-z#?%]{0,4}")),
    )
        .prop_map(|(scheme, user, host, path, query, fragment)| {
            let mut s = scheme;
            if let Some(u) = user {
                s.push_str(&u);
                s.push('@');
            }
            s.push_str(&host);
            s.push_str(&path);
            if let Some(q) = query {
                s.push('?');
                s.push_str(&q);
            }
            if let Some(f) = fragment {
                s.push('#');
                s.push_str(&f);
            }
            s
        })
}

/// A URL-shaped string as bytes, sometimes with raw bytes that are not UTF-8.
fn url_shaped_bytes() -> impl Strategy<Value = Vec<u8>> {
    (
        url_shaped(),
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
    )
        .prop_map(|(s, inserts)| {
            let mut b = s.into_bytes();
            for (at, byte) in inserts {
                let i = at.index(b.len() + 1);
                b.insert(i, byte);
            }
            b
        })
}

/// Properties 2–4 on one input, with messages that name the rule.
fn check(input: &[u8]) -> Result<(), TestCaseError> {
    let Ok(url) = canonicalize(input) else {
        return Ok(());
    };
    let text = url.as_str();

    // 3. Only printable ASCII, `#` never, `%` only as an uppercase escape.
    let b = text.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        prop_assert!(
            (0x21..=0x7e).contains(&c) && c != b'#',
            "byte {c:#04x} in {text:?}"
        );
        if c == b'%' {
            let esc = &b[i + 1..(i + 3).min(b.len())];
            prop_assert!(
                esc.len() == 2
                    && esc
                        .iter()
                        .all(|h| h.is_ascii_digit() || (b'A'..=b'F').contains(h)),
                "bare % in {text:?}"
            );
        }
    }

    // 2. Idempotence. Escaping can triple the length, so a canonical URL past
    // MAX_URL_BYTES is (rightly) too long to canonicalize again; generated
    // inputs are far shorter, the guard only keeps the property exact.
    if text.len() <= MAX_URL_BYTES {
        let again = canonicalize(text);
        prop_assert_eq!(again.as_ref(), Ok(&url), "{:?} is not a fixed point", text);
    }

    // 4. Expressions are host suffixes × path prefixes of this URL.
    let host = url.host();
    let pq = url.path_and_query();
    let exprs: Vec<_> = url.expressions().collect();
    prop_assert!(
        !exprs.is_empty() && exprs.len() <= MAX_EXPRESSIONS,
        "{} expressions",
        exprs.len()
    );
    for (i, e) in exprs.iter().enumerate() {
        let suffix = e.host == host
            || (url.host_kind() == HostKind::Domain
                && host.len() > e.host.len()
                && host.ends_with(e.host)
                && host.as_bytes()[host.len() - e.host.len() - 1] == b'.');
        prop_assert!(suffix, "host {:?} is not a dot-suffix of {:?}", e.host, host);
        prop_assert!(
            pq.starts_with(e.path),
            "path {:?} is not a prefix of {:?}",
            e.path,
            pq
        );
        prop_assert!(e.path.starts_with('/'), "path {:?}", e.path);
        prop_assert!(!exprs[..i].contains(e), "duplicate {}", e);
    }

    // The shared fuzz-target invariants (a superset of the above).
    check_invariants(input).map_err(TestCaseError::fail)
}

proptest! {
    #![proptest_config(config(3000))]

    /// 1. No panic on arbitrary bytes, and 2–4 when they happen to be a URL.
    #[test]
    fn arbitrary_bytes(input in prop::collection::vec(any::<u8>(), 0..160)) {
        check(&input)?;
    }

    /// 1. No panic on arbitrary bytes behind a scheme, so that most reach the
    /// host and path rules.
    #[test]
    fn arbitrary_bytes_after_scheme(tail in prop::collection::vec(any::<u8>(), 0..120)) {
        let mut input = b"http://".to_vec();
        input.extend_from_slice(&tail);
        check(&input)?;
    }

    /// 1–4 on URL-shaped strings.
    #[test]
    fn url_shaped_strings(input in url_shaped()) {
        check(input.as_bytes())?;
    }

    /// 1–4 on URL-shaped bytes with stray raw bytes.
    #[test]
    fn url_shaped_with_raw_bytes(input in url_shaped_bytes()) {
        check(&input)?;
    }

    /// 7. `url_text` of any bytes canonicalizes as the bytes do.
    #[test]
    fn url_text_canonicalizes_as_its_bytes(input in url_shaped_bytes()) {
        let text = url_text(&input);
        prop_assert_eq!(canonicalize(text.as_bytes()), canonicalize(&input), "{:?}", text);
    }

    /// 7. The same behind a scheme, with arbitrary bytes.
    #[test]
    fn url_text_of_arbitrary_bytes_canonicalizes_as_its_bytes(tail in prop::collection::vec(any::<u8>(), 0..120)) {
        let mut input = b"http://".to_vec();
        input.extend_from_slice(&tail);
        let text = url_text(&input);
        prop_assert_eq!(canonicalize(text.as_bytes()), canonicalize(&input), "{:?}", text);
    }
}

proptest! {
    #![proptest_config(config(2000))]

    /// 5. Tab, CR and LF are removed before anything else looks at the URL
    /// (v4 "Canonicalization"), wherever they are inserted.
    #[test]
    fn tab_cr_lf_are_ignored(
        input in url_shaped(),
        inserts in prop::collection::vec((any::<prop::sample::Index>(), prop::sample::select(vec![b'\t', b'\r', b'\n'])), 1..4),
    ) {
        let mut noisy = input.clone().into_bytes();
        for (at, byte) in inserts {
            let i = at.index(noisy.len() + 1);
            noisy.insert(i, byte);
        }
        let clean: Vec<u8> = input.bytes().filter(|b| !matches!(b, b'\t' | b'\r' | b'\n')).collect();
        prop_assert_eq!(canonicalize(&noisy), canonicalize(&clean));
    }
}

/// Property 7 has a limit: `url_text` writes each byte that is not UTF-8
/// as three, and the text is what MAX_URL_BYTES counts. Bytes under the
/// limit whose escapes take the text over it are an invalid URL as text
/// (never a different host or a safe one), as its docs say.
#[test]
fn url_text_over_the_length_limit_is_too_long() {
    let mut input = b"http://evil.example/".to_vec();
    input.resize(MAX_URL_BYTES / 2, 0xe9);
    assert!(canonicalize(&input).is_ok());
    let text = url_text(&input);
    // Escaped until past the limit (three bytes each), then no further:
    // 64 MiB of such bytes cost no more text than 1 MiB.
    assert!(
        text.len() > MAX_URL_BYTES && text.len() <= MAX_URL_BYTES + 3,
        "{}",
        text.len()
    );
    assert!(matches!(
        canonicalize(text.as_bytes()),
        Err(blocksieve_format::CanonError::TooLong { .. })
    ));
    let text_len = text.len();
    input.resize(64 << 20, 0xe9);
    assert_eq!(url_text(&input).len(), text_len);
}

/// The length guard of property 2 is real: a canonical URL can outgrow
/// MAX_URL_BYTES even though its input did not.
#[test]
fn canonical_form_can_outgrow_the_length_limit() {
    let mut input = b"http://host/".to_vec();
    input.resize(MAX_URL_BYTES, b' ' + 1);
    let n = input.len();
    input[n - 1] = b'x';
    input[20..MAX_URL_BYTES / 2].fill(0x80);
    let url = canonicalize(&input).unwrap();
    assert!(url.as_str().len() > MAX_URL_BYTES);
    assert!(canonicalize(url.as_str()).is_err());
}

/// A URL whose interesting bytes land on either side of the 64-byte blocks
/// that the one-pass common case of `canonicalize` reads: a host and a path
/// padded to lengths around 64 and 128, then host and path pieces.
fn across_blocks() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec!["http://", "https://", ""]),
        0usize..70,
        prop::collection::vec(host_piece(), 0..3).prop_map(concat),
        prop::collection::vec(re("[a-z0-9.]{1,3}"), 0..4).prop_map(concat),
        0usize..140,
        prop::collection::vec(path_piece(), 0..6).prop_map(concat),
        prop::collection::vec(path_piece(), 0..6).prop_map(concat),
    )
        .prop_map(|(scheme, host_pad, host, tld, path_pad, path, tail)| {
            let mut s = scheme.to_owned();
            s.push_str(&"h".repeat(host_pad));
            s.push_str(&host);
            s.push_str(&tld);
            s.push('/');
            s.push_str(&"p".repeat(path_pad));
            s.push_str(&path);
            s.push_str(&tail);
            s
        })
}

proptest! {
    // About a third of the hosts made are ones the WHATWG parser refuses.
    #![proptest_config(config(10_000))]

    /// 6. The one-pass common case gives what the steps give one by one
    /// (checked inside `check_invariants`), wherever a block boundary falls.
    #[test]
    fn common_case_agrees_with_the_steps_across_blocks(input in across_blocks()) {
        check(input.as_bytes())?;
    }
}

/// 6 on real URLs: the 10,000 feed lines of the canonicalization benchmark
/// (`benches/data/urls-10k.txt`). Nearly all take the common case (9,999
/// today), and most are canonical as written, hashed by `full_hashes` with
/// no copy (9,523), and read by `canonicalize_form` with no copy when they
/// have a path (8,315); the bounds keep them so (a change that sent them
/// through the steps would halve the speed of the agent's lookups without
/// failing anything else).
#[test]
fn common_case_agrees_with_the_steps_on_feed_urls() {
    let urls = include_str!("../benches/data/urls-10k.txt");
    let (mut common, mut as_written, mut borrowed) = (0, 0, 0);
    for line in urls.lines() {
        if let Err(broken) = check_invariants(line.as_bytes()) {
            panic!("{broken}\ninput: {line:?}");
        }
        common += usize::from(blocksieve_format::fuzzing::takes_common_case(line.as_bytes()));
        as_written += usize::from(blocksieve_format::fuzzing::canonical_as_written(line.as_bytes()));
        borrowed += usize::from(matches!(
            blocksieve_format::canonicalize_form(line.as_bytes()),
            Ok(blocksieve_format::CanonicalForm::AsWritten(_))
        ));
    }
    assert_eq!(urls.lines().count(), 10_000);
    assert!(
        common >= 9_900,
        "{common} of 10,000 feed URLs took the common case"
    );
    assert!(
        as_written >= 9_400,
        "{as_written} of 10,000 feed URLs were hashed with no copy"
    );
    // Those with a path (8,315 today; a host alone gets its "/" by a copy).
    assert!(
        borrowed >= 8_200,
        "{borrowed} of 10,000 feed URLs were read by canonicalize_form with no copy"
    );
}

/// 6 at every offset around the first two block edges, deterministically:
/// each piece starts at every offset from 40 to 140 of the input, in the
/// host, at the end of the path, inside the path, in the query, and at the
/// end of a URL without a scheme. (A dot segment ending at a `#` in the
/// next block was once kept: `…/p/.#` with the `/` at offset 62.)
#[test]
fn common_case_agrees_with_the_steps_at_every_offset() {
    const PIECES: &[&str] = &[
        "/.", "/..", "/./", "/../", "/.#", "/..#", "/.?", "/..?", "/.x", "/..x", "//", "//#", "#", "?", "/",
        ".", "..", ":80", ":", ":8a", "%2e", "%2E%2E/", "%", "\t", " ", "\\", "@", "A", "[", "\u{e9}",
    ];
    let mut checked = 0;
    for piece in PIECES {
        for offset in 40..=140usize {
            let layouts = [
                format!("http://{}{piece}.com/x", "h".repeat(offset - 7)),
                format!("http://a.com/{}{piece}", "p".repeat(offset - 13)),
                format!("http://a.com/{}{piece}/q#f", "p".repeat(offset - 13)),
                format!("https://a.com/p?{}{piece}", "q".repeat(offset - 16)),
                format!("a.com/{}{piece}", "p".repeat(offset - 6)),
            ];
            for input in layouts {
                if let Err(broken) = check_invariants(input.as_bytes()) {
                    panic!("{broken}\ninput: {input:?}");
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, PIECES.len() * 101 * 5);
}

proptest! {
    // About a third of the hosts made are ones the WHATWG parser refuses.
    #![proptest_config(config(10_000))]

    /// 6. What the feed writes and what the browser visiting it holds are
    /// one entry: a host of labels, dots (written escaped and ideographic
    /// too), IPv4 pieces, IDN labels, userinfo and ports, then a path of
    /// separators, dot segments (written escaped too), escaped delimiters
    /// and bytes, and a query, canonicalizes as its WHATWG serialization
    /// does (inputs the WHATWG parser refuses are left out).
    #[test]
    fn a_url_canonicalizes_as_its_browser_form_does(
        scheme in prop::sample::select(vec!["http://", "https://", "HTTP://"]),
        host in prop::collection::vec(prop::sample::select(BROWSER_HOST_PIECES), 1..6).prop_map(|v| v.concat()),
        path in prop::collection::vec(browser_path_piece(), 0..12).prop_map(concat),
        query in prop::option::of(prop::collection::vec(browser_path_piece(), 0..4).prop_map(concat)),
    ) {
        let mut written = format!("{scheme}{host}{path}");
        if let Some(query) = query {
            written.push('?');
            written.push_str(&query);
        }
        let Ok(browser) = url::Url::parse(&written) else {
            return Ok(());
        };
        prop_assert_eq!(
            canonicalize(&written).map(|u| u.to_string()),
            canonicalize(browser.as_str()).map(|u| u.to_string()),
            "written {:?}, the browser's form {:?}",
            written,
            browser.as_str()
        );
    }
}

/// Pieces of the hosts of property 6.
const BROWSER_HOST_PIECES: &[&str] = &[
    "evil",
    "EVIL",
    ".",
    "..",
    "example",
    "%2E",
    "%2e",
    "\u{3002}",
    "\u{ff0e}",
    "0x7f",
    "1",
    "017",
    "m\u{fc}nchen",
    "xn--mnchen-3ya",
    "user@",
    "u:p@",
    ":80",
    ":443",
    ":8080",
    "-",
    "_",
    "%41",
    "\u{ad}",
    "\u{200b}",
    "\u{fb01}",
    "\u{df}",
];

/// Pieces of the paths of property 6: what makes a browser's path differ
/// from the one written.
fn browser_path_piece() -> impl Strategy<Value = String> {
    const PIECES: &[&str] = &[
        "/", "//", "\\", "/.", "/..", "/./", "/../", ".", "..", "%2e", "%2E", ".%2e", "%2e.", "%2E%2e",
        "%2F", "%5C", "%3F", "%3f", "%23", "%25", "%252e", "%252F", "%", "%%", " ", "%20", "\t", "\u{e9}",
        "\u{3000}", "'", "\"", "<", "`", "{", "|", "^", "#",
    ];
    prop_oneof![
        2 => re("[a-zA-Z0-9_~;=&+-]{1,4}"),
        5 => prop::sample::select(PIECES).prop_map(str::to_owned),
    ]
}
