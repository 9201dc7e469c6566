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
//!    ends: C0 controls and ASCII white space (as the URL Standard's parser
//!    trims them, and the agent), Unicode white space — U+00A0 NO-BREAK
//!    SPACE, U+2000 to U+200A, U+202F, U+205F, U+3000 and the other
//!    characters Unicode calls white space (U+0085, U+1680, U+2028, U+2029)
//!    — the invisible U+FEFF, U+200B and U+2060, and the bidirectional
//!    marks (U+200E, U+200F, U+061C, U+202A to U+202E, U+2066 to U+2069,
//!    left by copying from a right-to-left page). Feeds copied from web
//!    pages carry them (`http://ulvis.net/IFHc` + U+00A0); kept, they would
//!    be escaped into the URL (`…/IFHc%C2%A0`), a page nobody visits. The
//!    canonicalizer itself is not changed: a URL checked by an agent is
//!    read as browsers read it.
//! 2. Blank lines and comments are skipped: a line starting with `#`, and
//!    with `!` in adblock lists and URL lists (which keep adblock headers:
//!    `! Homepage: https://…` would otherwise list that page), and there
//!    the syntax's header line too (`[Adblock Plus 2.0]`).
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
//!      first dotted-quad address, else the first field (a date written
//!      with slashes, `01/02/2020`, holds no URL). The others are
//!      columns and are dropped (`http://tab.example/mid<TAB>2020-01-01`,
//!      `1<TAB>http://a.example/p`, `"Phishing" http://a.example/p`,
//!      `2020-01-01 a.example/login`). Several URL fields with a scheme are
//!      each read. The first field wrapped in `<…>` or `(…)`, or opened by
//!      a quote nothing closes (`<http://…>`, `'http://…`), loses the
//!      wrapper, which would otherwise become its host, when no other field
//!      names a host or URL; beside one it is an annotation or ambiguous
//!      (`evil.example/login (http://bank.example/login)`).
//!    - `hosts`, `domains`, `sha256`: a `#` anywhere starts a comment (no
//!      host name or hex digit holds one); `hosts` names are separated by
//!      ASCII or Unicode white space.
//! 5. `urls`: a URL as written never holds a raw space, but browsers escape
//!    one (`%20`) where a page's link has it, so unquoted fields that follow
//!    a URL field after spaces (no TAB) are ambiguous: columns, or part of
//!    the URL. The URL is read as written with them and as the field
//!    alone when the space falls after the host (the field holds a `/`,
//!    `\`, `?` or `#` past its authority), or when only columns follow
//!    (`http://evil.example 2020-01-01`, `evil.example (PayPal)`: dates,
//!    times and numbers up to a separator or a parenthesis, for the line's
//!    one URL field, no `@` or `://` anywhere after and no `%` before the
//!    comment; a word may be the rest of a split host,
//!    `http://www.paypal.co m`;
//!    `urls::only_columns_follow`). A space inside a
//!    host makes no URL, and the field alone would list a host-wide
//!    expression for a host the line does not name
//!    (`http://bank.example .evil.example/`, counted as
//!    [`cleaned::SPACE_IN_HOST`]). The same holds for a space inside a
//!    quoted URL.
//! 6. `urls`, `csv` and adblock URL rules: feed artifacts are read past —
//!    a doubled scheme (`http://https://…`), more than two slashes after
//!    `http:` or `https:`, `/` and `\` in any mix (`http:///host/…`,
//!    `http:\\\host/…`, which the URL Standard's parser skips), and a defanged scheme or host, made visitable again
//!    (`hxxp[:]//evil[.]example/`, also `(.)`, `{.}`, `[dot]`; a path
//!    defanged too is listed both as written and refanged); a host that
//!    still holds a character no browser accepts in a host is refused
//!    ([`reason::FORBIDDEN_IN_HOST`]), never listed to match nothing. An
//!    IPv4 host (in every format) is also listed IPv4-mapped
//!    (`[::ffff:1.2.3.4]`, which browsers connect to as the IPv4 address,
//!    and the agent reads as a host of its own), and the other way round. An
//!    IPv6 host (in every format) is listed in both its canonical forms:
//!    the Safe Browsing form keeps an embedded IPv4 address as written, so
//!    `[64:ff9b::1.2.3.4]` is also listed as browsers send it, in
//!    hexadecimal (`[64:ff9b::102:304]`), and a hexadecimal one also
//!    dotted, as a caller passing a URL as written may give it. The
//!    canonicalizer itself is not changed: an agent reads the URL it checks
//!    as the Safe Browsing rules say.
//!
//! A domain entry must look like a host name (letters, digits, `-`, `_`,
//! `.`, `%`-escapes, non-ASCII characters other than white space — the
//! invisible U+FEFF, U+200B and U+2060 inside a name are kept, and the
//! IDNA mapping removes them as browsers do —, an
//! optional `:port`, or an IPv6 address, bare or bracketed with an optional
//! `:port`); anything else is [`reason::NOT_A_HOST_NAME`],
//! never a garbage `host/` entry. Commas belong to a URL
//! (`https://x.example/a,b,c`): a comma-separated export is read with the
//! `csv` format.
//!
//! What each step removed is counted by kind in [`ParseReport::cleaned`]
//! (kinds in [`cleaned`]), shown in the build report and in `/v1/lists`.
//! CSV values and JSON array strings are read as items: steps 1 and 3 only
//! (in step 3 a CSV value also loses a lone quote before its URL,
//! `"http://…` with no closing quote, as a `urls` line does).
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
//! `&`, so such a line is listed both decoded and as written (a line
//! escaped more than once, `&amp;amp;`, at every level); a doubled
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
// a `urls` line, with the white space and quotes of `white`; `url_entry`,
// `hosts`, `adblock` and `sha256` say what an entry stands for (an `entry`),
// `scheme` what a URL line's scheme artifacts are (a doubled scheme, extra
// slashes) and `breadth` which entries would block too much; `json` and `csv` read
// the document formats item by item; `read` is the one code path a build
// and `read_line` share, telling what it finds to a visitor of `visit`
// (the build's `Reader`, `read_line`'s `Collect`). `outcome` holds what
// reading produces, `sink` where full hashes go, `options` the document
// formats' options.
mod adblock;
mod breadth;
mod clean;
mod csv;
mod document;
mod entry;
mod hosts;
mod json;
mod options;
mod outcome;
mod read;
mod scheme;
mod sha256;
mod sink;
#[cfg(test)]
mod tests;
mod url_entry;
mod urls;
mod visit;
mod white;

use blocksieve_format::FullHash;

use crate::config::SourceFormat;

pub use document::{FeedLines, feed_lines, looks_like_html};
pub use hosts::domain_expression;
pub use options::FormatOptions;
pub use outcome::{EntryOutcome, LineOutcome, ParseReport, REJECT_SAMPLES, Reading, cleaned, reason};
pub use sink::EntrySink;
pub use url_entry::{MAX_AMP_LEVELS, url_expression, url_expressions};

use csv::parse_csv;
use json::parse_json;
use read::read_line_with;
use sink::HashEach;
use visit::{Collect, Reader};

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
