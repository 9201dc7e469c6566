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

// Where each step lives: `document` splits a fetched document into lines;
// `clean` runs steps 1 to 3 for every line format, `urls` steps 3 to 5 for
// a `urls` line; `url_entry`, `hosts`, `adblock` and `sha256` say what an
// entry stands for, and `breadth` which entries would block too much;
// `json` and `csv` read the document formats item by item; `read` is the
// one code path a build and `read_line` share.
mod adblock;
mod breadth;
mod clean;
mod csv;
mod document;
mod hosts;
mod json;
mod read;
mod sha256;
#[cfg(test)]
mod tests;
mod url_entry;
mod urls;

use std::collections::BTreeMap;
use std::time::Duration;

use blocksieve_format::FullHash;

use crate::config::SourceFormat;

pub use document::{feed_lines, looks_like_html};
pub use hosts::domain_expression;
pub use url_entry::{url_expression, url_expressions};

use csv::parse_csv;
use json::parse_json;
use read::{Collect, Reader, read_line_with};

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
