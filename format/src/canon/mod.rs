//! URL canonicalization and host-suffix/path-prefix expressions.
//!
//! This module implements the "URLs and Hashing" rules of the Safe Browsing
//! Update API v4 (<https://developers.google.com/safe-browsing/v4/urls-hashing>,
//! sections "Canonicalization" and "Suffix/Prefix Expressions"). Publisher and
//! agent must produce byte-identical expression strings for every URL, or a
//! lookup silently misses; both sides therefore call only [`canonicalize`] and
//! [`CanonicalUrl::expressions`].
//!
//! # Steps, in order
//!
//! 1. Remove every tab (0x09), CR (0x0d) and LF (0x0a) byte, but not their
//!    escapes (`%09`, `%0d`, `%0a`) (v4 "Canonicalization", first paragraph).
//! 2. Trim leading and trailing bytes `<= 0x20` (C0 controls and space, as the
//!    WHATWG URL Standard does; the v4 text says "whitespace").
//! 3. Cut the fragment at the first `#` (v4: "if the URL ends in a fragment,
//!    remove the fragment"). This happens *before* unescaping, so an escaped
//!    `%23` survives as a literal `#` in the host or path (official vector
//!    `http://host.com/ab%23cd`).
//! 4. Percent-unescape repeatedly until no escape is left (v4: "repeatedly
//!    percent-unescape the URL until it has no more percent-escapes"). This
//!    is done in one left-to-right pass that re-examines the output after each
//!    decoded byte, which reaches the same fixed point as repeated passes in
//!    linear time (a 64 KiB `%252525…` would otherwise take quadratic time).
//!    The URL is first split on its delimiters *as written* — scheme,
//!    authority, and within the authority the userinfo, host and port — and
//!    each part is unescaped on its own; the path and query are unescaped
//!    together and then split at their first `?`, as v4 says. Unescaping the
//!    whole URL before splitting it, as the v4 text reads literally, lets an
//!    escaped delimiter move the host: `https://www.wikipedia.org%2F@evil.bet/`
//!    would read as host `www.wikipedia.org`, while browsers (WHATWG URL
//!    Standard, Chromium) split first and go to `evil.bet` — a false negative
//!    on a crafted URL. A host that holds `/`, `\`, `?`, `@` or `:` once
//!    unescaped (`http://a.com%2Fb/`) is rejected with
//!    [`CanonError::DelimiterInHost`]: browsers refuse it, so no page is
//!    behind it. Only when the input as written has no scheme and unescaping
//!    reveals one (`http%3A%2F%2Fwackyurl.com:80/`, a Go client vector) is the
//!    whole URL unescaped first.
//! 5. Split off the scheme. A scheme is `[A-Za-z][A-Za-z0-9+.-]*:`. Followed by
//!    `//` it is kept (lowercased). For `http` and `https` the two slashes
//!    may be `/` or `\` in any mix, and there may be none or one
//!    (`https:\\evil.com\x`, `https:/\evil.com/`, `https:evil.com`), since
//!    browsers go to `evil.com` for each (WHATWG "special authority ignore
//!    slashes state"); three or more leave an empty authority and are
//!    rejected (`http:///blah`, conformance section G). A URL without a scheme
//!    is treated as `http://` + URL (v4: "if the URL has no scheme, assume
//!    http"). A `host:port` input such as `example.com:8080/x` is read as a
//!    host with a port, not as the scheme `example.com`; but `http:` or
//!    `https:` followed by digits is that scheme and a numeric host
//!    (`http:16909060/` is `http://1.2.3.4/`), as browsers read it. Any
//!    other scheme that is not followed by `//` (`mailto:`, `javascript:`,
//!    `data:`) is rejected with [`CanonError::NotHierarchical`]: these URLs
//!    have no host to look up.
//! 6. The query starts at the first `?` after the scheme (so `http://a.com?q`
//!    has host `a.com`, path `/` and query `q`), and the authority ends at the
//!    first `/` or `\` (browsers treat `\` as `/` in http(s) URLs). Userinfo
//!    (everything up to the last `@`) and the port are dropped (v4 official
//!    vector `http://www.gotaport.com:1234/` → no port; the v2/v3 documents
//!    kept it, the v4 ones do not). Outside brackets the host ends at the
//!    *first* `:`, as in the WHATWG URL Standard's host parser; whatever
//!    follows is the port and is dropped even when it is not a number
//!    (`http://a:b:c/` → host `a`), where a browser would reject the URL.
//!    Dropping at the last `:` would leave `a:b`, which does not parse back to
//!    itself.
//! 7. Host (v4 "To canonicalize the hostname"): the ideographic full stops
//!    U+3002, U+FF0E and U+FF61 become `.`; leading and trailing dots are
//!    removed and runs of dots collapse to one; ASCII letters are lowercased;
//!    a host with non-ASCII characters that is valid UTF-8 is converted to
//!    Punycode by UTS #46 (the `idna` crate), so `www.ümlat.com` becomes
//!    `www.xn--mlat-zra.com`. A host that is not valid UTF-8, or that UTS #46
//!    rejects, keeps its bytes (escaped in step 9), like Chromium's
//!    `http://%01%80.com/` official vector. UTS #46 output that holds one of
//!    `% # / : ? @ [ \ ]` counts as rejected (the WHATWG URL Standard's
//!    "domain to ASCII" fails on these "forbidden domain code points"):
//!    U+FF0F FULLWIDTH SOLIDUS maps to `/`, and deleting U+00AD SOFT HYPHEN
//!    can join `%` and two hex digits into an escape, so accepting them would
//!    make a canonical URL that canonicalizes to something else. One
//!    exception, as Chromium reads it: when the host holds no `%` of its own
//!    and only the escapes UTS #46 made (U+FF05 FULLWIDTH PERCENT SIGN maps
//!    to `%`) stand in the way, they are decoded, since Chromium unescapes
//!    its IDNA output again and visits `http://％65vil.com/` as `evil.com`;
//!    a result that is not an ASCII host free of those bytes keeps the
//!    bytes, as Chromium refuses it. ASCII hosts
//!    never go through UTS #46 and keep bytes such as `<>^|`, as in the Go
//!    client's `http://W!eird<>Ho$^.com/` vector. A host that parses as an IPv4
//!    address in any form browsers accept (1 to 4 parts, each decimal, octal
//!    with a leading `0`, or hex with `0x`; the last part fills the remaining
//!    bytes — the WHATWG "IPv4 parser") becomes dotted decimal, so
//!    `3279880203` is `195.127.0.11` and `10.1` is `10.0.0.1`. A number that
//!    overflows its part is not an address and stays a host name. A bracketed
//!    host must be an IPv6 address; it is written in RFC 5952 form (lowercase,
//!    longest zero run as `::`) inside its brackets, except that an address
//!    written with an embedded dotted quad keeps that quad (`[::192.9.5.5]`,
//!    as in the Go client's vectors); that quad may be written as Chromium
//!    reads it (leading zeros, octal, `0x` parts: `[::ffff:0x7f.0.0.1]` is
//!    `[::ffff:127.0.0.1]`). An empty host is rejected with
//!    [`CanonError::EmptyHost`]; a host name that starts with `[` once its
//!    leading dots are stripped (`http://.[::1]/`) is rejected with
//!    [`CanonError::InvalidIpv6`], since its canonical form would read as an
//!    IPv6 literal.
//! 8. Path (v4 "To canonicalize the path"): `\` becomes `/`, `/./` is removed,
//!    `/../` removes the previous segment, runs of `/` collapse to one, and an
//!    empty path becomes `/`. A trailing slash is kept. The query is never
//!    changed except by escaping; an empty query (`q?`) is kept in the
//!    canonical URL. Before step 4 unescapes it, the path as written is
//!    resolved as browsers resolve it (WHATWG URL Standard, "path state"):
//!    `\` read as `/`, and the dot segments `.` and `..` (also written
//!    `%2e`) resolved while every other escape is still as written, `..`
//!    removing an empty segment too (`a//../b` is `/a/b`, `a%2Fb/../c` is
//!    `/c`, `p%3Fq/../r` is `/r`). A browser hands the Safe Browsing client
//!    the URL in that form, so a listed URL and the browser's form of it
//!    must canonicalize alike (`tests/properties.rs`, property 6).
//! 9. Escape every byte `<= 0x20`, `>= 0x7f`, `#` and `%` as `%XX` with
//!    uppercase hex digits (v4: "percent-escape all characters that are <=
//!    ASCII 32, >= 127, "#", or "%""). The canonical URL is therefore always
//!    ASCII.
//!
//! # Expressions
//!
//! [`CanonicalUrl::expressions`] yields the host-suffix/path-prefix
//! combinations of v4 "Suffix/Prefix Expressions":
//!
//! - hosts: the exact host, then up to four more formed from the last five
//!   labels by removing the leading label each time, never the bare top-level
//!   label; an IP address host yields only itself. (The Go client uses the
//!   last seven labels; the v4 text and its example say five.)
//! - paths: the exact path with the query (only when the query is not
//!   empty, as Chromium and the Go client do), the exact path, and up to four
//!   root-anchored directory prefixes `/`, `/a/`, `/a/b/`, `/a/b/c/`.
//!
//! That is at most 5 × 6 = 30 distinct expressions per URL. Expressions borrow
//! from the [`CanonicalUrl`]; iterating allocates nothing.
//! [`CanonicalUrl::full_hashes_into`] hashes them all, in the same order, in
//! one loop; [`full_hashes`] does the same from the URL as given, without a
//! [`CanonicalUrl`] when none is needed: what a client checking a URL needs.
//!
//! # Where the sources disagree
//!
//! The v4 page is the reference; the other sources are the v2 protocol spec
//! and v3 page, the Go client (`google/safebrowsing`, `urls.go`), Chromium's
//! `V4ProtocolManagerUtil` and the WHATWG URL Standard that browsers follow.
//! `tests/data/canonicalization.tsv` and `tests/data/expressions.txt` record
//! the vectors; where they conflict this module decides:
//!
//! | question | sources | decision |
//! |---|---|---|
//! | port | v2/v3 vector keeps `gotaport.com:1234`; v4 strips it | dropped (v4) |
//! | host suffixes | v4 text and example: last five labels; Go: last seven (`maxHostComponents = 7`) | five (v4) |
//! | query in the canonical URL | Go's `canonicalURL` drops it; v4 vectors keep it (`http://evil.com/foo?bar;`) | kept (v4) |
//! | escape case | Go writes lowercase hex; v4 vectors uppercase (`%25`) | uppercase (v4) |
//! | empty query (`q?`) | v4 vector keeps `?` in the canonical URL; Chromium and Go make no `?` expression for it | both: kept in the string, no query expression |
//! | IPv6 with an embedded IPv4 | RFC 5952 section 4 would write hex; section 5 and the Go vectors keep the dotted quad | dotted quad kept when written so |
//! | whitespace trimmed | v4: "leading and trailing whitespace"; WHATWG: C0 controls and space | every byte `<= 0x20` (WHATWG) |
//! | `\` in the path | v4 silent; browsers (WHATWG) read it as `/` in http(s) | `/` |
//! | dot segments and escaped delimiters (`a//../b`, `a%2Fb/../c`, `p%3Fq/../r`) | v4: unescape, then resolve (`/b`, `/a/c`, a query `q/../r`); browsers resolve the path as written first, and Chromium's client unescapes what they hand it (`/a/b`, `/c`, `/r`) | as browsers: resolved as written, then unescaped and resolved again (step 8) |
//! | `http:///host` | WHATWG skips extra slashes; Go and the 2010 Python client reject (`http:///blah`) | rejected (conformance section G) |
//! | `https:host`, `https:\\host`, `https:/\host` | v4 silent ("a scheme not followed by `//`"); WHATWG and Chromium go to `host` | read as `https://host` for http(s) only |
//! | when to unescape | v4 text: unescape the whole URL, then parse; browsers: parse, then unescape each part | split on the delimiters as written, then unescape each part (step 4); whole-URL unescape only when no scheme is written |
//! | host unescaping to `/ \ ? @ :` | v4 silent; WHATWG and Chromium reject the URL | rejected ([`CanonError::DelimiterInHost`]) |
//! | host bytes such as `<>^`, controls | WHATWG rejects forbidden host code points; Go keeps `W!eird<>Ho$^.com`, Chromium escapes `%01%80.com` | kept and escaped (v4/Go) |
//! | IPv4 forms | v4: "any legal form" (examples only); WHATWG defines the IPv4 parser | WHATWG parser; an overflowing number stays a name |
//! | non-numeric port, first vs last `:` | WHATWG: host ends at the first `:`, bad port rejects the URL | host ends at the first `:`, port dropped |
//!
//! # Two ways through, one result
//!
//! [`canonicalize`] first tries a one-pass common case: a URL that starts
//! with `http://` or `https://` (or has no scheme), whose authority is a
//! plain host (no userinfo, no byte to escape or unescape; uppercase letters
//! and a numeric port are fine) is read 64 bytes at a time, each block
//! classified into bit masks sixteen bytes at a time (portable SIMD through
//! the `wide` crate). The masks give where the authority, path, query and
//! fragment end, whether the host has stray dots and whether the path has a
//! dot segment, `//`, `\` or a byte to escape or unescape. A URL canonical as
//! written is then copied in one piece; otherwise only the parts that need
//! them go through steps 4, 8 and 9. The same masks give the host's dots and
//! the path's first slashes, so listing the expressions scans nothing again.
//! Every other input (userinfo, escapes or controls in the host, IPv6,
//! other schemes, browser forms) goes through the steps one by one.
//!
//! Of the 1,137,899 entries of the project's threat feeds, all but 47 take
//! the common case, as do 105,703 of the 105,715 benign URLs of its traffic
//! sample; it costs about half as much as the steps. Most are canonical as
//! written (1,081,484 of the feed entries, 105,527 of the benign URLs), and
//! [`full_hashes`] hashes their expressions as slices of the input, with no
//! copy. The two ways must agree exactly on every input: the property tests, the fuzz
//! target and the feed sweep (`examples/feed_sweep.rs`) compare them on every
//! input they see (`crate::fuzzing::check_invariants`), and check the
//! expressions against the v4 definition written out string by string.
//!
//! # Idempotence
//!
//! A canonical URL canonicalizes to itself: every rule above leaves its own
//! output unchanged, and the three places where an earlier version did not,
//! found by the property tests (`http://::/` and `http://a:b:c/` under a
//! last-`:` port rule, UTS #46 output holding URL delimiters such as
//! `http://%中文00/`, and `http://.[::1]/`, a name left starting with `[`),
//! are decided as described in steps 6 and 7. One exception is inherent in the
//! limit, not the rules: escaping can make the canonical URL up to three times
//! longer than its input, so a canonical URL longer than [`MAX_URL_BYTES`] is
//! rejected as [`CanonError::TooLong`] when canonicalized again. The property
//! tests (`tests/properties.rs`) and the fuzz target (`fuzz/`) check this.
//!
//! # Where each part lives
//!
//! | file | what |
//! |---|---|
//! | `url` | [`CanonicalUrl`] (one buffer and the offsets of its parts, with the layout of its host suffixes and directory prefixes), [`CanonError`], [`HostKind`], the limits |
//! | `escape` | step 4's unescaping, step 9's escaping, the byte classes |
//! | `steps` | the general path: steps 1 to 6, then `host` (step 7) and `path` (step 8) |
//! | `common` | the one-pass common case, which must agree with the steps |
//! | `expressions` | [`CanonicalUrl::expressions`]: the host-suffix/path-prefix expressions |
//! | `hashing` | [`full_hashes`]: a URL's expressions hashed in one pass |
//!
//! Files import one way: `url` and `escape` use nothing of the module,
//! `hashing` and `common` sit on top, and this file only picks the common
//! case or the steps.

mod common;
mod escape;
mod expressions;
mod form;
mod hashed;
mod hashing;
mod host;
mod path;
mod steps;
mod text;
mod url;

use common::canonicalize_common;

pub(crate) use common::{canonical_as_written, takes_common_case};
pub use expressions::{Expression, Expressions};
pub use form::{AsWrittenUrl, CanonicalForm, canonicalize_form};
pub use hashed::HashedUrl;
pub use hashing::full_hashes;
pub(crate) use steps::canonicalize_by_steps;
pub use text::{is_text_white_space, trim_url_text};
use url::check_length;
pub use url::{CanonError, CanonicalUrl, HostKind, MAX_EXPRESSIONS, MAX_URL_BYTES};

/// Canonicalizes `input` by the Safe Browsing v4 rules (see the module docs).
///
/// Accepts any bytes: feeds contain lines that are not valid UTF-8, and raw
/// bytes `>= 0x80` in a URL are escaped, not rejected.
///
/// # Errors
///
/// [`CanonError`] when the input names no host: empty, too long, relative,
/// a non-hierarchical scheme such as `mailto:`, an empty host or a bracketed
/// host that is not IPv6.
///
/// ```
/// use blocksieve_format::{canonicalize, CanonError};
/// let url = canonicalize("HTTP://www.GOOgle.com:80/a/./b/../c?x#frag").unwrap();
/// assert_eq!(url.to_string(), "http://www.google.com/a/c?x");
/// assert_eq!(canonicalize("/just/a/path"), Err(CanonError::RelativeUrl));
/// ```
pub fn canonicalize(input: impl AsRef<[u8]>) -> Result<CanonicalUrl, CanonError> {
    canonicalize_bytes(input.as_ref())
}

/// `bytes` as URL text for an API that takes `&str` (the agent's
/// checks): each byte that is not part of valid UTF-8 percent-escaped,
/// as [`canonicalize`] escapes a raw byte, so the text canonicalizes as
/// the bytes do (a Latin-1 `caf\xe9` is `caf%E9`; replacing the byte with
/// U+FFFD would check another URL). Borrowed when `bytes` are UTF-8.
///
/// Each escaped byte is three in the text, and [`MAX_URL_BYTES`] counts
/// the text: bytes under the limit whose escapes take the text over it
/// (about 700 KiB of bytes that are not UTF-8) are
/// [`CanonError::TooLong`] as text, an invalid URL, never a safe one.
/// Escaping stops once the text is past the limit (it is refused either
/// way), so bytes far over it cost no more than the limit: an API taking
/// bytes refuses those over [`MAX_URL_BYTES`] before calling this, to
/// report their own length.
///
/// ```
/// use blocksieve_format::{canonicalize, url_text};
/// let raw = b"http://evil.example/caf\xe9";
/// assert_eq!(url_text(raw), "http://evil.example/caf%E9");
/// assert_eq!(canonicalize(url_text(raw).as_bytes()), canonicalize(raw));
/// ```
pub fn url_text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    if let Ok(text) = std::str::from_utf8(bytes) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut url = String::with_capacity(bytes.len().min(MAX_URL_BYTES) + 8);
    for chunk in bytes.utf8_chunks() {
        // Past the limit the text is refused whatever follows: escaping
        // the rest would only take memory (three bytes for each).
        if url.len() > MAX_URL_BYTES {
            break;
        }
        url.push_str(chunk.valid());
        for byte in chunk.invalid() {
            url.push('%');
            url.push(char::from(b"0123456789ABCDEF"[usize::from(byte >> 4)]));
            url.push(char::from(b"0123456789ABCDEF"[usize::from(byte & 15)]));
        }
    }
    std::borrow::Cow::Owned(url)
}

fn canonicalize_bytes(input: &[u8]) -> Result<CanonicalUrl, CanonError> {
    check_length(input)?;
    if let Some(url) = canonicalize_common(input) {
        return Ok(url);
    }
    canonicalize_by_steps(input)
}

#[cfg(test)]
mod tests {
    //! Helpers for the unit tests of the steps, the common case and the
    //! expressions, beside each.
    use super::*;

    pub(super) fn canon(s: &str) -> String {
        canonicalize(s)
            .map(|u| u.to_string())
            .unwrap_or_else(|e| format!("<{e}>"))
    }

    /// Idempotence counterexamples found by the property tests; each
    /// canonical form must canonicalize to itself.
    pub(super) fn assert_fixed_point(input: &str, expected: &str) {
        assert_eq!(canon(input), expected, "canonical form of {input:?}");
        if !expected.starts_with('<') {
            assert_eq!(canon(expected), expected, "{expected:?} is not a fixed point");
        }
    }
}
