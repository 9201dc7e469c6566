//! Reading feeds into full hashes.
//!
//! A feed is untrusted text: every line either becomes full hashes or is
//! counted as rejected by a reason that is true for it (a fixed set, in
//! [`reason`]), with a few samples kept; no line can fail a build. Lines
//! need not be valid UTF-8: the canonicalizer escapes raw bytes.
//!
//! # How a line is read
//!
//! [`read_line`] reads one line exactly as a build does (the build's loop,
//! [`parse_source_into`], goes through the same code), so a harness can
//! check a whole feed line by line. In order:
//!
//! 1. Lines are split on LF, and on a CR that is not part of CRLF ([`feed_lines`]:
//!    no URL holds a raw CR, browsers drop it). A UTF-8 byte-order mark at
//!    the start of a line is dropped, then white space is trimmed at both
//!    ends: ASCII white space and Unicode white space — U+00A0 NO-BREAK
//!    SPACE, U+2000 to U+200A, U+202F, U+205F, U+3000 and the other
//!    characters Unicode calls white space (U+0085, U+1680, U+2028, U+2029)
//!    — and the invisible U+FEFF, U+200B and U+2060. Feeds copied from web
//!    pages carry them (`http://ulvis.net/IFHc` + U+00A0); kept, they would
//!    be escaped into the URL (`…/IFHc%C2%A0`), a page nobody visits. The
//!    canonicalizer itself is not changed: a URL checked by an agent is
//!    read as browsers read it.
//! 2. Blank lines and comments are skipped: a line starting with `#`, and
//!    with `!` in adblock lists.
//! 3. Quotes. `urls`: a field starting with `"` or `'` runs to the
//!    matching quote that ends the line or is followed by white space, `,`,
//!    `;` or `#` (a CSV-export artifact: `"https://x.example/a,b,c"`,
//!    `"2020-01-01","http://x.example/p"`), and a `,` or `;` right after it
//!    separates it from the next field. A whole line in quotes whose last
//!    quote no field took is also read whole (`"http://a.example/q?x="a",b"`).
//!    Other formats: one pair of matching surrounding quotes is removed, and
//!    a `hosts` name loses its own.
//! 4. Columns and comments:
//!    - `urls`: the line is split into fields at ASCII or Unicode white
//!      space (not at the invisible U+FEFF, U+200B, U+2060, which stay in a
//!      URL for the canonicalizer to escape). An unquoted field starting
//!      with `#` after the first starts a comment
//!      (`http://comment.example/p # seen`); a `#` right after the URL is
//!      its fragment. The
//!      URL fields are those starting with a scheme (`http://…`); when none
//!      does, the first that holds a `/` or a `.` and a letter, else the
//!      first dotted-quad address, else the first field. The others are
//!      columns and are dropped (`http://tab.example/mid<TAB>2020-01-01`,
//!      `1<TAB>http://a.example/p`, `"Phishing" http://a.example/p`,
//!      `2020-01-01 a.example/login`). Several URL fields with a scheme are
//!      each read.
//!    - `hosts`, `domains`, `sha256`: a `#` anywhere starts a comment (no
//!      host name or hex digit holds one); `hosts` names are separated by
//!      ASCII or Unicode white space.
//! 5. `urls`: a URL as written never holds a raw space, but browsers escape
//!    one (`%20`) where a page's link has it, so unquoted fields that follow
//!    a URL field after spaces (no TAB) are ambiguous: columns, or part of
//!    the URL. The URL is read as written with them and — only when the
//!    space falls after the host (the field holds a `/`, `\`, `?` or `#`
//!    past its authority) — as the field alone. A space inside a host makes
//!    no URL, and the field alone would list a host-wide expression for a
//!    host the line does not name (`http://bank.example .evil.example/`).
//!    The same holds for a space inside a quoted URL. No real feed of the
//!    project's has such a line; when one does, nothing it lists is lost.
//!
//! A domain entry must look like a host name (letters, digits, `-`, `_`,
//! `.`, `%`-escapes, non-ASCII characters other than white space, an
//! optional `:port`, or an IPv6 address, bare or bracketed with an optional
//! `:port`); anything else is [`reason::NOT_A_HOST_NAME`],
//! never a garbage `host/` entry. Commas belong to a URL
//! (`https://x.example/a,b,c`): a comma-separated export is read with the
//! `csv` format.
//!
//! What each step removed is counted by kind in [`ParseReport::cleaned`]
//! (kinds in [`cleaned`]), shown in the build report and in `/v1/lists`.
//! CSV values and JSON array strings are read as items: steps 1 and 3 only.
//!
//! # What an entry stands for
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
//! `&`, so such a line is listed both decoded and as written; a doubled
//! scheme (`http://https://host/…`) is reduced to the inner URL; hosts-file
//! boilerplate names (`localhost`, `broadcasthost`, …) are skipped.
//!
//! # Entries that would block too much
//!
//! Rejected, never published:
//!
//! - a **host-wide** entry — one that publishes `host/`: a hosts, domains,
//!   JSON or adblock host line, or a URL whose path is `/` with no query —
//!   whose host has no registrable domain by the Public Suffix List (the
//!   `psl` crate): the host is itself a public suffix, such as `com`,
//!   `co.uk` (ICANN section), `github.io`, `s3.amazonaws.com` (private
//!   section), or a name a wildcard rule makes one (`*.compute-1.amazonaws.com`
//!   makes every `ec2-….compute-1.amazonaws.com` a suffix); or it is a single
//!   label the list does not know (`adp`, `{apple`), which the list's
//!   default rule `*` makes a suffix too. Since `host/` also matches every
//!   subdomain, such an entry would block every site registered under it.
//!   A URL with any other path, or with a query, on such a host names one
//!   page and is accepted: phishing pages on shared cloud hosts
//!   (`https://s3.amazonaws.com/evil-bucket/login.html`,
//!   `http://ec2-1-2-3-4.compute-1.amazonaws.com/paypal/login.php`) are
//!   common;
//! - any entry on the unspecified or a loopback address (`0.0.0.0`,
//!   `127.0.0.0/8`, `[::]`, `[::1]`).
//!
//! Allowlists (the `allow` sources of a list, and a JSON document's allow
//! array) are read by the same code; the build removes their full hashes
//! from the list's (see `crate::build`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use blocksieve_format::{CanonError, CanonicalUrl, FullHash, HostKind, canonicalize};

use crate::config::SourceFormat;

/// How many rejected lines a report keeps as examples.
pub const REJECT_SAMPLES: usize = 10;

/// Why a line or entry is rejected: the keys of [`ParseReport::rejected`].
/// Each is true of every line it counts. Only the JSON and CSV
/// document-level reasons (no such array, no such column, not valid JSON)
/// are written out with the key, column or parser error.
pub mod reason {
    /// A host-wide entry (`host/`) whose host is on the ICANN section of
    /// the Public Suffix List (`com`, `co.uk`, a `*.ck` name).
    pub const PUBLIC_SUFFIX_ICANN: &str = "host-wide entry on a public suffix (ICANN section of the Public Suffix List): would block a whole registry";
    /// A host-wide entry (`host/`) whose host is on the private section of
    /// the Public Suffix List (`github.io`, `s3.amazonaws.com`, an
    /// `ec2-….compute-1.amazonaws.com` name by the wildcard rule).
    pub const PUBLIC_SUFFIX_PRIVATE: &str = "host-wide entry on a public suffix (private section of the Public Suffix List): would block every site under it";
    /// A host-wide entry (`host/`) whose host is one label of letters,
    /// digits, `-` and `_` the Public Suffix List does not know (`adp`).
    pub const SINGLE_LABEL: &str = "host-wide entry on a single-label host: no registrable domain";
    /// A token that cannot be a host name: a domain entry holding `/`, `?`,
    /// `@`, `\`, `*` or white space, or a host-wide entry on a single label
    /// holding other characters (`!`, `{apple`).
    pub const NOT_A_HOST_NAME: &str = "not a host name";
    /// A domain entry that is empty once `*.`, dots or a port are removed.
    pub const EMPTY_HOST_NAME: &str = "empty host name";
    /// An entry on the unspecified or a loopback address.
    pub const LOOPBACK: &str = "host is a loopback or unspecified address";
    /// [`CanonError::Empty`](blocksieve_format::CanonError::Empty).
    pub const EMPTY_URL: &str = "empty URL";
    /// [`CanonError::TooLong`](blocksieve_format::CanonError::TooLong).
    pub const TOO_LONG: &str = "longer than the 2 MiB URL limit";
    /// [`CanonError::NotHierarchical`](blocksieve_format::CanonError::NotHierarchical).
    pub const NOT_HIERARCHICAL: &str = "scheme is not followed by \"//\" (URL has no host)";
    /// [`CanonError::RelativeUrl`](blocksieve_format::CanonError::RelativeUrl).
    pub const RELATIVE_URL: &str = "URL has no host (it starts with a path or query)";
    /// [`CanonError::EmptyHost`](blocksieve_format::CanonError::EmptyHost).
    pub const EMPTY_HOST: &str = "URL has an empty host";
    /// [`CanonError::InvalidIpv6`](blocksieve_format::CanonError::InvalidIpv6).
    pub const INVALID_IPV6: &str = "bracketed host is not a valid IPv6 address";
    /// [`CanonError::DelimiterInHost`](blocksieve_format::CanonError::DelimiterInHost).
    pub const DELIMITER_IN_HOST: &str = "host holds a URL delimiter once unescaped, which browsers reject";
    /// A canonicalization error this version does not know.
    pub const NOT_A_URL: &str = "not a URL";
    /// A canonical URL with no expression (never seen; kept for safety).
    pub const NO_EXPRESSION: &str = "no expression";
    /// A hosts line with an address and no name.
    pub const HOSTS_NO_NAME: &str = "hosts line has an address but no name";
    /// An adblock exception rule (`@@…`): it allows, it does not block.
    pub const ADBLOCK_EXCEPTION: &str = "exception rule";
    /// An adblock cosmetic rule (`example.com##.ad`): it hides page
    /// elements, it does not block the site.
    pub const ADBLOCK_COSMETIC: &str = "cosmetic (element hiding) rule";
    /// An adblock rule with a wildcard, a regular expression or no host.
    pub const ADBLOCK_NOT_HOST_OR_URL: &str = "adblock rule is not a host or URL";
    /// A `sha256` line that is not 64 hex digits.
    pub const NOT_SHA256: &str = "not a 64-digit hex SHA-256";
    /// A JSON array item that is not a string.
    pub const JSON_NOT_STRING: &str = "array item is not a string";
    /// A CSV row the CSV reader could not read.
    pub const CSV_MALFORMED: &str = "malformed CSV row";
}

/// What reading removed from an entry line or read twice: the keys of
/// [`ParseReport::cleaned`] and the items of [`LineOutcome::cleaned`].
pub mod cleaned {
    /// Unicode (not ASCII) white space trimmed at either end.
    pub const UNICODE_WHITE_SPACE: &str = "Unicode white space trimmed";
    /// One pair of surrounding quotes removed.
    pub const QUOTES: &str = "surrounding quotes removed";
    /// `urls`: other columns removed — a field after a TAB, a field around
    /// the URL when another holds none (`1 http://…`), or what follows a
    /// quoted URL (`"http://…","2020-01-01"`).
    pub const COLUMN: &str = "other columns removed";
    /// A trailing comment removed (`urls`: white space then `#`; `hosts`,
    /// `domains`, `sha256`: `#`).
    pub const COMMENT: &str = "trailing comment removed";
    /// `urls`: a space inside the URL field; read both cut at the space and
    /// as written.
    pub const SPACE: &str = "space inside: read cut at the space and as written";
}

/// What reading one or more sources produced.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ParseReport {
    /// Lines read, including comments and blank lines.
    pub lines: u64,
    /// Entries that became a full hash.
    pub accepted: u64,
    /// Rejected lines by reason (see [`reason`]).
    pub rejected: BTreeMap<String, u64>,
    /// The first few rejected lines with their reason.
    pub samples: Vec<(String, String)>,
    /// Entry lines read differently from their raw bytes, by what was
    /// removed (see [`cleaned`]); a line can count under several kinds.
    pub cleaned: BTreeMap<String, u64>,
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
        for (k, v) in &other.cleaned {
            *self.cleaned.entry(k.clone()).or_default() += v;
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
    /// JSON: a document without the `json_key` array yields no entries
    /// instead of a rejection (for a block source's allow array, which most
    /// documents do not have).
    pub json_key_optional: bool,
}

/// What the build reads from one feed line: see [`read_line`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineOutcome {
    /// What was removed from the line, or read twice, before its entries
    /// were read (items of [`cleaned`]); counted in [`ParseReport::cleaned`].
    pub cleaned: Vec<&'static str>,
    /// The line's entries, in order: none for a blank line or a comment,
    /// one for most lines, one per name of a `hosts` line (boilerplate
    /// names such as `localhost` are no entries).
    pub entries: Vec<EntryOutcome>,
}

impl LineOutcome {
    /// Whether the line holds no entry (blank, a comment, or only hosts
    /// boilerplate).
    pub fn is_skipped(&self) -> bool {
        self.entries.is_empty()
    }
}

/// One entry of a line: published, or rejected with its reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryOutcome {
    /// Published. One reading, or two for a `urls` line with a space inside
    /// (cut at the space, and as written) when both are accepted and
    /// differ.
    Accepted(Vec<Reading>),
    /// Not published; counted in [`ParseReport::rejected`] under `reason`.
    Rejected {
        /// The entry as read (for a `urls` line with a space inside, the
        /// whole line), also kept as the report's sample.
        text: Vec<u8>,
        /// Why, one of [`reason`].
        reason: &'static str,
    },
}

/// One reading of an accepted entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    /// The entry exactly as the build reads it, what a user would visit:
    /// the URL or host name once white space, quotes, columns, comments,
    /// a doubled scheme, `*.` or adblock rule syntax are removed.
    /// Canonicalized, its most specific expression is one of `expressions`
    /// (the last for a URL written with `&amp;`).
    pub text: Vec<u8>,
    /// The expressions published for it: its most specific expression, and
    /// for a URL written with `&amp;` also that of the line as written.
    /// Empty for a `sha256` line.
    pub expressions: Vec<String>,
    /// The full hashes published: SHA-256 of each expression, or the
    /// `sha256` line's hash.
    pub full_hashes: Vec<FullHash>,
}

/// Reads one feed line exactly as the build does: the same code path as
/// [`parse_source_into`]'s loop, so checking every line of a feed with this
/// checks what the build published. `line` is one line without its LF; a
/// trailing CR is trimmed like other white space. For `csv`, `line` is one
/// value of the URL column, and for `json` one string of the array, read as
/// the build reads them (white space and quotes only; no comments).
///
/// ```
/// use blocksieve_publisher::SourceFormat;
/// use blocksieve_publisher::internal::sources::{EntryOutcome, read_line, reason};
///
/// let out = read_line(SourceFormat::Urls, b"http://comment.example/p # seen 2020-01-01");
/// let EntryOutcome::Accepted(readings) = &out.entries[0] else { panic!() };
/// assert_eq!(readings[0].text, b"http://comment.example/p");
/// assert_eq!(readings[0].expressions, ["comment.example/p"]);
///
/// // A host-wide entry on a public suffix is rejected, with why.
/// let out = read_line(SourceFormat::Hosts, b"0.0.0.0 s3.amazonaws.com");
/// assert_eq!(
///     out.entries[0],
///     EntryOutcome::Rejected { text: b"s3.amazonaws.com".to_vec(), reason: reason::PUBLIC_SUFFIX_PRIVATE }
/// );
/// assert!(read_line(SourceFormat::Urls, b"# a comment").is_skipped());
/// ```
pub fn read_line(format: SourceFormat, line: &[u8]) -> LineOutcome {
    let mut collect = Collect::default();
    read_line_with(format, line, &mut collect);
    collect.0
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
/// `host_wide` says whether it publishes `host/` (see the module docs).
fn too_broad(host: &str, kind: HostKind, host_wide: bool) -> Option<&'static str> {
    match kind {
        HostKind::Ipv4 => (host == "0.0.0.0" || host.starts_with("127.")).then_some(reason::LOOPBACK),
        HostKind::Ipv6 => {
            let address = host
                .strip_prefix('[')
                .and_then(|h| h.strip_suffix(']'))
                .and_then(|h| h.parse::<std::net::Ipv6Addr>().ok());
            address
                .is_some_and(|a| {
                    a.is_loopback()
                        || a.is_unspecified()
                        || a.to_ipv4_mapped()
                            .is_some_and(|v4| v4.is_loopback() || v4.is_unspecified())
                })
                .then_some(reason::LOOPBACK)
        }
        HostKind::Domain if host_wide => public_suffix(host),
        HostKind::Domain => None,
    }
}

/// Why a host-wide entry on `host` would cover a whole registry, if it
/// would: the host has no registrable domain by the Public Suffix List.
fn public_suffix(host: &str) -> Option<&'static str> {
    if psl::domain_str(host).is_some() {
        return None;
    }
    Some(match psl::suffix(host.as_bytes()) {
        Some(s) if s.is_known() && s.typ() == Some(psl::Type::Private) => reason::PUBLIC_SUFFIX_PRIVATE,
        Some(s) if s.is_known() => reason::PUBLIC_SUFFIX_ICANN,
        // Not on the list: only the default rule `*` (the last label is a
        // suffix) leaves no registrable domain, so the host is one label.
        _ if host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') =>
        {
            reason::SINGLE_LABEL
        }
        _ => reason::NOT_A_HOST_NAME,
    })
}

/// Whether `url` publishes a host-wide expression: path `/`, no query.
fn is_host_wide(url: &CanonicalUrl) -> bool {
    url.path() == "/" && url.query().is_none_or(str::is_empty)
}

/// The reason for a URL entry that does not canonicalize.
fn url_error(e: CanonError) -> &'static str {
    match e {
        CanonError::Empty => reason::EMPTY_URL,
        CanonError::TooLong { .. } => reason::TOO_LONG,
        CanonError::NotHierarchical => reason::NOT_HIERARCHICAL,
        CanonError::RelativeUrl => reason::RELATIVE_URL,
        CanonError::EmptyHost => reason::EMPTY_HOST,
        CanonError::InvalidIpv6 => reason::INVALID_IPV6,
        CanonError::DelimiterInHost { .. } => reason::DELIMITER_IN_HOST,
        _ => reason::NOT_A_URL,
    }
}

/// The reason for a domain entry that does not canonicalize.
fn domain_error(e: CanonError) -> &'static str {
    match e {
        CanonError::Empty | CanonError::EmptyHost => reason::EMPTY_HOST_NAME,
        CanonError::TooLong { .. } => reason::TOO_LONG,
        _ => reason::NOT_A_HOST_NAME,
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

/// The canonical URLs a URL entry stands for (see [`url_expressions`]); the
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
            .filter_map(|u| most_specific(u).map(str::to_owned))
            .collect()
    }
}

/// A URL canonicalized, checked to have an expression and not to block too
/// much.
fn url_canonical(line: &[u8]) -> Result<CanonicalUrl, &'static str> {
    let line = strip_doubled_scheme(line);
    let url = canonicalize(line).map_err(url_error)?;
    if let Some(reason) = too_broad(url.host(), url.host_kind(), is_host_wide(&url)) {
        return Err(reason);
    }
    if url.expressions().next().is_none() {
        return Err(reason::NO_EXPRESSION);
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

fn url_entry(line: &[u8]) -> Result<UrlEntry, &'static str> {
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
/// `line` is the URL itself: no line cleaning is done (see [`read_line`]).
///
/// # Errors
///
/// The reason, one of [`reason`], when the line is not a URL with a host
/// or would block too much.
pub fn url_expression(line: &[u8]) -> Result<String, String> {
    let url = url_canonical(line)?;
    most_specific(&url)
        .map(str::to_owned)
        .ok_or_else(|| reason::NO_EXPRESSION.to_owned())
}

/// The expressions a URL line stands for: [`url_expression`] of the line as
/// written and, when it contains `&amp;`, also of the line with `&amp;`
/// decoded to `&` (the URL a browser actually visits). Listing both keeps
/// the entry as written matching, so nothing the feed names is missed.
///
/// # Errors
///
/// The reason, one of [`reason`], when the line as written is not a URL or
/// would block too much.
pub fn url_expressions(line: &[u8]) -> Result<Vec<String>, String> {
    Ok(url_entry(line)?.to_strings())
}

/// The expression a domain entry stands for: `host/`. A leading `*.` is
/// removed first; no other line cleaning is done (see [`read_line`]).
///
/// # Errors
///
/// The reason, one of [`reason`], when the name is not a host name or
/// would block too much.
pub fn domain_expression(name: &[u8]) -> Result<String, String> {
    Ok(domain_entry(strip_wildcard(name))?)
}

/// `*.name` → `name`.
fn strip_wildcard(name: &[u8]) -> &[u8] {
    name.strip_prefix(b"*.").unwrap_or(name)
}

/// `host/` of a domain entry (its `*.` already removed).
fn domain_entry(name: &[u8]) -> Result<String, &'static str> {
    if name.is_empty() {
        return Err(reason::EMPTY_HOST_NAME);
    }
    // A bare IPv6 address (`2001:db8::1`) is read as the host `[…]`, not as
    // a host `2001` with a port.
    let bracketed;
    let name = if is_bare_ipv6(name) {
        bracketed = [&b"["[..], name, b"]"].concat();
        &bracketed[..]
    } else {
        name
    };
    if !is_host_name_like(name) {
        return Err(reason::NOT_A_HOST_NAME);
    }
    let url = canonicalize(name).map_err(domain_error)?;
    if let Some(reason) = too_broad(url.host(), url.host_kind(), true) {
        return Err(reason);
    }
    Ok(format!("{}/", url.host()))
}

/// Whether `name` is a bare IPv6 address (no brackets).
fn is_bare_ipv6(name: &[u8]) -> bool {
    name.contains(&b':') && std::str::from_utf8(name).is_ok_and(|s| s.parse::<std::net::Ipv6Addr>().is_ok())
}

/// Whether a domain entry can be a host name, as browsers take one: a
/// bracketed IPv6 address, or letters, digits, `-`, `_`, `.`, `%`-escapes
/// and non-ASCII (internationalized) characters, with an optional `:port`.
/// Anything else — `, ; | ^ " ' [ ] ! { } < > = & + $ ~` and the like —
/// is a column, rule syntax or a mistake, not a host (RFC 1123 §2.1, and
/// the forbidden host code points of the WHATWG URL Standard).
fn is_host_name_like(name: &[u8]) -> bool {
    // `host:port`, `[v6]:port`: the port is digits.
    let (host, port) = match memchr::memrchr(b':', name) {
        Some(colon) if !name.starts_with(b"[") || name.get(colon.saturating_sub(1)) == Some(&b']') => {
            let (host, port) = name.split_at(colon);
            (host, Some(port.get(1..).unwrap_or_default()))
        }
        _ => (name, None),
    };
    if port.is_some_and(|p| p.is_empty() || !p.iter().all(u8::is_ascii_digit)) {
        return false;
    }
    if let Some(inner) = host.strip_prefix(b"[") {
        let inner = inner.strip_suffix(b"]").unwrap_or(b"");
        return std::str::from_utf8(inner).is_ok_and(|s| s.parse::<std::net::Ipv6Addr>().is_ok());
    }
    host.utf8_chunks().all(|chunk| {
        // Bytes that are not UTF-8 are the canonicalizer's to escape.
        chunk.valid().chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(c, '-' | '_' | '.' | '%')
                || !c.is_ascii() && !is_unicode_white(c) && !c.is_control()
        })
    })
}

fn replace_all(haystack: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut rest = haystack;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix(from) {
            out.extend_from_slice(to);
            rest = after;
        } else if let Some((&b, after)) = rest.split_first() {
            out.push(b);
            rest = after;
        }
    }
    out
}

/// `http://https://host/…` → `https://host/…` (a feed artifact).
fn strip_doubled_scheme(line: &[u8]) -> &[u8] {
    for outer in [&b"http://"[..], b"https://"] {
        if let Some(inner) = strip_prefix_ignore_case(line, outer)
            && (strip_prefix_ignore_case(inner, b"http://").is_some()
                || strip_prefix_ignore_case(inner, b"https://").is_some())
        {
            return inner;
        }
    }
    line
}

/// `s` without `prefix`, compared ignoring ASCII case.
fn strip_prefix_ignore_case<'a>(s: &'a [u8], prefix: &[u8]) -> Option<&'a [u8]> {
    let (head, tail) = s.split_at_checked(prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then_some(tail)
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
/// (or given full hashes), line by line. Line formats read each line with
/// the code [`read_line`] runs.
pub fn parse_source_into<S: EntrySink>(
    bytes: &[u8],
    format: SourceFormat,
    options: &FormatOptions,
    report: &mut ParseReport,
    sink: &mut S,
) {
    let mut reader = Reader { report, sink };
    match format {
        SourceFormat::Json => parse_json(bytes, options, &mut reader),
        SourceFormat::Csv => parse_csv(bytes, options, &mut reader),
        _ => {
            for raw in feed_lines(bytes) {
                reader.report.lines += 1;
                read_line_with(format, raw, &mut reader);
                reader.sink.end_of_line();
            }
        }
    }
}

/// What an entry stands for.
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

/// One reading of an entry: the text read and what it stands for.
struct Read<'a> {
    text: &'a [u8],
    entry: Entry,
}

impl Read<'_> {
    fn to_reading(&self) -> Reading {
        let expressions = match &self.entry {
            Entry::Url(u) => u.to_strings(),
            Entry::Expression(e) => vec![e.clone()],
            Entry::Hash(_) => Vec::new(),
        };
        let full_hashes = match &self.entry {
            Entry::Hash(h) => vec![*h],
            _ => expressions.iter().map(|e| FullHash::of(e.as_bytes())).collect(),
        };
        Reading {
            text: self.text.to_vec(),
            expressions,
            full_hashes,
        }
    }
}

/// Receives what reading a line finds: the build's [`Reader`] counts and
/// hashes it, [`read_line`]'s [`Collect`] keeps it.
trait Visit {
    /// Runs one entry's canonicalization (timed for a timed sink).
    fn canonicalizing<T>(&mut self, f: impl FnOnce() -> T) -> T {
        f()
    }

    /// Something was removed from the line or read twice (a [`cleaned`] kind).
    fn cleaned(&mut self, kind: &'static str);

    /// An accepted entry, with its one or two readings.
    fn accepted(&mut self, readings: &[Read<'_>]);

    /// A rejected entry.
    fn rejected(&mut self, text: &[u8], reason: &'static str);
}

/// The build's visitor: counts into the report, emits into the sink.
struct Reader<'a, S> {
    report: &'a mut ParseReport,
    sink: &'a mut S,
}

impl<S: EntrySink> Visit for Reader<'_, S> {
    fn canonicalizing<T>(&mut self, f: impl FnOnce() -> T) -> T {
        if S::TIMED {
            let started = Instant::now();
            let out = f();
            self.sink.canonicalized(started.elapsed());
            out
        } else {
            f()
        }
    }

    fn cleaned(&mut self, kind: &'static str) {
        match self.report.cleaned.get_mut(kind) {
            Some(n) => *n += 1,
            None => {
                self.report.cleaned.insert(kind.to_owned(), 1);
            }
        }
    }

    fn accepted(&mut self, readings: &[Read<'_>]) {
        self.report.accepted += 1;
        for r in readings {
            r.entry.emit(self.sink);
        }
    }

    fn rejected(&mut self, text: &[u8], reason: &'static str) {
        self.report.reject(text, reason);
    }
}

/// [`read_line`]'s visitor: keeps everything as a [`LineOutcome`].
#[derive(Default)]
struct Collect(LineOutcome);

impl Visit for Collect {
    fn cleaned(&mut self, kind: &'static str) {
        self.0.cleaned.push(kind);
    }

    fn accepted(&mut self, readings: &[Read<'_>]) {
        let readings = readings.iter().map(Read::to_reading).collect();
        self.0.entries.push(EntryOutcome::Accepted(readings));
    }

    fn rejected(&mut self, text: &[u8], reason: &'static str) {
        self.0.entries.push(EntryOutcome::Rejected {
            text: text.to_vec(),
            reason,
        });
    }
}

/// A feed's lines, as the build splits them: on LF, and on a CR that is
/// not part of a CRLF pair (a file with old Mac line ends, or a stray CR
/// between two URLs: no URL holds a raw CR, browsers drop it). A final line
/// end does not start an extra line.
pub fn feed_lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let trimmed = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    trimmed
        .split(|&b| b == b'\n')
        .filter(move |_| !bytes.is_empty())
        .flat_map(|line| line.strip_suffix(b"\r").unwrap_or(line).split(|&b| b == b'\r'))
}

/// What cleaning did to a line (bits of [`CLEANED_KINDS`]).
#[derive(Debug, Clone, Copy, Default)]
struct Cuts(u8);

/// Each [`Cuts`] bit and the [`cleaned`] kind it counts as.
const CLEANED_KINDS: [(u8, &str); 5] = [
    (Cuts::UNICODE, cleaned::UNICODE_WHITE_SPACE),
    (Cuts::QUOTES, cleaned::QUOTES),
    (Cuts::COLUMN, cleaned::COLUMN),
    (Cuts::COMMENT, cleaned::COMMENT),
    (Cuts::SPACE, cleaned::SPACE),
];

impl Cuts {
    const UNICODE: u8 = 1;
    const QUOTES: u8 = 2;
    const COLUMN: u8 = 4;
    const COMMENT: u8 = 8;
    const SPACE: u8 = 16;

    fn kinds(self) -> impl Iterator<Item = &'static str> {
        CLEANED_KINDS
            .into_iter()
            .filter(move |(bit, _)| self.0 & bit != 0)
            .map(|(_, kind)| kind)
    }
}

/// A line ready to read: its entry text and what cleaning did.
struct Cleaned<'a> {
    /// The entry text (for `urls`, the first reading).
    text: &'a [u8],
    /// `urls`: the further readings of the line — the URL field as written
    /// when a space is inside it, further URLs on the line (steps 4 and 5
    /// of the module docs). Empty for almost every line.
    more: Vec<&'a [u8]>,
    cuts: Cuts,
}

/// Whether `format` is read line by line (else a CSV value or JSON string).
fn is_line_format(format: SourceFormat) -> bool {
    !matches!(format, SourceFormat::Csv | SourceFormat::Json)
}

/// Steps 1 to 5 of the module docs; `None` for a line with no entry.
fn clean_line(format: SourceFormat, raw: &[u8]) -> Option<Cleaned<'_>> {
    let mut cuts = Cuts::default();
    let line = raw.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(raw);
    let mut text = trim_white(line, &mut cuts);
    let first = *text.first()?;
    if is_line_format(format) && (first == b'#' || (format == SourceFormat::AdblockHosts && first == b'!')) {
        return None;
    }
    if format == SourceFormat::Urls {
        return clean_url_line(text, cuts);
    }
    // Most lines hold no `#` and no quote: nothing below can change them.
    if let Some(inner) = unquote(text) {
        text = trim_white(inner, &mut cuts);
        cuts.0 |= Cuts::QUOTES;
    } else if matches!(
        format,
        SourceFormat::Hosts | SourceFormat::Domains | SourceFormat::Sha256
    ) && let Some(before) = before_first(text, b'#')
    {
        text = trim_white(before, &mut cuts);
        cuts.0 |= Cuts::COMMENT;
        if let Some(inner) = unquote(text) {
            text = trim_white(inner, &mut cuts);
            cuts.0 |= Cuts::QUOTES;
        }
    }
    if text.is_empty() {
        return None;
    }
    Some(Cleaned {
        text,
        more: Vec::new(),
        cuts,
    })
}

/// Steps 3 to 5 of the module docs for a `urls` line (trimmed, not a
/// comment).
fn clean_url_line(text: &[u8], mut cuts: Cuts) -> Option<Cleaned<'_>> {
    // Most lines are one URL: ASCII, no white space, no quote at the start.
    if !matches!(text.first(), Some(b'"' | b'\''))
        && !text.iter().any(|&b| b.is_ascii_whitespace() || !b.is_ascii())
    {
        return Some(Cleaned {
            text,
            more: Vec::new(),
            cuts,
        });
    }
    let (fields, comment) = url_fields(text);
    if comment {
        cuts.0 |= Cuts::COMMENT;
    }
    // The URL fields: those starting with a scheme; when none does, the
    // first that looks like a host or URL, else the first.
    let mut chosen: Vec<usize> = (0..fields.len())
        .filter(|&i| fields.get(i).is_some_and(|f| has_scheme(f.text)))
        .collect();
    if chosen.is_empty() {
        let nonempty = || (0..fields.len()).filter(|&i| fields.get(i).is_some_and(|f| !f.text.is_empty()));
        let like = |i: &usize, min: u8| fields.get(*i).is_some_and(|f| url_likeness(f.text) >= min);
        let pick = nonempty()
            .find(|i| like(i, 2))
            .or_else(|| nonempty().find(|i| like(i, 1)))
            .or_else(|| nonempty().next());
        chosen.extend(pick);
    }
    let mut readings: Vec<&[u8]> = Vec::new();
    let mut used = 0;
    for (n, &i) in chosen.iter().enumerate() {
        let Some(field) = fields.get(i) else { continue };
        used += 1;
        if field.quoted {
            cuts.0 |= Cuts::QUOTES;
            readings.push(field.text);
            // A space inside a quoted URL: also the URL cut there, when the
            // cut falls after the host.
            if let Some(cut) = cut_at_white(field.text)
                && cuts_after_host(cut)
            {
                cuts.0 |= Cuts::SPACE;
                readings.push(cut);
            }
            continue;
        }
        // Unquoted fields joined to this one by spaces may belong to it.
        let next_chosen = chosen.get(n + 1).copied().unwrap_or(fields.len());
        let mut last = i;
        while last + 1 < next_chosen && fields.get(last + 1).is_some_and(|f| f.after_spaces && !f.quoted) {
            last += 1;
        }
        used += last - i;
        let Some(end) = fields.get(last) else { continue };
        if last == i {
            readings.push(field.text);
            continue;
        }
        cuts.0 |= Cuts::SPACE;
        // The field alone only when the space falls after the host: a space
        // inside a host makes no URL, and the cut would list a host-wide
        // expression for a host the line does not name
        // (`http://bank.example .evil.example/login`).
        if cuts_after_host(field.text) {
            readings.push(field.text);
        }
        readings.push(text.get(field.start..end.end).unwrap_or(field.text));
    }
    if used < fields.iter().filter(|f| !f.text.is_empty() || f.quoted).count() {
        cuts.0 |= Cuts::COLUMN;
    }
    // A line in quotes whose closing quote no field took may be one URL
    // holding its quote character (`"http://a.example/q?x="a",b"`): read
    // it whole too.
    if let Some(inner) = unquote(text)
        && fields.last().is_some_and(|f| !f.quoted)
        && readings.first().is_some_and(|r| *r != inner)
        && has_scheme(inner)
    {
        cuts.0 |= Cuts::QUOTES;
        readings.push(inner);
    }
    let mut readings = readings.into_iter();
    let first = readings.next()?;
    Some(Cleaned {
        text: first,
        more: readings.collect(),
        cuts,
    })
}

/// One field of a `urls` line.
#[derive(Debug, Clone, Copy)]
struct Field<'a> {
    /// The field, without its quotes.
    text: &'a [u8],
    /// Where it starts and ends in the line (quotes included).
    start: usize,
    end: usize,
    /// Whether it was quoted.
    quoted: bool,
    /// Whether the white space before it holds no TAB (or other ASCII
    /// control): spaces, and Unicode white space, may be inside a URL.
    after_spaces: bool,
}

/// The fields of a `urls` line, split at white space (ASCII, and the
/// Unicode white space of [`is_field_white`]); a field starting with a
/// quote runs to its closing quote ([`closing_quote`]), and a `,` or `;`
/// right after it separates it from the next. Also whether a comment was
/// cut: an unquoted field starting with `#` after the first starts one.
fn url_fields(text: &[u8]) -> (Vec<Field<'_>>, bool) {
    let mut fields = Vec::new();
    let mut i = 0;
    let mut spaces_only = true;
    while let Some(rest) = text.get(i..).filter(|r| !r.is_empty()) {
        let white = white_len(rest);
        if white > 0 {
            if rest
                .first()
                .is_some_and(|&b| b.is_ascii_whitespace() && b != b' ')
            {
                spaces_only = false;
            }
            i += white;
            continue;
        }
        let after_spaces = spaces_only && !fields.is_empty();
        spaces_only = true;
        if let Some(close) = closing_quote(rest) {
            fields.push(Field {
                text: rest.get(1..close).unwrap_or_default(),
                start: i,
                end: i + close + 1,
                quoted: true,
                after_spaces: false,
            });
            i += close + 1;
            if text.get(i).is_some_and(|b| matches!(b, b',' | b';')) {
                i += 1;
                spaces_only = false;
            }
            continue;
        }
        if rest.first() == Some(&b'#') && !fields.is_empty() {
            return (fields, true);
        }
        let len = first_white(rest).unwrap_or(rest.len());
        fields.push(Field {
            text: rest.get(..len).unwrap_or_default(),
            start: i,
            end: i + len,
            quoted: false,
            after_spaces,
        });
        i += len;
    }
    (fields, false)
}

/// How much a field without a scheme looks like a URL or host rather than
/// a column: 2 when it holds a `/`, or a `.` and a letter (`a.example`,
/// `a.example/p`); 1 for a dotted-quad IPv4 address (also the address
/// column of a hosts line); 0 for dates, counts and words.
fn url_likeness(field: &[u8]) -> u8 {
    let dots = field.iter().filter(|&&b| b == b'.').count();
    if field.contains(&b'/') || dots > 0 && field.iter().any(u8::is_ascii_alphabetic) {
        2
    } else if dots == 3 {
        1
    } else {
        0
    }
}

/// Where the first field-separating white space of `text` starts
/// ([`white_len`]), if it holds any.
fn first_white(text: &[u8]) -> Option<usize> {
    (0..text.len()).find(|&j| text.get(j..).is_some_and(|r| white_len(r) > 0))
}

/// `text` cut at its first white space, if it holds any.
fn cut_at_white(text: &[u8]) -> Option<&[u8]> {
    text.get(..first_white(text)?)
}

/// Whether URL text (with or without a scheme) goes on past its host: it
/// holds a `/`, `\`, `?` or `#` after the authority's start. A URL cut
/// there still names the host the whole URL names.
fn cuts_after_host(url: &[u8]) -> bool {
    let authority = match memchr::memmem::find(url, b"://") {
        Some(at) if has_scheme(url) => url.get(at + 3..).unwrap_or_default(),
        _ => url,
    };
    authority.iter().any(|b| matches!(b, b'/' | b'\\' | b'?' | b'#'))
}

/// The white space that separates fields: ASCII white space and Unicode
/// white space, but not the invisible U+FEFF, U+200B and U+2060 (inside a
/// URL they are the canonicalizer's to escape; trimmed at the ends only).
fn is_field_white(c: char) -> bool {
    c.is_whitespace()
}

/// The fields of `text` separated by white space ([`white_len`]).
fn split_white(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = text;
    std::iter::from_fn(move || {
        while white_len(rest) > 0 {
            rest = rest.get(white_len(rest)..).unwrap_or_default();
        }
        if rest.is_empty() {
            return None;
        }
        let len = first_white(rest).unwrap_or(rest.len());
        let (field, after) = rest.split_at(len);
        rest = after;
        Some(field)
    })
}

/// The length of the field-separating white space `bytes` start with: one
/// ASCII white-space byte, or one character of [`is_field_white`]; 0 when
/// it starts with none.
fn white_len(bytes: &[u8]) -> usize {
    match bytes.first() {
        Some(b) if b.is_ascii_whitespace() => 1,
        Some(b) if !b.is_ascii() => first_char(bytes)
            .filter(|(c, _)| is_field_white(*c))
            .map_or(0, |(_, len)| len),
        _ => 0,
    }
}

/// Whether `text` starts with a URL scheme and `://` (`http://`,
/// `hxxp://` too: any scheme, RFC 3986 §3.1).
fn has_scheme(text: &[u8]) -> bool {
    let Some(colon) = memchr::memchr(b':', text) else {
        return false;
    };
    let (scheme, rest) = text.split_at(colon);
    rest.starts_with(b"://")
        && scheme.first().is_some_and(u8::is_ascii_alphabetic)
        && scheme
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

/// Where the field `text` starts with closes, when it starts with a quote
/// (`"` or `'`): the first matching quote that ends the text or is
/// followed by white space, `,`, `;` or `#`.
fn closing_quote(text: &[u8]) -> Option<usize> {
    let (&open, rest) = text.split_first()?;
    if !matches!(open, b'"' | b'\'') {
        return None;
    }
    let mut from = 0;
    while let Some(at) = rest.get(from..).and_then(|r| memchr::memchr(open, r)) {
        let close = from + at;
        let after = rest.get(close + 1..).unwrap_or_default();
        let ends = match after.first() {
            None => true,
            Some(b) => matches!(b, b',' | b';' | b'#') || white_len(after) > 0,
        };
        if ends {
            return Some(close + 1);
        }
        from = close + 1;
    }
    None
}

/// Unicode white space trimmed from feed lines besides ASCII white space:
/// what Unicode calls white space (U+00A0, U+2000 to U+200A, U+202F,
/// U+205F, U+3000, …) and the invisible U+FEFF ZERO WIDTH NO-BREAK SPACE,
/// U+200B ZERO WIDTH SPACE and U+2060 WORD JOINER, which copying from a web
/// page leaves behind.
fn is_unicode_white(c: char) -> bool {
    c.is_whitespace() || matches!(c, '\u{FEFF}' | '\u{200B}' | '\u{2060}')
}

/// The UTF-8 character `bytes` start with, and its length, when it is not
/// ASCII.
fn first_char(bytes: &[u8]) -> Option<(char, usize)> {
    let len = match bytes.first()? {
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => return None,
    };
    let c = std::str::from_utf8(bytes.get(..len)?).ok()?.chars().next()?;
    Some((c, len))
}

/// The UTF-8 character `bytes` end with, and its length, when it is not
/// ASCII.
fn last_char(bytes: &[u8]) -> Option<(char, usize)> {
    if bytes.last()?.is_ascii() {
        return None;
    }
    let start = bytes.len().saturating_sub(4);
    let tail = bytes.get(start..)?;
    let lead = tail.iter().rposition(|&b| b & 0xC0 != 0x80)?;
    let mut chars = std::str::from_utf8(tail.get(lead..)?).ok()?.chars();
    let c = chars.next()?;
    chars.next().is_none().then_some((c, tail.len() - lead))
}

/// `bytes` without ASCII and Unicode white space at either end; sets
/// [`Cuts::UNICODE`] when Unicode white space was removed.
fn trim_white<'a>(mut bytes: &'a [u8], cuts: &mut Cuts) -> &'a [u8] {
    loop {
        bytes = bytes.trim_ascii_start();
        match first_char(bytes) {
            Some((c, len)) if is_unicode_white(c) => {
                bytes = bytes.get(len..).unwrap_or_default();
                cuts.0 |= Cuts::UNICODE;
            }
            _ => break,
        }
    }
    loop {
        bytes = bytes.trim_ascii_end();
        match last_char(bytes) {
            Some((c, len)) if is_unicode_white(c) => {
                bytes = bytes.get(..bytes.len() - len).unwrap_or_default();
                cuts.0 |= Cuts::UNICODE;
            }
            _ => break,
        }
    }
    bytes
}

/// The bytes of `text` before its first `byte`, if it holds one. Most
/// lines hold none, which `contains` finds with a word-at-a-time scan.
fn before_first(text: &[u8], byte: u8) -> Option<&[u8]> {
    if !text.contains(&byte) {
        return None;
    }
    text.split(|&b| b == byte).next()
}

/// `"…"` or `'…'` → `…` (one pair of matching quotes).
fn unquote(text: &[u8]) -> Option<&[u8]> {
    let (&open, rest) = text.split_first()?;
    let (&close, inner) = rest.split_last()?;
    (matches!(open, b'"' | b'\'') && open == close).then_some(inner)
}

/// Reads one line (or CSV value, or JSON string) into `v`; false when it
/// holds no entry.
fn read_line_with(format: SourceFormat, raw: &[u8], v: &mut impl Visit) -> bool {
    let Some(line) = clean_line(format, raw) else {
        return false;
    };
    for kind in line.cuts.kinds() {
        v.cleaned(kind);
    }
    match format {
        SourceFormat::Urls => read_url_line(&line, v),
        SourceFormat::Csv => read_url(line.text, v),
        SourceFormat::Domains | SourceFormat::Json => read_domain(line.text, line.text, v),
        SourceFormat::Hosts => read_hosts(line.text, v),
        SourceFormat::AdblockHosts => read_adblock(line.text, v),
        SourceFormat::Sha256 => read_sha256(line.text, v),
    }
    true
}

/// A URL entry with one reading.
fn read_url(text: &[u8], v: &mut impl Visit) {
    match v.canonicalizing(|| url_entry(text)) {
        Ok(entry) => v.accepted(&[url_read(text, entry)]),
        Err(reason) => v.rejected(text, reason),
    }
}

/// The reading of URL `text`: the text the build reads is the URL after a
/// doubled scheme is removed.
fn url_read(text: &[u8], entry: UrlEntry) -> Read<'_> {
    Read {
        text: strip_doubled_scheme(text),
        entry: Entry::Url(entry),
    }
}

/// A `urls` line: one reading, or more (step 5 of the module docs). The
/// entry is accepted when any reading is, with every reading accepted;
/// rejected with the first reading's reason when none is.
fn read_url_line(line: &Cleaned<'_>, v: &mut impl Visit) {
    if line.more.is_empty() {
        return read_url(line.text, v);
    }
    let mut accepted: Vec<Read<'_>> = Vec::new();
    let mut first_error = None;
    for text in std::iter::once(line.text).chain(line.more.iter().copied()) {
        match v.canonicalizing(|| url_entry(text)) {
            Ok(entry) => {
                let read = url_read(text, entry);
                let same = |r: &Read<'_>| match (&r.entry, &read.entry) {
                    (Entry::Url(a), Entry::Url(b)) => a.to_strings() == b.to_strings(),
                    _ => false,
                };
                if !accepted.iter().any(same) {
                    accepted.push(read);
                }
            }
            Err(reason) => {
                first_error.get_or_insert(reason);
            }
        }
    }
    if accepted.is_empty() {
        v.rejected(line.text, first_error.unwrap_or(reason::NOT_A_URL));
    } else {
        v.accepted(&accepted);
    }
}

/// A domain entry `name`; `shown` is what a rejection sample shows.
fn read_domain(name: &[u8], shown: &[u8], v: &mut impl Visit) {
    let name = strip_wildcard(name);
    match v.canonicalizing(|| domain_entry(name)) {
        Ok(e) => v.accepted(&[Read {
            text: name,
            entry: Entry::Expression(e),
        }]),
        Err(reason) => v.rejected(shown, reason),
    }
}

/// A hosts line: `address name [name…]`, or bare names.
fn read_hosts(text: &[u8], v: &mut impl Visit) {
    let mut fields = split_white(text);
    let Some(first) = fields.next() else { return };
    // A bare name without an address column is a name too.
    let address = is_ip_literal(first);
    let mut named = false;
    for name in std::iter::once(first).filter(|_| !address).chain(fields) {
        named = true;
        let name = unquote(name).unwrap_or(name);
        if HOSTS_BOILERPLATE
            .iter()
            .any(|b| b.as_bytes().eq_ignore_ascii_case(name))
        {
            continue;
        }
        read_domain(name, name, v);
    }
    if !named {
        v.rejected(text, reason::HOSTS_NO_NAME);
    }
}

/// What an adblock rule blocks.
enum AdblockRule<'a> {
    /// A host (`||host^`, a bare host).
    Host(&'a [u8]),
    /// A URL (`||host/path^`, `|http://…|`).
    Url(&'a [u8]),
}

/// An adblock network rule of urlhaus-filter's kinds: `||host^`,
/// `||host/path^$options`, `|http://…|`, or a bare host. Rules with
/// wildcards, regular expressions or exceptions (`@@`) cannot be expressed
/// as Safe Browsing expressions, and cosmetic rules block nothing: they
/// are rejected.
fn adblock_rule(line: &[u8]) -> Result<AdblockRule<'_>, &'static str> {
    if line.starts_with(b"@@") {
        return Err(reason::ADBLOCK_EXCEPTION);
    }
    const COSMETIC: [&[u8]; 4] = [b"##", b"#@#", b"#?#", b"#$#"];
    if COSMETIC
        .iter()
        .any(|sep| line.windows(sep.len()).any(|w| w == *sep))
    {
        return Err(reason::ADBLOCK_COSMETIC);
    }
    // Options after the last `$` when they are options (else the `$` is
    // part of a URL: `|http://a.example/p?x=$y|`), then the `|` end anchor,
    // then the `^` separator before it.
    let rule = match memchr::memrchr(b'$', line) {
        Some(i) if are_adblock_options(line.get(i + 1..).unwrap_or_default()) => {
            line.get(..i).unwrap_or_default()
        }
        _ => line,
    };
    let rule = rule.strip_suffix(b"|").unwrap_or(rule);
    let rule = rule.strip_suffix(b"^").unwrap_or(rule);
    let (rule, anchored_host) = match rule.strip_prefix(b"||") {
        Some(r) => (r, true),
        None => (rule.strip_prefix(b"|").unwrap_or(rule), false),
    };
    if rule.is_empty() || rule.contains(&b'*') || rule.starts_with(b"/") {
        return Err(reason::ADBLOCK_NOT_HOST_OR_URL);
    }
    let has_path = rule.contains(&b'/');
    Ok(
        if has_path || !anchored_host && rule.windows(3).any(|w| w == b"://") {
            AdblockRule::Url(rule)
        } else {
            AdblockRule::Host(rule)
        },
    )
}

/// Network-rule option names of Adblock Plus and uBlock Origin (their
/// filter syntax documentation), which may follow a rule's last `$`.
const ADBLOCK_OPTIONS: &[&str] = &[
    "1p",
    "3p",
    "all",
    "badfilter",
    "cname",
    "csp",
    "css",
    "denyallow",
    "doc",
    "document",
    "domain",
    "ehide",
    "elemhide",
    "empty",
    "first-party",
    "font",
    "frame",
    "from",
    "generichide",
    "genericblock",
    "ghide",
    "header",
    "image",
    "important",
    "inline-font",
    "inline-script",
    "ipaddress",
    "match-case",
    "media",
    "method",
    "mp4",
    "object",
    "other",
    "permissions",
    "ping",
    "popunder",
    "popup",
    "redirect",
    "redirect-rule",
    "removeparam",
    "replace",
    "rewrite",
    "script",
    "shide",
    "specifichide",
    "strict1p",
    "strict3p",
    "stylesheet",
    "subdocument",
    "third-party",
    "to",
    "urlskip",
    "uritransform",
    "webrtc",
    "websocket",
    "xhr",
    "xmlhttprequest",
];

/// Whether `text` (after a rule's last `$`) is a list of adblock options:
/// comma-separated known names, each maybe negated (`~`) and with a value
/// (`domain=a.example|b.example`).
fn are_adblock_options(text: &[u8]) -> bool {
    !text.is_empty()
        && text.split(|&b| b == b',').all(|option| {
            let option = option.strip_prefix(b"~").unwrap_or(option);
            let name = option.split(|&b| b == b'=').next().unwrap_or_default();
            ADBLOCK_OPTIONS
                .iter()
                .any(|known| known.as_bytes().eq_ignore_ascii_case(name))
        })
}

fn read_adblock(line: &[u8], v: &mut impl Visit) {
    match adblock_rule(line) {
        Ok(AdblockRule::Host(host)) => read_domain(host, line, v),
        Ok(AdblockRule::Url(url)) => match v.canonicalizing(|| url_entry(url)) {
            Ok(entry) => v.accepted(&[url_read(url, entry)]),
            Err(reason) => v.rejected(line, reason),
        },
        Err(reason) => v.rejected(line, reason),
    }
}

fn read_sha256(text: &[u8], v: &mut impl Visit) {
    let hash = std::str::from_utf8(text)
        .ok()
        .and_then(|t| FullHash::from_hex(t).ok());
    match hash {
        Some(h) => v.accepted(&[Read {
            text,
            entry: Entry::Hash(h),
        }]),
        None => v.rejected(text, reason::NOT_SHA256),
    }
}

/// Whether a hosts-file field is an address: IPv4, or IPv6 with an
/// optional zone (`fe80::1%lo0`, the macOS default hosts file).
fn is_ip_literal(field: &[u8]) -> bool {
    let address = match memchr::memchr(b'%', field) {
        Some(zone) if field.contains(&b':') => field.get(..zone).unwrap_or_default(),
        _ => field,
    };
    std::str::from_utf8(address).is_ok_and(|s| s.parse::<std::net::IpAddr>().is_ok())
}

fn parse_json<S: EntrySink>(bytes: &[u8], options: &FormatOptions, r: &mut Reader<'_, S>) {
    let key = options.json_key.as_deref().unwrap_or("blacklist");
    // A byte-order mark is no JSON, but editors write one.
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let value: serde_json::Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => {
            r.report.lines += 1;
            r.report.reject(b"<document>", format!("not valid JSON: {e}"));
            return;
        }
    };
    let Some(items) = value.get(key).and_then(|v| v.as_array()) else {
        if !options.json_key_optional {
            r.report.lines += 1;
            r.report
                .reject(b"<document>", format!("no array {key:?} in the JSON document"));
        }
        return;
    };
    for item in items {
        r.report.lines += 1;
        match item.as_str() {
            Some(name) => {
                read_line_with(SourceFormat::Json, name.as_bytes(), r);
            }
            None => r
                .report
                .reject(item.to_string().as_bytes(), reason::JSON_NOT_STRING),
        }
        r.sink.end_of_line();
    }
}

fn parse_csv<S: EntrySink>(bytes: &[u8], options: &FormatOptions, r: &mut Reader<'_, S>) {
    let column = options.column.as_deref().unwrap_or("url");
    let mut bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    // Comment lines before the header row are skipped (and counted); after
    // it, a row is a comment only when it is one field starting with `#`:
    // a row whose first column starts with `#` (`#3,http://…`) is data.
    while bytes.first() == Some(&b'#') {
        r.report.lines += 1;
        bytes = memchr::memchr(b'\n', bytes).map_or(&[][..], |i| bytes.get(i + 1..).unwrap_or_default());
    }
    let mut reader = csv::ReaderBuilder::new().flexible(true).from_reader(bytes);
    let index = match reader.byte_headers() {
        Ok(h) => h
            .iter()
            .position(|f| f.trim_ascii().eq_ignore_ascii_case(column.as_bytes())),
        Err(_) => None,
    };
    r.report.lines += 1; // the header row
    let Some(index) = index else {
        r.report
            .reject(b"<header>", format!("no column named {column:?}"));
        return;
    };
    for record in reader.byte_records() {
        r.report.lines += 1;
        match record {
            Ok(row)
                if row.len() == 1 && row.get(0).is_some_and(|f| f.trim_ascii_start().starts_with(b"#")) => {}
            Ok(row) => {
                let read = row
                    .get(index)
                    .is_some_and(|url| read_line_with(SourceFormat::Csv, url, r));
                if !read {
                    r.report
                        .reject(row.as_slice(), format!("row has no {column:?} value"));
                }
            }
            Err(e) => r
                .report
                .reject(format!("<row: {e}>").as_bytes(), reason::CSV_MALFORMED),
        }
        r.sink.end_of_line();
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

    /// The readings of a line's only entry, or its rejection reason.
    fn read_one(format: SourceFormat, line: &[u8]) -> Result<Vec<Reading>, &'static str> {
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
    fn exprs(format: SourceFormat, line: &[u8]) -> Result<Vec<String>, &'static str> {
        read_one(format, line).map(|rs| rs.into_iter().flat_map(|r| r.expressions).collect())
    }

    /// `tests/fixtures/<name>`, the real feed slices shared with the
    /// end-to-end tests.
    fn fixture(name: &str) -> Vec<u8> {
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
            (SourceFormat::Domains, b"2001:db8::1", vec![ipv6_host[0].as_str()]),
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
                b"||adb4.example^$third-party",
                vec!["adb4.example/"],
            ),
            (
                SourceFormat::AdblockHosts,
                b"||2001:db8::1^",
                vec![ipv6_host[0].as_str()],
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
                vec![ipv6_host[0].as_str()],
            ),
            (
                SourceFormat::AdblockHosts,
                b"||a.example^$removeparam=/utm_/",
                vec!["a.example/"],
            ),
            (
                SourceFormat::AdblockHosts,
                b"||b.example^$domain=x.example|y.example",
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
            let got = exprs(SourceFormat::Urls, line.as_bytes()).unwrap();
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

    #[test]
    fn hosts_lines() {
        let text = b"\xEF\xBB\xBF# header\r\n127.0.0.1 localhost\n0.0.0.0 Evil.Example. other.example # note\r\n\n0.0.0.0\nbare.example\n";
        let (out, report) = collect(text, SourceFormat::Hosts);
        assert_eq!(out, hashes(&["evil.example/", "other.example/", "bare.example/"]));
        assert_eq!(report.lines, 6);
        assert_eq!(report.rejected_total(), 1);
        assert_eq!(report.rejected[reason::HOSTS_NO_NAME], 1);
        assert_eq!(report.cleaned[cleaned::COMMENT], 1);
    }

    #[test]
    fn url_lines_keep_path_and_query() {
        let text = b"http://a.example/x/y?q=1\nhttps://b.example\nmailto:x@y\n/relative/path\n";
        let (out, report) = collect(text, SourceFormat::Urls);
        assert_eq!(out, hashes(&["a.example/x/y?q=1", "b.example/"]));
        assert_eq!(report.rejected[reason::NOT_HIERARCHICAL], 1);
        assert_eq!(report.rejected[reason::RELATIVE_URL], 1);
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
        assert!(report.cleaned.is_empty(), "{:?}", report.cleaned);
        // The entry text of a doubled scheme is the inner URL the build reads.
        let readings = read_one(SourceFormat::Urls, b"http://https://inner.example/login").unwrap();
        assert_eq!(readings[0].text, b"https://inner.example/login");
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
        assert_eq!(report.rejected[reason::NOT_A_HOST_NAME], 1);
        let readings = read_one(SourceFormat::Domains, b"*.wild.example").unwrap();
        assert_eq!(readings[0].text, b"wild.example");
    }

    // Issue 13, item 1: a page URL on a public-suffix host names one page.
    #[test]
    fn page_urls_on_public_suffix_hosts_are_accepted() {
        for (line, expression) in [
            // The issue's examples.
            (
                "https://s3.amazonaws.com/evil-bucket/login.html",
                "s3.amazonaws.com/evil-bucket/login.html",
            ),
            (
                "http://ec2-1-2-3-4.compute-1.amazonaws.com/paypal/login.php",
                "ec2-1-2-3-4.compute-1.amazonaws.com/paypal/login.php",
            ),
            (
                "https://nyc3.digitaloceanspaces.com/evilspace/office365.html",
                "nyc3.digitaloceanspaces.com/evilspace/office365.html",
            ),
            // Real lines of the 2018-2020 union feed (see
            // tests/fixtures/phishing-urls-union-quirks.txt for all of them).
            (
                "http://s3.eu-central-1.amazonaws.com/hadskjwedas/a1.html",
                "s3.eu-central-1.amazonaws.com/hadskjwedas/a1.html",
            ),
            (
                "http://ec2-3-88-191-223.compute-1.amazonaws.com/atendimento",
                "ec2-3-88-191-223.compute-1.amazonaws.com/atendimento",
            ),
            (
                "https://sgp1.digitaloceanspaces.com/9t152xfo/mvxnd2hc2g.html?5bjgsyc2ej=931zm1clyt&tpqd0z8bth=bzdu0l23gb&c75mr6v06x=hkuxmsn99b&email=user@example.invalid",
                "sgp1.digitaloceanspaces.com/9t152xfo/mvxnd2hc2g.html?5bjgsyc2ej=931zm1clyt&tpqd0z8bth=bzdu0l23gb&c75mr6v06x=hkuxmsn99b&email=user@example.invalid",
            ),
            // A query on the root path is one page too.
            (
                "http://s3.amazonaws.com/?bucket=evil",
                "s3.amazonaws.com/?bucket=evil",
            ),
            // So is an adblock path rule.
            (
                "||s3.amazonaws.com/evil-bucket/login.html^$all",
                "s3.amazonaws.com/evil-bucket/login.html",
            ),
        ] {
            let format = if line.starts_with("||") {
                SourceFormat::AdblockHosts
            } else {
                SourceFormat::Urls
            };
            assert_eq!(
                exprs(format, line.as_bytes()),
                Ok(vec![expression.to_owned()]),
                "{line}"
            );
        }
    }

    // Issue 13, items 1 and 5: what stays rejected is host-wide, and says
    // which part of the Public Suffix List it is on.
    #[test]
    fn host_wide_entries_on_public_suffixes_are_rejected_by_section() {
        for (format, line, why) in [
            // Real lines: phishing-domains-hosts-2020.txt, urlhaus-filter.txt.
            (SourceFormat::Hosts, "0.0.0.0 com", reason::PUBLIC_SUFFIX_ICANN),
            (SourceFormat::Hosts, "0.0.0.0 IE", reason::PUBLIC_SUFFIX_ICANN),
            (
                SourceFormat::Hosts,
                "0.0.0.0 network.",
                reason::PUBLIC_SUFFIX_ICANN,
            ),
            (
                SourceFormat::Hosts,
                "0.0.0.0 s3.amazonaws.com",
                reason::PUBLIC_SUFFIX_PRIVATE,
            ),
            (
                SourceFormat::Hosts,
                "0.0.0.0 cluster013.hosting.ovh.net",
                reason::PUBLIC_SUFFIX_PRIVATE,
            ),
            (
                SourceFormat::AdblockHosts,
                "ams1.vultrobjects.com",
                reason::PUBLIC_SUFFIX_PRIVATE,
            ),
            (
                SourceFormat::AdblockHosts,
                "||s3.amazonaws.com^",
                reason::PUBLIC_SUFFIX_PRIVATE,
            ),
            (SourceFormat::Domains, "co.uk", reason::PUBLIC_SUFFIX_ICANN),
            (SourceFormat::Domains, "github.io", reason::PUBLIC_SUFFIX_PRIVATE),
            // The wildcard rule `*.compute-1.amazonaws.com` makes this a suffix.
            (
                SourceFormat::Domains,
                "ec2-1-2-3-4.compute-1.amazonaws.com",
                reason::PUBLIC_SUFFIX_PRIVATE,
            ),
            // A URL whose path is `/` (empty query included) is host-wide.
            (
                SourceFormat::Urls,
                "https://s3.amazonaws.com",
                reason::PUBLIC_SUFFIX_PRIVATE,
            ),
            (
                SourceFormat::Urls,
                "https://s3.amazonaws.com//?",
                reason::PUBLIC_SUFFIX_PRIVATE,
            ),
            (SourceFormat::Json, "com", reason::PUBLIC_SUFFIX_ICANN),
        ] {
            assert_eq!(exprs(format, line.as_bytes()), Err(why), "{format:?} {line}");
        }
        assert_eq!(
            exprs(SourceFormat::Domains, b"user.github.io"),
            Ok(vec!["user.github.io/".to_owned()])
        );
        let (out, report) = collect(b"http://0.0.0.0/\nhttp://127.0.0.1/x\n", SourceFormat::Urls);
        assert!(out.is_empty());
        assert_eq!(report.rejected[reason::LOOPBACK], 2);
    }

    // Issue 13, item 5: a quoted line, a `!` token or a single-label host
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
            (SourceFormat::Urls, b"https:///2t2sAZF", reason::EMPTY_HOST),
            // Real items of MetaMask's blacklist.
            (SourceFormat::Json, b"com12786312634", reason::SINGLE_LABEL),
            (SourceFormat::Json, b"iclexofmarket", reason::SINGLE_LABEL),
            (SourceFormat::Domains, b"*.", reason::EMPTY_HOST_NAME),
            (SourceFormat::Domains, b"..", reason::EMPTY_HOST_NAME),
            (SourceFormat::AdblockHosts, b"@@||ok.example^", reason::ADBLOCK_EXCEPTION),
            (SourceFormat::AdblockHosts, b"||*.ads^", reason::ADBLOCK_NOT_HOST_OR_URL),
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

    // Issue 13, item 2.
    #[test]
    fn url_line_with_a_trailing_comment_is_cut_and_counted() {
        let line = b"http://comment.example/p # seen 2020-01-01";
        let out = read_line(SourceFormat::Urls, line);
        assert_eq!(out.cleaned, [cleaned::COMMENT]);
        let readings = read_one(SourceFormat::Urls, line).unwrap();
        assert_eq!(readings[0].text, b"http://comment.example/p");
        assert_eq!(readings[0].expressions, ["comment.example/p"]);
        // A `#` right after the URL is its fragment, not a comment.
        let out = read_line(
            SourceFormat::Urls,
            b"https://bcpzonasegurabeta.viabcp.com/#/iniciar-sesion",
        );
        assert!(out.cleaned.is_empty());
        assert_eq!(
            exprs(
                SourceFormat::Urls,
                b"https://bcpzonasegurabeta.viabcp.com/#/iniciar-sesion"
            ),
            Ok(vec!["bcpzonasegurabeta.viabcp.com/".to_owned()])
        );
        let (out, report) = collect(
            b"http://comment.example/p\t# x\nhttp://c.example/q  #\n",
            SourceFormat::Urls,
        );
        assert_eq!(out, hashes(&["comment.example/p", "c.example/q"]));
        // A TAB before the `#` is white space before a comment.
        assert_eq!(report.cleaned[cleaned::COMMENT], 2);
        assert!(!report.cleaned.contains_key(cleaned::COLUMN));
        // Unicode white space before `#` too.
        assert_eq!(
            exprs(
                SourceFormat::Urls,
                "http://a.example/p\u{a0}# seen 2020".as_bytes()
            ),
            Ok(vec!["a.example/p".to_owned()])
        );
    }

    // Issue 13, item 2.
    #[test]
    fn url_line_with_a_tab_column_is_cut_and_counted() {
        let line = b"http://tab.example/mid\t2020-01-01";
        let readings = read_one(SourceFormat::Urls, line).unwrap();
        assert_eq!(readings[0].text, b"http://tab.example/mid");
        assert_eq!(readings[0].expressions, ["tab.example/mid"]);
        let (out, report) = collect(line, SourceFormat::Urls);
        assert_eq!(out, hashes(&["tab.example/mid"]));
        assert_eq!(report.cleaned[cleaned::COLUMN], 1);
        assert_eq!(report.accepted, 1);
    }

    // Issue 13, item 2: a space is a column separator or part of the URL;
    // both readings are published so that neither is lost.
    #[test]
    fn url_line_with_a_space_inside_is_read_both_ways() {
        let line = b"http://x.example/my file.html";
        let readings = read_one(SourceFormat::Urls, line).unwrap();
        let texts: Vec<&[u8]> = readings.iter().map(|r| r.text.as_slice()).collect();
        assert_eq!(texts, [&b"http://x.example/my"[..], &line[..]]);
        assert_eq!(
            exprs(SourceFormat::Urls, line),
            Ok(vec![
                "x.example/my".to_owned(),
                "x.example/my%20file.html".to_owned()
            ])
        );
        let (out, report) = collect(b"http://x.example/p seen 2020-01-01\n", SourceFormat::Urls);
        assert_eq!(out, hashes(&["x.example/p", "x.example/p%20seen%202020-01-01"]));
        assert_eq!((report.accepted, report.cleaned[cleaned::SPACE]), (1, 1));
        // A space in the fragment changes nothing.
        assert_eq!(
            exprs(SourceFormat::Urls, b"http://x.example/p#a b"),
            Ok(vec!["x.example/p".to_owned()])
        );
        // When the cut reading is refused, the line as written still counts.
        assert_eq!(
            exprs(SourceFormat::Urls, b"http://evil .example/p"),
            Ok(vec!["evil%20.example/p".to_owned()])
        );
    }

    // Issue 13, item 3: real lines of the union feed end in U+00A0 or U+FEFF.
    #[test]
    fn unicode_white_space_is_trimmed_from_feed_lines() {
        for (line, expression) in [
            ("http://ulvis.net/IFHc\u{a0}", "ulvis.net/IFHc"),
            ("https://clck.ru/NdB3a\u{a0}", "clck.ru/NdB3a"),
            ("https://clck.ru/PR3CL?/w/seed/\u{a0}", "clck.ru/PR3CL?/w/seed/"),
            ("https://j.mp/2Ru15Ss\u{a0}", "j.mp/2Ru15Ss"),
            (
                "https://ginexis.blogspot.com/?23sk\u{feff}",
                "ginexis.blogspot.com/?23sk",
            ),
            (
                "\u{3000}\u{2003}http://lead.example/x\u{202f}\u{205f}\u{200a} ",
                "lead.example/x",
            ),
        ] {
            let out = read_line(SourceFormat::Urls, line.as_bytes());
            assert_eq!(out.cleaned, [cleaned::UNICODE_WHITE_SPACE], "{line:?}");
            assert_eq!(
                exprs(SourceFormat::Urls, line.as_bytes()),
                Ok(vec![expression.to_owned()])
            );
        }
        // Every line format, and JSON strings.
        assert_eq!(
            exprs(SourceFormat::Hosts, "0.0.0.0 evil.example\u{a0}".as_bytes()),
            Ok(vec!["evil.example/".to_owned()])
        );
        assert_eq!(
            exprs(SourceFormat::Json, "\u{feff}evil.example\u{3000}".as_bytes()),
            Ok(vec!["evil.example/".to_owned()])
        );
        // Inside a URL, U+00A0 separates fields as a space does: the line is
        // read cut there and as written (the canonicalizer escapes it).
        assert_eq!(
            exprs(SourceFormat::Urls, "http://a.example/x\u{a0}y".as_bytes()),
            Ok(vec!["a.example/x".to_owned(), "a.example/x%C2%A0y".to_owned()])
        );
        // A byte that is not UTF-8 at the end is no white space.
        assert_eq!(
            exprs(SourceFormat::Urls, b"http://a.example/x\xa0"),
            Ok(vec!["a.example/x%A0".to_owned()])
        );
        let (_, report) = collect("http://ulvis.net/IFHc\u{a0}\n".as_bytes(), SourceFormat::Urls);
        assert_eq!(report.cleaned[cleaned::UNICODE_WHITE_SPACE], 1);
    }

    // Issue 13, item 4.
    #[test]
    fn quoted_lines_lose_one_pair_of_quotes() {
        let readings = read_one(SourceFormat::Urls, b"\"https://x.example/a,b,c\"").unwrap();
        assert_eq!(readings[0].text, b"https://x.example/a,b,c");
        assert_eq!(readings[0].expressions, ["x.example/a,b,c"]);
        assert_eq!(
            read_line(SourceFormat::Urls, b"\"https://x.example/a,b,c\"").cleaned,
            [cleaned::QUOTES]
        );
        assert_eq!(
            exprs(SourceFormat::Urls, b"'https://x.example/a'"),
            Ok(vec!["x.example/a".to_owned()])
        );
        // Quotes then a comment or a column.
        assert_eq!(
            exprs(SourceFormat::Urls, b"\"https://x.example/a\"  # note"),
            Ok(vec!["x.example/a".to_owned()])
        );
        // Only one pair, and only a matching one.
        assert_eq!(
            exprs(SourceFormat::Urls, b"\"\"https://x.example/a\"\""),
            Ok(vec!["\"https/x.example/a\"".to_owned()])
        );
        // Unmatched quotes stay, and a host name holds none.
        assert_eq!(
            read_one(SourceFormat::Domains, b"'evil.example\"").map(|_| ()),
            Err(reason::NOT_A_HOST_NAME)
        );
        // An empty quoted line is blank.
        assert!(read_line(SourceFormat::Urls, b"\"\"").is_skipped());
    }

    // Issue 13, item 6.
    #[test]
    fn json_feed_with_a_byte_order_mark_is_read() {
        let json = b"\xEF\xBB\xBF{\"blacklist\": [\"metmask.com\", \"usermd.net\"]}";
        let (out, report) = collect(json, SourceFormat::Json);
        assert_eq!(out, hashes(&["metmask.com/", "usermd.net/"]));
        assert_eq!(report.rejected_total(), 0);
    }

    #[test]
    fn adblock_rules() {
        let text = b"! Title: x\nbad.example\n||evil.example^\n||files.example/a/b.exe^$all\n||*.ads^\n@@||ok.example^\n1.2.3.4\nexample.com##.ad\n";
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
        assert_eq!(report.rejected_total(), 3);
        assert_eq!(report.rejected[reason::ADBLOCK_COSMETIC], 1);
        let readings = read_one(SourceFormat::AdblockHosts, b"||files.example/a/b.exe^$all").unwrap();
        assert_eq!(readings[0].text, b"files.example/a/b.exe");
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

    /// Every line of the union feed the build rejected before issue 13, and
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
                            let url = canonicalize(strip_doubled_scheme(&r.text)).unwrap();
                            let own = most_specific(&url).unwrap_or_default();
                            assert!(r.expressions.iter().any(|e| e == own), "{own}");
                            if is_host_wide(&url) {
                                assert!(psl::domain_str(url.host()).is_some(), "{}", r.expressions[0]);
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
            ("http:///bonuscommissions.com/", reason::EMPTY_HOST),
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
            ("https:///2t2sAZF", reason::EMPTY_HOST),
            ("https://acct-piedmontcancerinstitute-inv", reason::SINGLE_LABEL),
        ];
        assert_eq!(rejected.len(), want.len(), "{rejected:?}");
        for ((text, why), (start, want_why)) in rejected.iter().zip(want) {
            assert!(text.starts_with(start) && *why == want_why, "{text}: {why}");
        }
        assert_eq!((accepted, trimmed), (193, 14));
    }

    #[test]
    fn read_line_finds_what_the_build_finds() {
        let feed = "http://a.example/x # c\n\"http://b.example/y\"\thit\nhttp://c.example/p q\nhttp://ulvis.net/IFHc\u{a0}\n\
                    http://s3.amazonaws.com/\nhttp://s3.amazonaws.com/b/k.html\nhttp://d.example/p?x=1&amp;y=2 z\n";
        crate::fuzzing::check_feed(&[&[0u8][..], feed.as_bytes()].concat());
        let hosts = "0.0.0.0 a.example com b.example # c\n'0.0.0.0 c.example'\n";
        crate::fuzzing::check_feed(&[&[1u8][..], hosts.as_bytes()].concat());
    }

    #[test]
    fn html_detection() {
        assert!(looks_like_html(b"\n  <!DOCTYPE html><html>"));
        assert!(looks_like_html(b"<html><body>Login</body></html>"));
        assert!(!looks_like_html(b"http://a.example/\n"));
    }
}
