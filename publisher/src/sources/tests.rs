//! Tests of reading lines of several formats, and the helpers every test
//! of `sources` uses.

use blocksieve_format::{FullHash, canonicalize_form};

use crate::config::SourceFormat;

use super::breadth::is_host_wide;
use super::entry::most_specific;
use super::scheme::strip_scheme_artifacts;
use super::*;

pub(super) fn collect(text: &[u8], format: SourceFormat) -> (Vec<FullHash>, ParseReport) {
    let mut report = ParseReport::default();
    let mut out = Vec::new();
    parse_source(text, format, &FormatOptions::default(), &mut report, |h| {
        out.push(h)
    });
    (out, report)
}

pub(super) fn hashes(exprs: &[&str]) -> Vec<FullHash> {
    exprs.iter().map(|e| FullHash::of(e.as_bytes())).collect()
}

/// The readings of a line's only entry, or its rejection reason.
pub(super) fn read_one(format: SourceFormat, line: &[u8]) -> Result<Vec<Reading>, &'static str> {
    let out = read_line(format, line);
    assert_eq!(
        out.entries.len(),
        1,
        "{:?}: {out:?}",
        line.escape_ascii().to_string()
    );
    match out.entries.into_iter().next() {
        Some(EntryOutcome::Accepted(readings)) => Ok(readings),
        Some(EntryOutcome::Rejected { reason, .. }) => Err(reason),
        None => Err("no entry"),
    }
}

/// The expressions of a line's only entry, all readings.
pub(super) fn exprs(format: SourceFormat, line: &[u8]) -> Result<Vec<String>, &'static str> {
    read_one(format, line).map(|rs| rs.into_iter().flat_map(|r| r.expressions).collect())
}

/// The first expression of a line's only entry: its most specific, of its
/// first reading.
pub(super) fn first_expr(format: SourceFormat, line: &[u8]) -> Result<String, &'static str> {
    exprs(format, line).map(|e| e[0].clone())
}

/// `tests/fixtures/<name>`, the real feed slices shared with the
/// end-to-end tests.
pub(super) fn fixture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Lines shaped unlike the project's real feeds, found by trying to
/// break the reader: each names a URL or host the build must publish
/// (or refuse with a true reason), never a garbage entry in its place.
#[test]
fn regression_columns_quotes_and_separators_around_the_url_keep_the_url() {
    let ipv6_host = exprs(SourceFormat::Urls, b"http://[2001:db8::1]/").unwrap();
    for (format, line, want) in [
        // A quoted URL followed by a column or a comment.
        (
            SourceFormat::Urls,
            &b"\"http://qtab.example/x\"\t\"2020-01-01\""[..],
            vec!["qtab.example/x"],
        ),
        (
            SourceFormat::Urls,
            b"\"http://qcomment.example/x\" # \"note\"",
            vec!["qcomment.example/x"],
        ),
        (
            SourceFormat::Urls,
            b"\"http://qcsv.example/x\",\"2020-01-01\"",
            vec!["qcsv.example/x"],
        ),
        // A column before the URL (it was read as a dword IPv4 host).
        (SourceFormat::Urls, b"1\thttp://a.example/p", vec!["a.example/p"]),
        (
            SourceFormat::Urls,
            b"12345\thttp://b.example/p",
            vec!["b.example/p"],
        ),
        (SourceFormat::Urls, b"1 http://c.example/p", vec!["c.example/p"]),
        (
            SourceFormat::Urls,
            b"phishing http://d.example/p",
            vec!["d.example/p"],
        ),
        (
            SourceFormat::Urls,
            b"2020-01-01\thttp://e.example/p",
            vec!["e.example/p"],
        ),
        (
            SourceFormat::Urls,
            b"7\t\"http://f.example/p\"",
            vec!["f.example/p"],
        ),
        // Two URLs on one line.
        (
            SourceFormat::Urls,
            b"http://two1.example/a http://two2.example/b",
            vec!["two1.example/a", "two2.example/b"],
        ),
        // Invisible characters at the end, and Unicode white space before `#`.
        (
            SourceFormat::Urls,
            "http://zwsp.example/p\u{200b}".as_bytes(),
            vec!["zwsp.example/p"],
        ),
        (
            SourceFormat::Urls,
            "http://a.example/p\u{3000}# seen".as_bytes(),
            vec!["a.example/p"],
        ),
        // Quoted names in a hosts file; an IPv6 address as a name.
        (
            SourceFormat::Hosts,
            b"0.0.0.0 \"qhost.example\"",
            vec!["qhost.example/"],
        ),
        (
            SourceFormat::Domains,
            b"2001:db8::1",
            ipv6_host.iter().map(String::as_str).collect(),
        ),
        // Adblock: the `|` end anchor after `^`; a `$` in a URL's query.
        (
            SourceFormat::AdblockHosts,
            b"||adb2.example^|",
            vec!["adb2.example/"],
        ),
        (
            SourceFormat::AdblockHosts,
            b"|http://adb3.example/p?x=$y|",
            vec!["adb3.example/p?x=$y"],
        ),
        (
            SourceFormat::AdblockHosts,
            b"||adb4.example^$~third-party",
            vec!["adb4.example/"],
        ),
        (
            SourceFormat::AdblockHosts,
            b"||2001:db8::1^",
            ipv6_host.iter().map(String::as_str).collect(),
        ),
    ] {
        let shown = line.escape_ascii().to_string();
        assert_eq!(
            exprs(format, line),
            Ok(want.iter().map(|w| (*w).to_owned()).collect()),
            "{shown}"
        );
    }
    // Tokens that cannot be host names are refused as such, not
    // published as garbage hosts.
    for (format, line) in [
        (SourceFormat::Domains, &b"evil.example,2020-01-01,phishing"[..]),
        (SourceFormat::Domains, b"semidom.example;"),
        (SourceFormat::Domains, b"||adbdom.example^"),
        (SourceFormat::Hosts, b"0.0.0.0 commahost.example,other.example"),
        (SourceFormat::Json, b"json4.example,"),
    ] {
        let shown = line.escape_ascii().to_string();
        assert_eq!(
            read_one(format, line).map(|_| ()),
            Err(reason::NOT_A_HOST_NAME),
            "{shown}"
        );
    }
    // Loopback in every IPv6 form, and a zone id in a hosts address.
    assert_eq!(
        read_one(SourceFormat::Domains, b"[::ffff:127.0.0.1]").map(|_| ()),
        Err(reason::LOOPBACK)
    );
    assert!(read_line(SourceFormat::Hosts, b"fe80::1%lo0 localhost").is_skipped());
    // A CR alone ends a line (old Mac line ends, a stray CR).
    let (out, report) = collect(
        b"http://cr1.example/a\rhttp://cr2.example/b\r\n",
        SourceFormat::Urls,
    );
    assert_eq!(out, hashes(&["cr1.example/a", "cr2.example/b"]));
    assert_eq!(report.lines, 2);
    // CSV: a row whose first column starts with `#` is data; a row that
    // is one `#` field is a comment, as are `#` lines before the header.
    let (out, report) = collect(
        b"# exported 2020\nid,url\n#3,http://csv3.example/p\n# note\n4,http://csv4.example/p\n",
        SourceFormat::Csv,
    );
    assert_eq!(out, hashes(&["csv3.example/p", "csv4.example/p"]));
    assert_eq!((report.lines, report.rejected_total()), (5, 0));
}

/// More lines found by trying to break the reader: a quoted column
/// before the URL, an empty quoted field, a URL without a scheme after
/// a column, Unicode white space inside names, an IPv6 host with a
/// port, adblock options holding `/`.
#[test]
fn regression_quoted_columns_schemeless_urls_and_options_keep_the_url() {
    let ipv6_host = exprs(SourceFormat::Urls, b"http://[2001:db8::1]/").unwrap();
    for (format, line, want) in [
        (
            SourceFormat::Urls,
            &b"\"Phishing\" http://b.example/p"[..],
            vec!["b.example/p"],
        ),
        (
            SourceFormat::Urls,
            b"\"2020-01-01\",\"http://a.example/p\"",
            vec!["a.example/p"],
        ),
        (
            SourceFormat::Urls,
            b"'phish' http://c2.example/p",
            vec!["c2.example/p"],
        ),
        (
            SourceFormat::Urls,
            b"\"http://a.example/p\" http://b.example/q",
            vec!["a.example/p", "b.example/q"],
        ),
        (
            SourceFormat::Urls,
            b"\"\",\"http://e1.example/p\",\"2020\"",
            vec!["e1.example/p"],
        ),
        (
            SourceFormat::Urls,
            b"\"\" http://e2.example/p",
            vec!["e2.example/p"],
        ),
        (
            SourceFormat::Urls,
            b"\"#\" http://e3.example/p",
            vec!["e3.example/p"],
        ),
        (SourceFormat::Urls, b"1\ta.example/p", vec!["a.example/p"]),
        (SourceFormat::Urls, b"2020 a2.example/p", vec!["a2.example/p"]),
        (
            SourceFormat::Urls,
            b"2020-01-01 a3.example/login",
            vec!["a3.example/login"],
        ),
        (SourceFormat::Urls, b"0.0.0.0 a4.example", vec!["a4.example/"]),
        (
            SourceFormat::Urls,
            b"\"http://a.example/q?x=\"a\",b\"",
            vec!["a.example/q?x=\"a", "a.example/q?x=\"a\",b"],
        ),
        (
            SourceFormat::Domains,
            b"[2001:db8::1]:8080",
            ipv6_host.iter().map(String::as_str).collect(),
        ),
        (
            SourceFormat::AdblockHosts,
            // An option value with slashes keeps it a host rule (a
            // `removeparam` rule is refused since: it blocks nothing).
            b"||a.example^$reason=see:/evil/",
            vec!["a.example/"],
        ),
        (
            SourceFormat::AdblockHosts,
            b"||b.example^$domain=~x.example|~y.example",
            vec!["b.example/"],
        ),
        (
            SourceFormat::Hosts,
            "0.0.0.0\u{a0}a5.example".as_bytes(),
            vec!["a5.example/"],
        ),
        (
            SourceFormat::Hosts,
            "0.0.0.0 a6.example\u{a0}b6.example".as_bytes(),
            vec!["a6.example/", "b6.example/"],
        ),
    ] {
        let shown = line.escape_ascii().to_string();
        let got: Vec<String> = read_line(format, line)
            .entries
            .into_iter()
            .flat_map(|e| match e {
                EntryOutcome::Accepted(rs) => rs.into_iter().flat_map(|r| r.expressions).collect(),
                EntryOutcome::Rejected { reason, .. } => vec![format!("rejected: {reason}")],
            })
            .collect();
        assert_eq!(got, want, "{shown}");
    }
    // White space inside a host makes no host-wide entry for the part
    // before it: a feed URL must not get the site it imitates blocked.
    for line in [
        "http://bank.example\u{200b}.evil.example/login",
        "http://bank.example\u{a0}.evil.example/login",
        "http://bank.example\u{3000}.evil.example/login",
        "http://bank.example .evil.example/login",
        "http://www.bank.example\u{feff}@evil.example/login",
    ] {
        // Read as written, or refused (a host holding a space is no host).
        let got = exprs(SourceFormat::Urls, line.as_bytes()).unwrap_or_default();
        assert!(
            got.iter()
                .all(|e| e != "bank.example/" && e != "www.bank.example/"),
            "{line:?}: {got:?}"
        );
    }
    assert_eq!(
        read_one(SourceFormat::Domains, "a.example\u{a0}2020-01-01".as_bytes()).map(|_| ()),
        Err(reason::NOT_A_HOST_NAME)
    );
}

// A quoted line, a `!` token or a single-label host
// was reported as a public suffix.
#[test]
fn rejection_reasons_are_true_for_the_line() {
    for (format, line, why) in [
        (SourceFormat::Domains, &b"!"[..], reason::NOT_A_HOST_NAME),
        (SourceFormat::Hosts, b"0.0.0.0 !", reason::NOT_A_HOST_NAME),
        (SourceFormat::Domains, b"intranet", reason::SINGLE_LABEL),
        // Real lines of the union feed.
        (SourceFormat::Urls, b"http://09-2019-n", reason::SINGLE_LABEL),
        (SourceFormat::Urls, b"http://{apple", reason::NOT_A_HOST_NAME),
        (
            SourceFormat::Urls,
            b"http://jppost-266681122132d024f53a75b&amp;session=73b277c11266681122132d024f53a75b73b277c11266681122132d024f53a75b",
            reason::NOT_A_HOST_NAME,
        ),
        (SourceFormat::Urls, b"http://:q!", reason::EMPTY_HOST),
        // Browsers skip the third slash: the host is `2t2sazf`.
        (SourceFormat::Urls, b"https:///2t2sAZF", reason::SINGLE_LABEL),
        // Real items of MetaMask's blacklist.
        (SourceFormat::Json, b"com12786312634", reason::SINGLE_LABEL),
        (SourceFormat::Json, b"iclexofmarket", reason::SINGLE_LABEL),
        (SourceFormat::Domains, b"*.", reason::EMPTY_HOST_NAME),
        (SourceFormat::Domains, b"..", reason::EMPTY_HOST_NAME),
        (SourceFormat::AdblockHosts, b"@@||ok.example^", reason::ADBLOCK_EXCEPTION),
        // Every subdomain of a top-level domain: refused as one.
        (SourceFormat::AdblockHosts, b"||*.ads^", reason::PUBLIC_SUFFIX_ICANN),
        (SourceFormat::AdblockHosts, b"||*^", reason::ADBLOCK_NOT_HOST_OR_URL),
        (SourceFormat::Sha256, b"not-hex", reason::NOT_SHA256),
    ] {
        let shown = line.escape_ascii().to_string();
        assert_eq!(exprs(format, line), Err(why), "{format:?} {shown}");
    }
    // A quoted line is read, not rejected.
    assert_eq!(
        exprs(SourceFormat::Domains, b"\"evil.example\""),
        Ok(vec!["evil.example/".to_owned()])
    );
    // A URL with a path on a single-label host names one page.
    assert_eq!(
        exprs(SourceFormat::Urls, b"http://adp/login.html"),
        Ok(vec!["adp/login.html".to_owned()])
    );
}

#[test]
fn json_and_csv_and_sha256() {
    let mut report = ParseReport::default();
    let mut out = Vec::new();
    let json = br#"{"whitelist": ["good.example"], "blacklist": ["bad.example", 7, "com"]}"#;
    parse_source(
        json,
        SourceFormat::Json,
        &FormatOptions::default(),
        &mut report,
        |h| out.push(h),
    );
    assert_eq!(out, hashes(&["bad.example/"]));
    assert_eq!(report.rejected_total(), 2);

    // The allow array is read the same way; a missing one may be fine.
    let mut out = Vec::new();
    let opts = FormatOptions {
        json_key: Some("whitelist".into()),
        ..FormatOptions::default()
    };
    parse_source(
        json,
        SourceFormat::Json,
        &opts,
        &mut ParseReport::default(),
        |h| out.push(h),
    );
    assert_eq!(out, hashes(&["good.example/"]));
    let opts = FormatOptions {
        json_key: Some("allowlist".into()),
        json_key_optional: true,
        ..FormatOptions::default()
    };
    let mut report = ParseReport::default();
    parse_source(json, SourceFormat::Json, &opts, &mut report, |_| {
        panic!("no entries")
    });
    assert_eq!(report, ParseReport::default());

    let mut out = Vec::new();
    let csv = b"id,URL,date\n1,http://a.example/x,2020\n2,,2020\n3,\"http://b.example/y,z\",2021\n4, 'http://c.example/q' ,2021\n";
    let opts = FormatOptions {
        column: Some("URL".into()),
        ..FormatOptions::default()
    };
    let mut report = ParseReport::default();
    parse_source(csv, SourceFormat::Csv, &opts, &mut report, |h| out.push(h));
    assert_eq!(out, hashes(&["a.example/x", "b.example/y,z", "c.example/q"]));
    assert_eq!(report.rejected_total(), 1);

    let h = FullHash::of(b"x.example/");
    let text = format!("# hashes\n{h}\nnot-hex\n\"{h}\" # quoted\n");
    let (out, report) = collect(text.as_bytes(), SourceFormat::Sha256);
    assert_eq!(out, vec![h, h]);
    assert_eq!(report.rejected_total(), 1);
}

/// Every line of the union feed the build once rejected, and
/// every line with white space Unicode calls so at an end: each is now
/// accepted, except those whose reason below is true for them.
#[test]
fn union_feed_quirk_lines_are_read_as_listed() {
    let bytes = fixture("phishing-urls-union-quirks.txt");
    let mut rejected: Vec<(String, &str)> = Vec::new();
    let mut accepted = 0;
    let mut trimmed = 0;
    for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let out = read_line(SourceFormat::Urls, line);
        trimmed += usize::from(out.cleaned.contains(&cleaned::UNICODE_WHITE_SPACE));
        for entry in out.entries {
            match entry {
                EntryOutcome::Accepted(readings) => {
                    accepted += 1;
                    for r in readings {
                        // The entry text canonicalizes to what is published,
                        // and a page URL publishes a page, never `host/`.
                        let url = canonicalize_form(strip_scheme_artifacts(&r.text)).unwrap();
                        let own = most_specific(&url);
                        assert!(r.expressions.contains(&own), "{own}");
                        if is_host_wide(&url) {
                            assert!(psl::domain(url.host()).is_some(), "{}", r.expressions[0]);
                        }
                        assert!(!r.text.ends_with("\u{a0}".as_bytes()));
                    }
                }
                EntryOutcome::Rejected { text, reason } => {
                    rejected.push((String::from_utf8_lossy(&text).into_owned(), reason));
                }
            }
        }
    }
    let want = [
        ("http://09-2019-n", reason::SINGLE_LABEL),
        ("http://:q!", reason::EMPTY_HOST),
        ("http://adp", reason::SINGLE_LABEL),
        (
            "http://dmanpoco637c06e82c748d695694d9ad5",
            reason::NOT_A_HOST_NAME,
        ),
        ("http://ec2-34-222-67-1577696e64696e2e303", reason::SINGLE_LABEL),
        // A whole EC2 host: `*.compute-1.amazonaws.com` makes it a suffix.
        (
            "http://ec2-54-84-170-157.compute-1.amazonaws.com",
            reason::PUBLIC_SUFFIX_PRIVATE,
        ),
        (
            "http://jppost-266681122132d024f53a75b&amp;",
            reason::NOT_A_HOST_NAME,
        ),
        ("http://{apple", reason::NOT_A_HOST_NAME),
        ("https:///2t2sAZF", reason::SINGLE_LABEL),
        ("https://acct-piedmontcancerinstitute-inv", reason::SINGLE_LABEL),
    ];
    assert_eq!(rejected.len(), want.len(), "{rejected:?}");
    for ((text, why), (start, want_why)) in rejected.iter().zip(want) {
        assert!(text.starts_with(start) && *why == want_why, "{text}: {why}");
    }
    // `http:///bonuscommissions.com/…` is read as browsers read it.
    assert_eq!((accepted, trimmed), (194, 14));
}

#[test]
fn read_line_finds_what_the_build_finds() {
    let feed = "http://a.example/x # c\n\"http://b.example/y\"\thit\nhttp://c.example/p q\nhttp://ulvis.net/IFHc\u{a0}\n\
                http://s3.amazonaws.com/\nhttp://s3.amazonaws.com/b/k.html\nhttp://d.example/p?x=1&amp;y=2 z\n";
    crate::fuzzing::check_feed(&[&[0u8][..], feed.as_bytes()].concat());
    let hosts = "0.0.0.0 a.example com b.example # c\n'0.0.0.0 c.example'\n";
    crate::fuzzing::check_feed(&[&[1u8][..], hosts.as_bytes()].concat());
}

/// Three or more slashes after `http:` or `https:` are skipped by browsers
/// whatever their mix of `/` and `\`; a line written so lists what its
/// browser form does (it was refused as an empty host unless the first two
/// were `//`). Two or fewer stay the canonicalizer's, an empty host refused.
#[test]
fn regression_extra_slashes_mixing_backslashes_are_read_as_browsers_read_them() {
    let text = b"http:\\\\\\a.example/x\nHTTPS:/\\/b.example/y\nhttp:\\\\//u:p@c.example/z\n\
                 http:\\\\d.example/w\nhttp:\\\\\\\nhttp:\\\\\\u:p@e.example/v\n";
    let (out, report) = collect(text, SourceFormat::Urls);
    let want = hashes(&[
        "a.example/x",
        "b.example/y",
        "c.example/z",
        "d.example/w",
        "e.example/v",
    ]);
    assert_eq!(out, want);
    assert_eq!(report.rejected[reason::EMPTY_HOST], 1, "{report:?}");
}

/// A number in the URL or name column (`1234`, `1.5`, `10:00`: a count, a
/// version, a time) was listed as the IPv4 address a URL parser reads it
/// as (`0.0.4.210/`, `1.0.0.5/`; `1.1` is Cloudflare's `1.0.0.1`), host-wide
/// and counted as accepted. Without a scheme and with fewer than four
/// dotted parts it is refused; with a scheme, four parts in any form a
/// browser reads, or in an adblock host rule (`||1572395042^`), it is an
/// address.
#[test]
fn regression_a_short_number_is_no_address() {
    for (format, line) in [
        (SourceFormat::Urls, &b"1234"[..]),
        (SourceFormat::Urls, b"1.5"),
        (SourceFormat::Urls, b"1.1"),
        (SourceFormat::Urls, b"10:00"),
        (SourceFormat::Urls, b"0x5f000001"),
        (SourceFormat::Urls, b"1.2.3/x"),
        (SourceFormat::Csv, b"2021"),
        (SourceFormat::Domains, b"1234"),
        (SourceFormat::Hosts, b"0.0.0.0 1.1"),
        (SourceFormat::Urls, b"1572395042\\x"),
    ] {
        assert_eq!(
            read_one(format, line).map(|_| ()),
            Err(reason::NUMBER_NOT_ADDRESS),
            "{format:?} {}",
            line.escape_ascii()
        );
    }
    for (format, line, expression) in [
        (SourceFormat::Urls, &b"http://1572395042/x"[..], "93.184.216.34/x"),
        (SourceFormat::Urls, b"0x5d.184.216.34/x", "93.184.216.34/x"),
        (SourceFormat::Urls, b"93.184.216.34", "93.184.216.34/"),
        (SourceFormat::Domains, b"93.184.216.34", "93.184.216.34/"),
        (SourceFormat::Urls, b"1234.example/x", "1234.example/x"),
        // `||` marks a host: a number there is its address.
        (SourceFormat::AdblockHosts, b"||1572395042^", "93.184.216.34/"),
    ] {
        assert_eq!(
            exprs(format, line).unwrap()[0],
            expression,
            "{format:?} {}",
            line.escape_ascii()
        );
    }
}
