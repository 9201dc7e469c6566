//! Reading feeds into full hashes.
//!
//! A feed is untrusted text: every line either becomes full hashes or is
//! counted as rejected by reason (with a few samples kept); no line can fail
//! a build. Lines are split on LF; a trailing CR, a UTF-8 byte-order mark at
//! the start of any line, surrounding whitespace, blank lines and comments
//! (`#`, and `!` in adblock lists) are ignored. Lines need not be valid
//! UTF-8: the canonicalizer escapes raw bytes.
//!
//! What an entry stands for:
//!
//! - a URL (formats `urls`, `csv`, adblock rules with a path) becomes its
//!   most specific expression, exact host + path (+ query when not empty), so
//!   it matches that page and nothing else on a shared host;
//! - a domain or host name (`hosts`, `domains`, `json`, adblock host rules)
//!   becomes `host/`, which the Safe Browsing host-suffix rule matches for
//!   every URL on that host and its subdomains (a `*.` prefix is accepted and
//!   means the same);
//! - a `sha256` line is already a full hash.
//!
//! Feed quirks handled here: `&amp;` in a URL is usually the HTML escape of
//! `&`, so such a line is listed both decoded and as written; a doubled scheme (`http://https://host/…`) is reduced to the inner
//! URL; hosts-file boilerplate names (`localhost`, `broadcasthost`, …) are
//! skipped. Entries that would block too much are rejected, never
//! published: a host that is a public suffix (`com`, `co.uk`, `github.io`,
//! per the Public Suffix List via the `psl` crate) and the unspecified and
//! loopback addresses.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use blocksieve_format::{CanonicalUrl, FullHash, HostKind, canonicalize};

use crate::config::SourceFormat;

/// How many rejected lines a report keeps as examples.
pub const REJECT_SAMPLES: usize = 10;

/// What reading one or more sources produced.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ParseReport {
    /// Lines read, including comments and blank lines.
    pub lines: u64,
    /// Entries that became a full hash.
    pub accepted: u64,
    /// Rejected lines by reason.
    pub rejected: BTreeMap<String, u64>,
    /// The first few rejected lines with their reason.
    pub samples: Vec<(String, String)>,
}

impl ParseReport {
    /// Total rejected lines.
    pub fn rejected_total(&self) -> u64 {
        self.rejected.values().sum()
    }

    fn reject(&mut self, line: &[u8], reason: impl Into<String>) {
        let reason = reason.into();
        if self.samples.len() < REJECT_SAMPLES {
            let shown: String = String::from_utf8_lossy(line).chars().take(200).collect();
            self.samples.push((shown, reason.clone()));
        }
        *self.rejected.entry(reason).or_default() += 1;
    }

    /// Adds `other`'s counts to this report.
    pub fn merge(&mut self, other: &ParseReport) {
        self.lines += other.lines;
        self.accepted += other.accepted;
        for (k, v) in &other.rejected {
            *self.rejected.entry(k.clone()).or_default() += v;
        }
        for s in &other.samples {
            if self.samples.len() < REJECT_SAMPLES {
                self.samples.push(s.clone());
            }
        }
    }
}

/// Options of the formats that need them.
#[derive(Debug, Clone, Default)]
pub struct FormatOptions {
    /// CSV: the URL column's header name (default `url`, case-insensitive).
    pub column: Option<String>,
    /// JSON: the array to read (default `blacklist`).
    pub json_key: Option<String>,
}

/// Names in hosts files that are not threats (the file's own boilerplate).
const HOSTS_BOILERPLATE: &[&str] = &[
    "localhost",
    "localhost.localdomain",
    "local",
    "broadcasthost",
    "ip6-localhost",
    "ip6-loopback",
    "ip6-localnet",
    "ip6-mcastprefix",
    "ip6-allnodes",
    "ip6-allrouters",
    "ip6-allhosts",
    "0.0.0.0",
];

/// Why an entry is refused even though it parses: it would block too much.
fn unsafe_entry(host: &str, kind: HostKind) -> Option<&'static str> {
    match kind {
        HostKind::Ipv4 => (host == "0.0.0.0" || host.starts_with("127."))
            .then_some("host is a loopback or unspecified address"),
        HostKind::Ipv6 => {
            matches!(host, "[::]" | "[::1]").then_some("host is a loopback or unspecified address")
        }
        HostKind::Domain => {
            // A host that is itself a public suffix has no registrable part.
            psl::domain_str(host)
                .is_none()
                .then_some("host is a public suffix (would block a whole registry)")
        }
    }
}

/// Where parsed entries go: the expressions of accepted entries, to be
/// hashed, and full hashes given as they are. The build's sink hashes in
/// batches and times each stage; [`parse_source`]'s hashes each at once.
pub trait EntrySink {
    /// Whether the parser should time canonicalization (two clock reads per
    /// entry) and report it with [`EntrySink::canonicalized`].
    const TIMED: bool = false;

    /// An expression of an accepted entry (hashed with SHA-256 into its
    /// full hash).
    fn expression(&mut self, expression: &[u8]);

    /// A full hash given as is (format `sha256`).
    fn full_hash(&mut self, hash: FullHash);

    /// Time spent canonicalizing one entry (only when [`EntrySink::TIMED`]).
    fn canonicalized(&mut self, _took: Duration) {}

    /// Called after each line or record: a sink that batches its hashing
    /// hashes here, outside the canonicalization timing.
    fn end_of_line(&mut self) {}
}

/// A sink hashing each expression at once and calling a closure.
struct HashEach<F>(F);

impl<F: FnMut(FullHash)> EntrySink for HashEach<F> {
    fn expression(&mut self, expression: &[u8]) {
        (self.0)(FullHash::of(expression));
    }

    fn full_hash(&mut self, hash: FullHash) {
        (self.0)(hash);
    }
}

/// Runs `f`, timing it when the sink asks for it.
fn canonicalizing<S: EntrySink, T>(sink: &mut S, f: impl FnOnce() -> T) -> T {
    if S::TIMED {
        let started = Instant::now();
        let out = f();
        sink.canonicalized(started.elapsed());
        out
    } else {
        f()
    }
}

/// The canonical URLs a URL line stands for (see [`url_expressions`]); the
/// expressions are slices of them, so no string is copied per entry.
struct UrlEntry {
    first: CanonicalUrl,
    /// The line as written, when it differs from its `&amp;`-decoded form.
    second: Option<CanonicalUrl>,
}

impl UrlEntry {
    fn emit(&self, sink: &mut impl EntrySink) {
        for url in std::iter::once(&self.first).chain(&self.second) {
            if let Some(e) = url.expressions().next() {
                sink.expression(e.as_str().as_bytes());
            }
        }
    }

    fn to_strings(&self) -> Vec<String> {
        std::iter::once(&self.first)
            .chain(&self.second)
            .filter_map(|u| u.expressions().next().map(|e| e.as_str().to_owned()))
            .collect()
    }
}

/// A URL line canonicalized, checked to have an expression and not to
/// block too much.
fn url_canonical(line: &[u8]) -> Result<CanonicalUrl, String> {
    let line = strip_doubled_scheme(line);
    let url = canonicalize(line).map_err(|e| e.to_string())?;
    if let Some(reason) = unsafe_entry(url.host(), url.host_kind()) {
        return Err(reason.to_owned());
    }
    if url.expressions().next().is_none() {
        return Err("no expression".to_owned());
    }
    Ok(url)
}

fn most_specific(url: &CanonicalUrl) -> Option<&str> {
    url.expressions().next().map(|e| e.as_str())
}

/// Whether `line` contains `&amp;`. Most lines have no `&` at all, which
/// `contains` finds with `memchr`; a window compare at every byte cost a
/// quarter of canonicalizing a URL (callgrind, BENCHMARKS.md row 3).
fn contains_amp_entity(line: &[u8]) -> bool {
    line.contains(&b'&') && line.windows(5).any(|w| w == b"&amp;")
}

fn url_entry(line: &[u8]) -> Result<UrlEntry, String> {
    let written = url_canonical(line)?;
    if !contains_amp_entity(line) {
        return Ok(UrlEntry {
            first: written,
            second: None,
        });
    }
    let decoded = url_canonical(&replace_all(line, b"&amp;", b"&"))?;
    Ok(if most_specific(&decoded) == most_specific(&written) {
        UrlEntry {
            first: written,
            second: None,
        }
    } else {
        UrlEntry {
            first: decoded,
            second: Some(written),
        }
    })
}

/// The expression a URL entry stands for: its most specific expression.
///
/// # Errors
///
/// The reason, when the line is not a URL with a host or would block too much.
pub fn url_expression(line: &[u8]) -> Result<String, String> {
    let url = url_canonical(line)?;
    most_specific(&url)
        .map(str::to_owned)
        .ok_or_else(|| "no expression".to_owned())
}

/// The expressions a URL line stands for: [`url_expression`] of the line as
/// written and, when it contains `&amp;`, also of the line with `&amp;`
/// decoded to `&` (the URL a browser actually visits). Listing both keeps
/// the entry as written matching, so nothing the feed names is missed.
///
/// # Errors
///
/// The reason, when the line as written is not a URL or would block too much.
pub fn url_expressions(line: &[u8]) -> Result<Vec<String>, String> {
    url_entry(line).map(|e| e.to_strings())
}

/// The expression a domain entry stands for: `host/`.
///
/// # Errors
///
/// The reason, when the name is not a host name or would block too much.
pub fn domain_expression(name: &[u8]) -> Result<String, String> {
    let name = name.strip_prefix(b"*.").unwrap_or(name);
    if name.is_empty() {
        return Err("empty domain".to_owned());
    }
    if name
        .iter()
        .any(|&b| matches!(b, b'/' | b'?' | b'@' | b'\\' | b'*') || b <= b' ')
    {
        return Err("not a domain name".to_owned());
    }
    let url = canonicalize(name).map_err(|e| e.to_string())?;
    if let Some(reason) = unsafe_entry(url.host(), url.host_kind()) {
        return Err(reason.to_owned());
    }
    Ok(format!("{}/", url.host()))
}

fn replace_all(haystack: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    while i < haystack.len() {
        if haystack[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    out
}

/// `http://https://host/…` → `https://host/…` (a feed artifact).
fn strip_doubled_scheme(line: &[u8]) -> &[u8] {
    for outer in [&b"http://"[..], b"https://"] {
        if line.len() > outer.len() && line[..outer.len()].eq_ignore_ascii_case(outer) {
            let inner = &line[outer.len()..];
            let lower: Vec<u8> = inner.iter().take(8).map(u8::to_ascii_lowercase).collect();
            if lower.starts_with(b"http://") || lower.starts_with(b"https://") {
                return inner;
            }
        }
    }
    line
}

/// Whether `bytes` look like an HTML page rather than a list: a feed URL that
/// answers with an error or login page must not be read as entries.
pub fn looks_like_html(bytes: &[u8]) -> bool {
    let start = bytes
        .strip_prefix(b"\xEF\xBB\xBF")
        .unwrap_or(bytes)
        .trim_ascii_start();
    let head: Vec<u8> = start.iter().take(512).map(u8::to_ascii_lowercase).collect();
    head.starts_with(b"<!doctype html") || head.starts_with(b"<html") || head.starts_with(b"<head")
}

/// Parses a whole source, calling `emit` with each entry's full hash.
pub fn parse_source(
    bytes: &[u8],
    format: SourceFormat,
    options: &FormatOptions,
    report: &mut ParseReport,
    emit: impl FnMut(FullHash),
) {
    parse_source_into(bytes, format, options, report, &mut HashEach(emit));
}

/// Parses a whole source into `sink`: each accepted entry's expressions
/// (or given full hashes), line by line.
pub fn parse_source_into<S: EntrySink>(
    bytes: &[u8],
    format: SourceFormat,
    options: &FormatOptions,
    report: &mut ParseReport,
    sink: &mut S,
) {
    match format {
        SourceFormat::Json => return parse_json(bytes, options, report, sink),
        SourceFormat::Csv => return parse_csv(bytes, options, report, sink),
        _ => {}
    }
    let accept =
        |report: &mut ParseReport, sink: &mut S, result: Result<Entry, String>, line: &[u8]| match result {
            Ok(entry) => {
                report.accepted += 1;
                entry.emit(sink);
            }
            Err(reason) => report.reject(line, reason),
        };
    for raw in lines(bytes) {
        report.lines += 1;
        let line = clean_line(raw);
        if line.is_empty() || line[0] == b'#' || (format == SourceFormat::AdblockHosts && line[0] == b'!') {
            continue;
        }
        match format {
            SourceFormat::Urls => {
                let entry = canonicalizing(sink, || url_entry(line).map(Entry::Url));
                accept(report, sink, entry, line);
            }
            SourceFormat::Domains => {
                let name = strip_inline_comment(line);
                let entry = canonicalizing(sink, || domain_expression(name).map(Entry::Expression));
                accept(report, sink, entry, line);
            }
            SourceFormat::Hosts => {
                let content = strip_inline_comment(line);
                let mut fields = content.split(u8::is_ascii_whitespace).filter(|f| !f.is_empty());
                let Some(first) = fields.next() else { continue };
                let names: Vec<&[u8]> = if is_ip_literal(first) {
                    fields.collect()
                } else {
                    // A bare name without an address column.
                    std::iter::once(first).chain(fields).collect()
                };
                if names.is_empty() {
                    report.reject(line, "hosts line has an address but no name");
                }
                for name in names {
                    if HOSTS_BOILERPLATE
                        .iter()
                        .any(|b| b.as_bytes().eq_ignore_ascii_case(name))
                    {
                        continue;
                    }
                    let entry = canonicalizing(sink, || domain_expression(name).map(Entry::Expression));
                    accept(report, sink, entry, line);
                }
            }
            SourceFormat::AdblockHosts => {
                let entry = canonicalizing(sink, || adblock_expression(line).map(Entry::Expression));
                accept(report, sink, entry, line);
            }
            SourceFormat::Sha256 => {
                let text = std::str::from_utf8(strip_inline_comment(line)).unwrap_or("");
                let result = FullHash::from_hex(text.trim())
                    .map(Entry::Hash)
                    .map_err(|_| "not a 64-digit hex SHA-256".to_owned());
                accept(report, sink, result, line);
            }
            SourceFormat::Json | SourceFormat::Csv => {}
        }
        sink.end_of_line();
    }
}

/// What a line stands for.
enum Entry {
    /// A URL: one expression, or two for a line with `&amp;`.
    Url(UrlEntry),
    /// An expression to hash.
    Expression(String),
    /// A full hash given as is.
    Hash(FullHash),
}

impl Entry {
    fn emit(&self, sink: &mut impl EntrySink) {
        match self {
            Entry::Url(u) => u.emit(sink),
            Entry::Expression(e) => sink.expression(e.as_bytes()),
            Entry::Hash(h) => sink.full_hash(*h),
        }
    }
}

/// Lines split on LF; a final LF does not start an extra line.
fn lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let trimmed = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    trimmed.split(|&b| b == b'\n').filter(move |_| !bytes.is_empty())
}

/// Strips a byte-order mark, CR and surrounding whitespace.
fn clean_line(raw: &[u8]) -> &[u8] {
    let line = raw.strip_suffix(b"\r").unwrap_or(raw);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    line.trim_ascii()
}

fn strip_inline_comment(line: &[u8]) -> &[u8] {
    match line.iter().position(|&b| b == b'#') {
        Some(i) => line[..i].trim_ascii(),
        None => line,
    }
}

/// An adblock network rule of urlhaus-filter's kinds: `||host^`,
/// `||host/path^$options`, `|http://…|`, or a bare host. Rules with
/// wildcards, regular expressions or exceptions (`@@`) cannot be expressed
/// as Safe Browsing expressions and are rejected.
fn adblock_expression(line: &[u8]) -> Result<String, String> {
    if line.starts_with(b"@@") {
        return Err("exception rule".to_owned());
    }
    // Options after `$`, then the `^` separator and `|` anchors.
    let rule = match line.iter().rposition(|&b| b == b'$') {
        Some(i) => &line[..i],
        None => line,
    };
    let rule = rule.strip_suffix(b"^").unwrap_or(rule);
    let rule = rule.strip_suffix(b"|").unwrap_or(rule);
    let (rule, anchored_host) = match rule.strip_prefix(b"||") {
        Some(r) => (r, true),
        None => (rule.strip_prefix(b"|").unwrap_or(rule), false),
    };
    if rule.is_empty() || rule.contains(&b'*') || rule.starts_with(b"/") {
        return Err("adblock rule is not a host or URL".to_owned());
    }
    let has_path = rule.contains(&b'/');
    if has_path || !anchored_host && rule.windows(3).any(|w| w == b"://") {
        url_expression(rule)
    } else {
        domain_expression(rule)
    }
}

fn is_ip_literal(field: &[u8]) -> bool {
    std::str::from_utf8(field).is_ok_and(|s| s.parse::<std::net::IpAddr>().is_ok())
}

fn parse_json<S: EntrySink>(bytes: &[u8], options: &FormatOptions, report: &mut ParseReport, sink: &mut S) {
    let key = options.json_key.as_deref().unwrap_or("blacklist");
    let value: serde_json::Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => {
            report.lines += 1;
            report.reject(b"<document>", format!("not valid JSON: {e}"));
            return;
        }
    };
    let Some(items) = value.get(key).and_then(|v| v.as_array()) else {
        report.lines += 1;
        report.reject(b"<document>", format!("no array {key:?} in the JSON document"));
        return;
    };
    for item in items {
        report.lines += 1;
        match item.as_str() {
            Some(name) => match canonicalizing(sink, || domain_expression(name.trim().as_bytes())) {
                Ok(e) => {
                    report.accepted += 1;
                    sink.expression(e.as_bytes());
                }
                Err(reason) => report.reject(name.as_bytes(), reason),
            },
            None => report.reject(item.to_string().as_bytes(), "array item is not a string"),
        }
        sink.end_of_line();
    }
}

fn parse_csv<S: EntrySink>(bytes: &[u8], options: &FormatOptions, report: &mut ParseReport, sink: &mut S) {
    let column = options.column.as_deref().unwrap_or("url");
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .comment(Some(b'#'))
        .from_reader(bytes);
    let index = match reader.byte_headers() {
        Ok(h) => h
            .iter()
            .position(|f| f.trim_ascii().eq_ignore_ascii_case(column.as_bytes())),
        Err(_) => None,
    };
    report.lines += 1; // the header row
    let Some(index) = index else {
        report.reject(b"<header>", format!("no column named {column:?}"));
        return;
    };
    for record in reader.byte_records() {
        report.lines += 1;
        match record {
            Ok(r) => match r.get(index).map(<[u8]>::trim_ascii) {
                Some(url) if !url.is_empty() => match canonicalizing(sink, || url_entry(url)) {
                    Ok(entry) => {
                        report.accepted += 1;
                        entry.emit(sink);
                    }
                    Err(reason) => report.reject(url, reason),
                },
                _ => report.reject(r.as_slice(), format!("row has no {column:?} value")),
            },
            Err(e) => report.reject(b"<row>", format!("malformed CSV row: {e}")),
        }
        sink.end_of_line();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(text: &[u8], format: SourceFormat) -> (Vec<FullHash>, ParseReport) {
        let mut report = ParseReport::default();
        let mut out = Vec::new();
        parse_source(text, format, &FormatOptions::default(), &mut report, |h| {
            out.push(h)
        });
        (out, report)
    }

    fn hashes(exprs: &[&str]) -> Vec<FullHash> {
        exprs.iter().map(|e| FullHash::of(e.as_bytes())).collect()
    }

    #[test]
    fn hosts_lines() {
        let text = b"\xEF\xBB\xBF# header\r\n127.0.0.1 localhost\n0.0.0.0 Evil.Example. other.example # note\r\n\n0.0.0.0\nbare.example\n";
        let (out, report) = collect(text, SourceFormat::Hosts);
        assert_eq!(out, hashes(&["evil.example/", "other.example/", "bare.example/"]));
        assert_eq!(report.lines, 6);
        assert_eq!(report.rejected_total(), 1);
    }

    #[test]
    fn url_lines_keep_path_and_query() {
        let text = b"http://a.example/x/y?q=1\nhttps://b.example\nmailto:x@y\n/relative/path\n";
        let (out, report) = collect(text, SourceFormat::Urls);
        assert_eq!(out, hashes(&["a.example/x/y?q=1", "b.example/"]));
        assert_eq!(report.rejected_total(), 2);
        assert_eq!(report.samples.len(), 2);
    }

    #[test]
    fn url_quirks() {
        let text = b"http://a.example/p?x=1&amp;y=2\nhttp://https://inner.example/login\r\n  http://b.example/trailing  \n\xEF\xBB\xBFhttp://c.example/\nhttp://d.example/\xff\xfe\n";
        let (out, report) = collect(text, SourceFormat::Urls);
        assert_eq!(
            out,
            hashes(&[
                "a.example/p?x=1&y=2",
                "a.example/p?x=1&amp;y=2",
                "inner.example/login",
                "b.example/trailing",
                "c.example/",
                "d.example/%FF%FE"
            ])
        );
        assert_eq!(report.rejected_total(), 0);
    }

    #[test]
    fn domains_and_wildcards() {
        let text = b"example.com\n*.wild.example\nfoo.example/path\nEXAMPLE.ORG.\n\xc3\xbcmlat.example\n";
        let (out, report) = collect(text, SourceFormat::Domains);
        assert_eq!(
            out,
            hashes(&[
                "example.com/",
                "wild.example/",
                "example.org/",
                "xn--mlat-zra.example/"
            ])
        );
        assert_eq!(report.rejected_total(), 1);
    }

    #[test]
    fn public_suffixes_and_loopback_are_rejected() {
        let text = b"com\nco.uk\ngithub.io\nuser.github.io\n";
        let (out, report) = collect(text, SourceFormat::Domains);
        assert_eq!(out, hashes(&["user.github.io/"]));
        assert_eq!(
            report.rejected["host is a public suffix (would block a whole registry)"],
            3
        );
        let (out, report) = collect(b"http://0.0.0.0/\nhttp://127.0.0.1/x\n", SourceFormat::Urls);
        assert!(out.is_empty());
        assert_eq!(report.rejected_total(), 2);
    }

    #[test]
    fn adblock_rules() {
        let text = b"! Title: x\nbad.example\n||evil.example^\n||files.example/a/b.exe^$all\n||*.ads^\n@@||ok.example^\n1.2.3.4\n";
        let (out, report) = collect(text, SourceFormat::AdblockHosts);
        assert_eq!(
            out,
            hashes(&[
                "bad.example/",
                "evil.example/",
                "files.example/a/b.exe",
                "1.2.3.4/"
            ])
        );
        assert_eq!(report.rejected_total(), 2);
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

        let mut out = Vec::new();
        let csv = b"id,URL,date\n1,http://a.example/x,2020\n2,,2020\n3,\"http://b.example/y,z\",2021\n";
        let opts = FormatOptions {
            column: Some("URL".into()),
            json_key: None,
        };
        let mut report = ParseReport::default();
        parse_source(csv, SourceFormat::Csv, &opts, &mut report, |h| out.push(h));
        assert_eq!(out, hashes(&["a.example/x", "b.example/y,z"]));
        assert_eq!(report.rejected_total(), 1);

        let h = FullHash::of(b"x.example/");
        let text = format!("# hashes\n{h}\nnot-hex\n");
        let (out, report) = collect(text.as_bytes(), SourceFormat::Sha256);
        assert_eq!(out, vec![h]);
        assert_eq!(report.rejected_total(), 1);
    }

    #[test]
    fn html_detection() {
        assert!(looks_like_html(b"\n  <!DOCTYPE html><html>"));
        assert!(looks_like_html(b"<html><body>Login</body></html>"));
        assert!(!looks_like_html(b"http://a.example/\n"));
    }
}
