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
//!    host with a port, not as the scheme `example.com`. Any other scheme that
//!    is not followed by `//` (`mailto:`, `javascript:`, `data:`) is rejected
//!    with [`CanonError::NotHierarchical`]: these URLs have no host to look up.
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
//!    make a canonical URL that canonicalizes to something else. ASCII hosts
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
//!    as in the Go client's vectors). An empty host is rejected with
//!    [`CanonError::EmptyHost`]; a host name that starts with `[` once its
//!    leading dots are stripped (`http://.[::1]/`) is rejected with
//!    [`CanonError::InvalidIpv6`], since its canonical form would read as an
//!    IPv6 literal.
//! 8. Path (v4 "To canonicalize the path"): `\` becomes `/`, `/./` is removed,
//!    `/../` removes the previous segment, runs of `/` collapse to one, and an
//!    empty path becomes `/`. A trailing slash is kept. The query is never
//!    changed except by escaping; an empty query (`q?`) is kept in the
//!    canonical URL.
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

use std::borrow::Cow;
use std::fmt;
use std::net::Ipv6Addr;

use crate::scan;

/// The longest URL accepted, in bytes, before any processing: 2 MiB, the
/// limit Chromium applies to URLs (`url::kMaxURLChars`). Real feeds carry
/// URLs of up to 64 KiB.
pub const MAX_URL_BYTES: usize = 2 * 1024 * 1024;

/// The most expressions one URL can produce: 5 hosts × 6 paths.
pub const MAX_EXPRESSIONS: usize = 30;

/// Why a string could not be canonicalized into a URL with a host.
///
/// Every variant means "there is nothing to look up": the caller reports the
/// input as invalid, it is never "safe" or "unsafe".
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CanonError {
    /// The input was empty once whitespace and the fragment were removed.
    #[error("empty URL")]
    Empty,
    /// The input was longer than [`MAX_URL_BYTES`].
    #[error("URL is {len} bytes long, the maximum is {max}")]
    TooLong {
        /// The input length in bytes.
        len: usize,
        /// The maximum accepted length in bytes.
        max: usize,
    },
    /// The URL has a scheme that is not followed by `//` (such as `mailto:`
    /// or `javascript:`), so it names no host.
    #[error("scheme is not followed by \"//\" (URL has no host)")]
    NotHierarchical,
    /// The URL starts with a path, a query or a fragment: there is no host.
    #[error("URL has no host (it starts with a path or query)")]
    RelativeUrl,
    /// The authority part is empty, or only dots, userinfo or a port.
    #[error("URL has an empty host")]
    EmptyHost,
    /// A bracketed host is not a valid IPv6 address.
    #[error("bracketed host is not a valid IPv6 address")]
    InvalidIpv6,
    /// Once percent-unescaped, the host holds a byte that delimits URL parts
    /// (`/`, `\`, `?`, `@` or `:`), as in `http://a.com%2Fb/`. Browsers
    /// refuse such hosts (WHATWG URL Standard, "forbidden domain code
    /// point"; Chromium marks the URL invalid), so no page is behind it.
    #[error("host holds {:?} once unescaped, a URL delimiter browsers reject in a host", char::from(*byte))]
    DelimiterInHost {
        /// The delimiter byte.
        byte: u8,
    },
}

/// What kind of host a canonical URL has; IP address hosts get no host
/// suffixes in expressions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HostKind {
    /// A domain name (possibly a single label, possibly Punycode).
    Domain,
    /// A dotted-decimal IPv4 address.
    Ipv4,
    /// A bracketed IPv6 address.
    Ipv6,
}

/// A URL in Safe Browsing canonical form: `scheme://host/path[?query]`,
/// ASCII only, every byte `<= 0x20`, `>= 0x7f`, `#` and `%` escaped.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CanonicalUrl {
    /// The whole canonical URL. Kept in one buffer so that canonicalizing
    /// allocates once and every part, and every expression, is a slice of it.
    serialization: String,
    /// End of the scheme (the `:` of `://`).
    scheme_end: usize,
    /// Start of the host, just after `://`.
    host_start: usize,
    /// End of the host and start of the path.
    host_end: usize,
    /// End of the path: the `?` of the query, or the end of the string.
    path_end: usize,
    host_kind: HostKind,
    /// Where the host suffixes start and the directory prefixes end, found
    /// while canonicalizing so that listing the expressions scans nothing.
    layout: Layout,
}

/// The host suffixes and directory prefixes of a canonical URL, as offsets
/// into its serialization (which is at most 3 × [`MAX_URL_BYTES`] long, so
/// `u32` holds them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
struct Layout {
    /// Starts of the host suffixes other than the exact host, longest first:
    /// the last five labels down to the last two.
    suffixes: [u32; 4],
    suffix_count: u8,
    /// Ends of the directory prefixes `/`, `/a/`, `/a/b/`, `/a/b/c/` (just
    /// after each of the first four slashes of the path) other than the
    /// exact path, shortest first.
    dirs: [u32; 4],
    dir_count: u8,
}

impl Layout {
    /// The layout of `url[host_start..host_end]` (a host of `kind`) and
    /// `url[host_end..path_end]` (its path), found by scanning them.
    fn scan(url: &[u8], host_start: usize, host_end: usize, path_end: usize, kind: HostKind) -> Self {
        let mut layout = Self::default();
        if kind == HostKind::Domain {
            layout.set_suffixes(&last_dots(url, host_start, host_end));
        }
        layout.set_dirs(&first_slashes(url, host_end, path_end), path_end);
        layout
    }

    /// This layout for the same URL at `to` rather than `from` (every
    /// position is at `from` or after it).
    fn moved(mut self, from: usize, to: usize) -> Self {
        let (from, to) = (from as u32, to as u32);
        for start in &mut self.suffixes[..usize::from(self.suffix_count)] {
            *start = *start - from + to;
        }
        for end in &mut self.dirs[..usize::from(self.dir_count)] {
            *end = *end - from + to;
        }
        self
    }

    /// Sets the suffixes from the positions of the host's last five dots,
    /// last first (`usize::MAX` where the host has fewer): the suffix of the
    /// last k labels starts after the (k - 1)-th dot from the end. Never the
    /// bare top-level label (k = 1); with fewer than five dots the suffix of
    /// all labels is the exact host itself and is not repeated.
    fn set_suffixes(&mut self, last_dots: &[usize; 5]) {
        let ndots = last_dots.iter().take_while(|&&d| d != usize::MAX).count();
        let mut count = 0;
        for k in (2..=ndots).rev() {
            self.suffixes[count] = (last_dots[k - 1] + 1) as u32;
            count += 1;
        }
        self.suffix_count = count as u8;
    }

    /// Sets the directory prefixes from the positions of the path's first
    /// four slashes (`usize::MAX` where it has fewer): each prefix ends just
    /// after its slash, and the one that is the whole path is left out.
    fn set_dirs(&mut self, first_slashes: &[usize; 4], path_end: usize) {
        let mut count = 0;
        for &slash in first_slashes {
            if slash != usize::MAX && slash + 1 != path_end {
                self.dirs[count] = (slash + 1) as u32;
                count += 1;
            }
        }
        self.dir_count = count as u8;
    }
}

/// The positions of the last five dots of `url[start..end]`, last first,
/// `usize::MAX` past the first dot.
fn last_dots(url: &[u8], start: usize, end: usize) -> [usize; 5] {
    let mut dots = [usize::MAX; 5];
    let mut n = 0;
    let mut block_end = end;
    while block_end > start && n < dots.len() {
        let base = block_end.saturating_sub(scan::BLOCK).max(start);
        let mut found = scan::find(url, base, b'.') & scan::below(base, block_end);
        block_end = base;
        while found != 0 && n < dots.len() {
            let i = 63 - found.leading_zeros() as usize;
            found &= !(1 << i);
            dots[n] = base + i;
            n += 1;
        }
    }
    dots
}

/// The positions of the first four slashes of `url[start..end]`,
/// `usize::MAX` past the last slash.
fn first_slashes(url: &[u8], start: usize, end: usize) -> [usize; 4] {
    let mut slashes = [usize::MAX; 4];
    let mut n = 0;
    let mut base = start;
    while base < end && n < slashes.len() {
        let mut found = scan::find(url, base, b'/') & scan::below(base, end) & !scan::below(base, start);
        while found != 0 && n < slashes.len() {
            slashes[n] = base + found.trailing_zeros() as usize;
            found &= found - 1;
            n += 1;
        }
        base += scan::BLOCK;
    }
    slashes
}

impl CanonicalUrl {
    /// The whole canonical URL, e.g. `http://www.example.com/a/b?q`.
    pub fn as_str(&self) -> &str {
        &self.serialization
    }

    /// The lowercased scheme, e.g. `http`.
    pub fn scheme(&self) -> &str {
        &self.serialization[..self.scheme_end]
    }

    /// The canonical host, e.g. `www.example.com`, `192.0.2.1` or `[2001:db8::1]`.
    pub fn host(&self) -> &str {
        &self.serialization[self.host_start..self.host_end]
    }

    /// Whether the host is a domain name or an IP address.
    pub fn host_kind(&self) -> HostKind {
        self.host_kind
    }

    /// The canonical path, always starting with `/`.
    pub fn path(&self) -> &str {
        &self.serialization[self.host_end..self.path_end]
    }

    /// The query without its `?`: `None` when the URL has no `?`, `Some("")`
    /// for an empty query.
    pub fn query(&self) -> Option<&str> {
        self.serialization.get(self.path_end + 1..)
    }

    /// The path followed by `?query` when the URL has a query.
    pub fn path_and_query(&self) -> &str {
        &self.serialization[self.host_end..]
    }

    /// All host-suffix/path-prefix expressions of this URL (at most
    /// [`MAX_EXPRESSIONS`], no duplicates): for each host suffix (exact host
    /// first), the exact path with query, the exact path, then the directory
    /// prefixes from `/` down.
    ///
    /// ```
    /// use blocksieve_format::canonicalize;
    /// let url = canonicalize("http://a.b.c/1/2.html?param=1").unwrap();
    /// let all: Vec<String> = url.expressions().map(|e| e.to_string()).collect();
    /// assert_eq!(all.len(), 8);
    /// assert!(all.contains(&"b.c/1/".to_string()));
    ///
    /// // A URL without a host has no expressions at all: it is an error.
    /// assert!(canonicalize("mailto:someone@example.com").is_err());
    /// ```
    pub fn expressions(&self) -> Expressions<'_> {
        Expressions::new(self)
    }

    /// Appends the full hash of every expression to `out`, in the order of
    /// [`expressions`](Self::expressions): the same values as
    /// [`Expression::full_hash`] of each, computed in one loop over the
    /// expression strings once they are all listed. The hashes do not
    /// depend on each other, so the processor overlaps consecutive ones when
    /// nothing else runs between them; hashing while iterating costs about
    /// 7 % more per URL (`benches/canonicalize.rs`).
    ///
    /// ```
    /// use blocksieve_format::canonicalize;
    /// let url = canonicalize("http://a.b.c/1/2.html?param=1").unwrap();
    /// let mut hashes = Vec::new();
    /// url.full_hashes_into(&mut hashes);
    /// let one_by_one: Vec<_> = url.expressions().map(|e| e.full_hash()).collect();
    /// assert_eq!(hashes, one_by_one);
    /// ```
    pub fn full_hashes_into(&self, out: &mut Vec<crate::FullHash>) {
        hash_expressions(
            self.serialization.as_bytes(),
            self.host_start,
            self.path_end,
            &self.layout,
            out,
        );
    }
}

/// Appends the full hash of every expression of the canonical URL `url`
/// (its host starting at `host_start`, its path ending at `path_end`, its
/// suffixes and directory prefixes in `layout`) to `out`, in the order of
/// [`CanonicalUrl::expressions`]: all expression strings are listed first,
/// then hashed in one loop.
fn hash_expressions(
    url: &[u8],
    host_start: usize,
    path_end: usize,
    layout: &Layout,
    out: &mut Vec<crate::FullHash>,
) {
    // Where each expression starts (its host suffix) and ends (its path
    // prefix) in `url`, in the order of `expressions`.
    let mut starts = [host_start; 5];
    let suffixes = usize::from(layout.suffix_count);
    for (start, &suffix) in starts[1..].iter_mut().zip(&layout.suffixes[..suffixes]) {
        *start = suffix as usize;
    }
    let mut ends = [path_end; 6];
    let mut path_count = 1;
    if url.len() > path_end + 1 {
        // A non-empty query: the most specific expression keeps it.
        ends[0] = url.len();
        ends[1] = path_end;
        path_count = 2;
    }
    for (end, &dir) in ends[path_count..]
        .iter_mut()
        .zip(&layout.dirs[..usize::from(layout.dir_count)])
    {
        *end = dir as usize;
        path_count += 1;
    }
    let mut texts: [&[u8]; MAX_EXPRESSIONS] = [&[]; MAX_EXPRESSIONS];
    let mut slots = texts.iter_mut();
    let mut count = 0;
    for &start in &starts[..1 + suffixes] {
        for &end in &ends[..path_count] {
            let text = url.get(start..end);
            // A layout outside the URL would drop an expression (a false
            // negative): the fuzz target and the tests run with this check.
            debug_assert!(text.is_some(), "expression {start}..{end} outside the URL");
            if let (Some(slot), Some(text)) = (slots.next(), text) {
                *slot = text;
                count += 1;
            }
        }
    }
    out.extend(texts[..count].iter().map(|text| crate::FullHash::of(text)));
}

impl fmt::Display for CanonicalUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.serialization)
    }
}

/// One host-suffix/path-prefix expression: the string `host` + `path` that is
/// hashed into a full hash (no scheme, e.g. `b.c/1/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Expression<'a> {
    /// The host suffix, e.g. `b.c`.
    pub host: &'a str,
    /// The path prefix, with the query for the most specific expression, e.g. `/1/`.
    pub path: &'a str,
    /// `host` followed by `path`. In the canonical URL every host suffix is
    /// followed by the path, so the whole expression is one slice too and is
    /// hashed in one piece.
    text: &'a str,
}

impl<'a> Expression<'a> {
    /// The expression string, `host` followed by `path`, e.g. `b.c/1/`.
    pub fn as_str(&self) -> &'a str {
        self.text
    }

    /// The SHA-256 full hash of this expression's string.
    pub fn full_hash(&self) -> crate::FullHash {
        crate::FullHash::of(self.text.as_bytes())
    }
}

impl fmt::Display for Expression<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text)
    }
}

/// Iterator over the expressions of a [`CanonicalUrl`]; see
/// [`CanonicalUrl::expressions`].
#[derive(Debug, Clone)]
pub struct Expressions<'a> {
    /// Each host suffix, exact host first.
    hosts: [&'a str; 5],
    /// Each host suffix followed by the path with query: every expression
    /// of that host is a prefix of it, so it is hashed in one piece.
    from_hosts: [&'a str; 5],
    host_count: usize,
    /// Each path prefix, the most specific first.
    paths: [&'a str; 6],
    path_count: usize,
    /// The host suffix and path prefix of the next expression (counters
    /// rather than one index: no division per expression).
    next_host: usize,
    next_path: usize,
}

impl<'a> Expressions<'a> {
    fn new(url: &'a CanonicalUrl) -> Self {
        let serialization = url.serialization.as_str();
        let (host_end, path_end) = (url.host_end, url.path_end);
        let layout = &url.layout;

        let mut hosts = [""; 5];
        let mut from_hosts = [""; 5];
        hosts[0] = url.host();
        from_hosts[0] = &serialization[url.host_start..];
        let mut host_count = 1;
        for &start in &layout.suffixes[..usize::from(layout.suffix_count)] {
            let start = start as usize;
            hosts[host_count] = &serialization[start..host_end];
            from_hosts[host_count] = &serialization[start..];
            host_count += 1;
        }

        let mut paths = [""; 6];
        let mut path_count = 0;
        if serialization.len() > path_end + 1 {
            // A non-empty query: the most specific expression keeps it.
            paths[path_count] = url.path_and_query();
            path_count += 1;
        }
        paths[path_count] = url.path();
        path_count += 1;
        for &end in &layout.dirs[..usize::from(layout.dir_count)] {
            paths[path_count] = &serialization[host_end..end as usize];
            path_count += 1;
        }

        Self {
            hosts,
            from_hosts,
            host_count,
            paths,
            path_count,
            next_host: 0,
            next_path: 0,
        }
    }
}

impl<'a> Iterator for Expressions<'a> {
    type Item = Expression<'a>;

    fn next(&mut self) -> Option<Expression<'a>> {
        let (h, p) = (self.next_host, self.next_path);
        let host = *self.hosts.get(h).filter(|_| h < self.host_count)?;
        let path = self.paths[p];
        self.next_path += 1;
        if self.next_path == self.path_count {
            self.next_path = 0;
            self.next_host += 1;
        }
        // The host suffix is followed by the path in the canonical URL, so
        // the expression is one slice of it.
        let text = &self.from_hosts[h][..host.len() + path.len()];
        Some(Expression { host, path, text })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let done = self.next_host * self.path_count + self.next_path;
        let left = self.host_count * self.path_count - done;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Expressions<'_> {}

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

fn canonicalize_bytes(input: &[u8]) -> Result<CanonicalUrl, CanonError> {
    if input.len() > MAX_URL_BYTES {
        return Err(CanonError::TooLong {
            len: input.len(),
            max: MAX_URL_BYTES,
        });
    }
    if let Some(url) = canonicalize_common(input) {
        return Ok(url);
    }
    canonicalize_by_steps(input)
}

/// Canonicalizes `input` and appends the full hash of each of its
/// expressions to `out`: the same hashes, in the same order, as
/// `canonicalize(input)?.full_hashes_into(out)` — the check a client runs
/// for every URL, with no [`CanonicalUrl`] to keep.
///
/// When the input is canonical as written (as most URLs in feeds and
/// traffic are: `https://www.example.com/a/b?q`, `www.example.com/a/`
/// without a scheme, `http://192.0.2.1/x`), its expressions are slices of
/// `input` itself, so nothing is copied, allocated or validated as UTF-8
/// before hashing; a host alone (`example.com`) is copied to the stack to
/// get its path `/`. Any other input is canonicalized first.
///
/// # Errors
///
/// As [`canonicalize`]; `out` is left as it was.
///
/// ```
/// use blocksieve_format::{canonicalize, full_hashes};
/// let mut hashes = Vec::new();
/// full_hashes("http://a.b.c/1/2.html?param=1", &mut hashes).unwrap();
/// let mut expected = Vec::new();
/// canonicalize("http://a.b.c/1/2.html?param=1").unwrap().full_hashes_into(&mut expected);
/// assert_eq!(hashes, expected);
/// assert!(full_hashes("mailto:someone@example.com", &mut hashes).is_err());
/// ```
pub fn full_hashes(input: impl AsRef<[u8]>, out: &mut Vec<crate::FullHash>) -> Result<(), CanonError> {
    /// The longest host that [`full_hashes`] copies to the stack to append
    /// the path `/`; a longer one (at most 253 bytes in DNS) is
    /// canonicalized.
    const HOST_ON_STACK: usize = 256;
    let input = input.as_ref();
    if input.len() <= MAX_URL_BYTES {
        match common_case(input) {
            Some(Common::AsWritten {
                end,
                host_start,
                path_end,
                add_slash: false,
                layout,
                ..
            }) => {
                hash_expressions(&input[..end], host_start, path_end, &layout, out);
                return Ok(());
            }
            Some(Common::AsWritten {
                end,
                host_start,
                add_slash: true,
                layout,
                ..
            }) if end - host_start < HOST_ON_STACK => {
                // "example.com" without a path: its expressions are each
                // host suffix followed by "/", which the input lacks.
                let mut buffer = [0; HOST_ON_STACK];
                let url = &mut buffer[..end - host_start + 1];
                let (host, slash) = url.split_at_mut(end - host_start);
                host.copy_from_slice(&input[host_start..end]);
                slash.copy_from_slice(b"/");
                hash_expressions(url, 0, url.len(), &layout.moved(host_start, 0), out);
                return Ok(());
            }
            Some(Common::Built(url)) => {
                url.full_hashes_into(out);
                return Ok(());
            }
            // The steps give the same URL as the common case (checked by
            // the property tests and the fuzz target).
            Some(Common::AsWritten { .. }) | None => {}
        }
    }
    canonicalize_by_steps(input)?.full_hashes_into(out);
    Ok(())
}

/// [`canonicalize`] by the steps of the module docs, one after the other.
/// Every input goes this way unless [`canonicalize_common`] takes it; the
/// two must agree on every input they both accept (checked by the property
/// tests and the fuzz target through [`crate::fuzzing`]).
pub(crate) fn canonicalize_by_steps(input: &[u8]) -> Result<CanonicalUrl, CanonError> {
    if input.len() > MAX_URL_BYTES {
        return Err(CanonError::TooLong {
            len: input.len(),
            max: MAX_URL_BYTES,
        });
    }
    // 1. Remove tab, CR and LF; 2. trim C0 controls and space.
    let start = input.iter().position(|&b| b > 0x20).unwrap_or(input.len());
    let end = input.iter().rposition(|&b| b > 0x20).map_or(start, |i| i + 1);
    let trimmed = &input[start..end];
    // 3. Cut the fragment, noting on the way whether step 1 or 4 has work.
    let (fragment_start, needs_unescape) = scan_fragment(trimmed);
    let without_fragment = &trimmed[..fragment_start];
    if !needs_unescape {
        // The common case: nothing to unescape, so the raw delimiters are
        // the only ones.
        let (scheme, rest) = split_scheme(without_fragment)?.parts();
        return assemble(scheme, rest, Unescape::No);
    }
    // 4. Unescape, per component where the raw input shows its structure.
    let stripped = strip_tab_cr_lf(without_fragment);
    match split_scheme(&stripped) {
        Ok(split) if split.explicit => {
            let (scheme, rest) = split.parts();
            assemble(scheme, rest, Unescape::PerComponent)
        }
        Ok(_) => {
            // No scheme as written. If unescaping reveals one
            // ("http%3A%2F%2Fhost/"), the whole URL was escaped: read it
            // unescaped, as the v4 text does. Otherwise the input is
            // "host/path" and is read like "http://" + input.
            let unescaped = unescape_fully(&stripped);
            let split = split_scheme(&unescaped)?;
            if split.explicit {
                let (scheme, rest) = split.parts();
                assemble(scheme, rest, Unescape::No)
            } else {
                assemble(b"http", &stripped, Unescape::PerComponent)
            }
        }
        Err(_) => {
            // Not a URL as written ("mailto:", "/path", "host:80%2Fx"):
            // decide on the unescaped text, as the v4 text does.
            let unescaped = unescape_fully(&stripped);
            let (scheme, rest) = split_scheme(&unescaped)?.parts();
            assemble(scheme, rest, Unescape::No)
        }
    }
}

/// [`common_case`] as a [`CanonicalUrl`].
fn canonicalize_common(input: &[u8]) -> Option<CanonicalUrl> {
    match common_case(input)? {
        Common::Built(url) => Some(url),
        Common::AsWritten {
            end,
            host_start,
            host_end,
            path_end,
            host_kind,
            add_slash,
            layout,
        } => {
            // A URL without a scheme is read as http:// + URL (step 5).
            let (prefix, scheme_end) = if host_start == 0 {
                ("http://", 4)
            } else {
                ("", host_start - 3)
            };
            let mut serialization = String::with_capacity(prefix.len() + end + 1);
            serialization.push_str(prefix);
            serialization.push_str(std::str::from_utf8(&input[..end]).ok()?);
            let delta = prefix.len();
            if add_slash {
                serialization.push('/');
            }
            Some(CanonicalUrl {
                scheme_end,
                host_start: host_start + delta,
                host_end: host_end + delta,
                path_end: path_end + delta,
                serialization,
                host_kind,
                layout: layout.moved(0, delta),
            })
        }
    }
}

/// What [`common_case`] found.
enum Common {
    /// `input[..end]` is the canonical URL as written, but for the
    /// `http://` that a URL without a scheme (`host_start == 0`) gets and,
    /// with `add_slash`, the path `/` that a URL without path or query
    /// (`http://example.com`) gets. The positions are in the input.
    AsWritten {
        end: usize,
        host_start: usize,
        host_end: usize,
        path_end: usize,
        host_kind: HostKind,
        add_slash: bool,
        layout: Layout,
    },
    /// The canonical URL, built from the input's parts.
    Built(CanonicalUrl),
}

/// The common case, in one pass over the input in 64-byte blocks: a URL that
/// starts with `http://` or `https://`, does not end in a byte that step 2
/// trims, and whose authority is a host with no userinfo, port, uppercase
/// letter, stray dot or byte that steps 1, 4 or 9 act on. For such a URL
/// steps 1 to 7 come down to cutting the fragment and, for an IPv4 host in
/// another form, writing it in dotted decimal; the path and query are then
/// copied as they are when they are canonical already (no byte to escape or
/// unescape, no `\`, no dot segment, no `//`), or else go through steps 4,
/// 8 and 9 exactly as in [`assemble`]. Returns `None` for every other input,
/// which then goes through [`canonicalize_by_steps`].
///
/// When the input is canonical as written (but for the `http://` that a
/// URL without a scheme gets), nothing is copied: [`Common::AsWritten`]
/// says where its parts are, and [`full_hashes`] hashes its expressions as
/// slices of the input.
///
/// Most URLs in feeds and in traffic are of this kind; the steps taken one
/// by one cost about twice as much on them.
fn common_case(input: &[u8]) -> Option<Common> {
    // The scheme as written and where the host starts in the input; a URL
    // without a scheme is read as http:// + URL (step 5).
    let (scheme, host_start): (&[u8], usize) = if input.starts_with(b"http://") {
        (b"http", 7)
    } else if input.starts_with(b"https://") {
        (b"https", 8)
    } else {
        (b"http", 0)
    };
    if input.last().is_none_or(|&b| b <= 0x20) {
        return None;
    }
    // Where the authority ends (the first '/' or '?'), the path ends (the
    // first '?') and the fragment starts (the first '#'), once seen.
    let mut host_end = usize::MAX;
    let mut query = usize::MAX;
    let mut fragment = input.len();
    // Whether the authority holds uppercase letters, '@', '[' or ':'.
    let mut host_work = false;
    // Whether the path and query need steps 4, 8 and 9 rather than a copy.
    let mut path_work = false;
    // Whether the last byte of the previous block was a dot of the host or a
    // slash of the path, for the "no '..' in the host" and "no '/.' or '//'
    // in the path" checks across blocks.
    let mut carry_dot = false;
    let mut carry_slash = false;
    // For the expressions: the dots of the authority when it lies in the
    // first block, and the first four slashes of the path, in the input.
    let mut first_block_dots = 0;
    let mut slashes = [usize::MAX; 4];
    let mut slash_count = 0;
    let mut base = 0;
    while base < input.len() {
        let mut m = scan::classify(input, base);
        let hashes = if m.special != 0 {
            scan::find(input, base, b'#')
        } else {
            0
        };
        if hashes != 0 {
            // Step 3: nothing from the first '#' on counts.
            fragment = base + hashes.trailing_zeros() as usize;
            let before = scan::below(base, fragment);
            m.special &= before;
            m.slash &= before;
            m.dot &= before;
            m.query &= before;
            m.host_work &= before;
        }
        let after_scheme = if base == 0 {
            // The "//" of the scheme.
            let after = !scan::below(0, host_start);
            m.slash &= after;
            after
        } else {
            u64::MAX
        };
        if host_end == usize::MAX {
            let ends = m.slash | m.query;
            if ends != 0 {
                host_end = base + ends.trailing_zeros() as usize;
            }
        }
        if query == usize::MAX && m.query != 0 {
            query = base + m.query.trailing_zeros() as usize;
        }
        // Every mask is cut at the fragment already.
        let before_host_end = scan::below(base, host_end);
        let authority = before_host_end & after_scheme;
        let dots = m.dot & authority;
        if m.special & authority != 0 || dots & (dots >> 1) != 0 || (carry_dot && dots & 1 != 0) {
            return None;
        }
        host_work |= m.host_work & authority != 0;
        carry_dot = dots >> 63 != 0;
        if base == 0 {
            first_block_dots = dots;
        }
        if !path_work {
            let path_slashes = m.slash & scan::below(base, query) & !before_host_end;
            let dot_or_slash = m.dot | m.slash;
            path_work = m.special & !authority != 0
                || (carry_slash && dot_or_slash & 1 != 0)
                || dot_segment_or_empty(input, fragment, base, path_slashes & (dot_or_slash >> 1));
            carry_slash = path_slashes >> 63 != 0;
            let mut found = path_slashes;
            while found != 0 && slash_count < slashes.len() {
                slashes[slash_count] = base + found.trailing_zeros() as usize;
                found &= found - 1;
                slash_count += 1;
            }
        }
        if fragment < input.len() {
            break;
        }
        base += scan::BLOCK;
    }
    let authority_end = host_end.min(fragment);
    let authority = &input[host_start..authority_end];
    let mut host = authority;
    if host_work {
        // Step 6 drops the port; a port of digits holds nothing that could
        // change where the host ends. Without a scheme, "name:" could be one
        // (step 5 decides), so the full rules read it. Step 7 lowercases;
        // '@' (userinfo) and '[' (IPv6) need the full rules too.
        if let Some(colon) = authority.iter().position(|&b| b == b':') {
            if host_start == 0 || !authority[colon + 1..].iter().all(u8::is_ascii_digit) {
                return None;
            }
            host = &authority[..colon];
        }
        if host.iter().any(|&b| b == b'@' || b == b'[') {
            return None;
        }
    }
    if host.first().is_none_or(|&b| b == b'.') || host.last() == Some(&b'.') {
        return None;
    }
    let path_and_query = &input[authority_end..fragment];
    let ip = parse_ipv4(host);
    // The host's last five dots, last first, shifted by `delta` to where
    // the host is in the canonical URL; scanned for when the authority
    // does not end in the first block.
    let host_dots = |delta: usize| {
        if authority_end > scan::BLOCK {
            return last_dots(input, host_start, host_start + host.len()).map(|d| shift(d, delta));
        }
        let mut found = first_block_dots;
        let mut dots = [usize::MAX; 5];
        for dot in &mut dots {
            if found == 0 {
                break;
            }
            let i = 63 - found.leading_zeros() as usize;
            found &= !(1 << i);
            *dot = i + delta;
        }
        dots
    };
    if !host_work
        && !path_work
        && (path_and_query.first() == Some(&b'/') || path_and_query.is_empty())
        && ip.is_none_or(|_| is_dotted_decimal(host))
    {
        // Canonical as written, but perhaps for the path "/".
        let host_kind = if ip.is_some() {
            HostKind::Ipv4
        } else {
            HostKind::Domain
        };
        let add_slash = path_and_query.is_empty();
        let path_end = query.min(fragment) + usize::from(add_slash);
        let mut layout = Layout::default();
        if host_kind == HostKind::Domain {
            layout.set_suffixes(&host_dots(0));
        }
        layout.set_dirs(&slashes, path_end);
        return Some(Common::AsWritten {
            end: fragment,
            host_start,
            host_end: authority_end,
            path_end,
            host_kind,
            add_slash,
            layout,
        });
    }
    let mut out = Vec::with_capacity(scheme.len() + 3 + fragment + 1);
    out.extend_from_slice(scheme);
    let scheme_end = out.len();
    out.extend_from_slice(b"://");
    let input_host_start = host_start;
    let host_start = out.len();
    let host_kind = match ip {
        Some(ip) => {
            push_ipv4(ip, &mut out);
            HostKind::Ipv4
        }
        None if host_work => {
            out.extend(host.iter().map(u8::to_ascii_lowercase));
            HostKind::Domain
        }
        None => {
            out.extend_from_slice(host);
            HostKind::Domain
        }
    };
    let host_end = out.len();
    let mut layout = Layout::default();
    if host_kind == HostKind::Domain {
        // The host keeps its length; only where it starts may differ.
        layout.set_suffixes(&host_dots(host_start.wrapping_sub(input_host_start)));
    }
    let path_end = if path_work {
        // As assemble does with Unescape::PerComponent; unescaping is a copy
        // when there is no '%', tab, CR or LF.
        let path_end = push_path_and_query(&unescape_fully(path_and_query), &mut out);
        layout.set_dirs(&first_slashes(&out, host_end, path_end), path_end);
        path_end
    } else {
        if path_and_query.first() != Some(&b'/') {
            // An empty path becomes "/", which is the exact path; its
            // query's slashes are not the path's.
            out.push(b'/');
        }
        out.extend_from_slice(path_and_query);
        // The path ends at the query's '?', as far from the end as in the
        // input.
        let path_end = out.len() - fragment.saturating_sub(query);
        let delta = host_end.wrapping_sub(authority_end);
        layout.set_dirs(&slashes.map(|s| shift(s, delta)), path_end);
        path_end
    };
    let serialization = String::from_utf8(out).ok()?;
    Some(Common::Built(CanonicalUrl {
        serialization,
        scheme_end,
        host_start,
        host_end,
        path_end,
        host_kind,
        layout,
    }))
}

/// `position` moved by `delta` (a difference taken with `wrapping_sub`,
/// so that it may move down); `usize::MAX`, "no position", stays.
fn shift(position: usize, delta: usize) -> usize {
    if position == usize::MAX {
        position
    } else {
        position.wrapping_add(delta)
    }
}

/// Whether a slash of `candidates` (slashes of the block at `base` that are
/// followed by `.` or `/`) starts an empty segment (`//`) or a dot segment
/// (`/.` or `/..` followed by `/`, `?`, `#` or the end of `input[..end]`).
/// Most `/.` begin a name (`/.well-known/`), so the bytes after are looked
/// at. They may lie in the next block, whose fragment is not cut yet: a `#`
/// there is the first one, so it ends the path too.
fn dot_segment_or_empty(input: &[u8], end: usize, base: usize, mut candidates: u64) -> bool {
    let input = &input[..end];
    let segment_end = |i: usize| matches!(input.get(i), None | Some(b'/' | b'?' | b'#'));
    while candidates != 0 {
        let at = base + candidates.trailing_zeros() as usize;
        candidates &= candidates - 1;
        // `input[at + 1]` is '/' (an empty segment) or '.'.
        if input.get(at + 1) == Some(&b'/')
            || segment_end(at + 2)
            || (input.get(at + 2) == Some(&b'.') && segment_end(at + 3))
        {
            return true;
        }
    }
    false
}

/// Whether [`canonicalize_common`] takes `input` (for tests and benchmarks).
pub(crate) fn takes_common_case(input: &[u8]) -> bool {
    canonicalize_common(input).is_some()
}

/// Whether [`full_hashes`] hashes `input`'s expressions as slices of it,
/// with no copy (for tests and benchmarks).
pub(crate) fn canonical_as_written(input: &[u8]) -> bool {
    input.len() <= MAX_URL_BYTES && matches!(common_case(input), Some(Common::AsWritten { .. }))
}

/// Whether [`assemble`] still has to percent-unescape the parts it is given.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Unescape {
    /// The parts hold no escapes (or were unescaped as a whole already).
    No,
    /// The parts were split on the raw input's delimiters; each is unescaped
    /// on its own, so an escaped delimiter (`%2F`, `%40`) stays inside the
    /// part it was written in.
    PerComponent,
}

/// Steps 6 to 9: builds the canonical URL from the scheme and what follows
/// its `//`.
fn assemble(scheme: &[u8], rest: &[u8], unescape: Unescape) -> Result<CanonicalUrl, CanonError> {
    // 6. Authority, path, query: the authority ends at the first '/', ''
    // or '?', the path at the first '?' after it.
    let (authority_end, plain_host) = scan_authority(rest);
    let (authority, path_and_query) = rest.split_at(authority_end);
    let path_and_query: Cow<'_, [u8]> = match unescape {
        Unescape::No => Cow::Borrowed(path_and_query),
        Unescape::PerComponent => Cow::Owned(unescape_fully(path_and_query)),
    };

    // Most URLs need no escaping: room for the parts plus a little.
    let mut out: Vec<u8> = Vec::with_capacity(scheme.len() + 3 + rest.len() + 8);
    out.extend(scheme.iter().map(u8::to_ascii_lowercase));
    let scheme_end = out.len();
    out.extend_from_slice(b"://");
    let host_start = out.len();
    let host_kind = if plain_host {
        // The common case: no userinfo, port, uppercase, stray dots or bytes
        // to escape (so no '%' either), so the host is the authority as it is.
        out.extend_from_slice(authority);
        ipv4_or_domain(host_start, &mut out)
    } else {
        canonical_host(authority, unescape, &mut out)?
    };
    let host_end = out.len();
    let path_end = push_path_and_query(&path_and_query, &mut out);
    // Every byte pushed above is ASCII (escape_into escapes the rest), so the
    // conversion cannot fail; the lossy fallback only avoids a panic path.
    let serialization =
        String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());

    let layout = Layout::scan(
        serialization.as_bytes(),
        host_start,
        host_end,
        path_end,
        host_kind,
    );
    Ok(CanonicalUrl {
        serialization,
        scheme_end,
        host_start,
        host_end,
        path_end,
        host_kind,
        layout,
    })
}

/// Steps 8 and 9 for what follows the authority (already unescaped):
/// appends the canonical path and, when there is a query, `?` and the
/// escaped query. Returns where the path ends in `out`.
fn push_path_and_query(path_and_query: &[u8], out: &mut Vec<u8>) -> usize {
    let query_start = canonical_path(path_and_query, out);
    let path_end = out.len();
    if let Some(i) = query_start {
        out.push(b'?');
        escape_into(&path_and_query[i + 1..], out);
    }
    path_end
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Removes tab/CR/LF and percent-unescapes until no `%XX` remains.
fn unescape_fully(input: &[u8]) -> Vec<u8> {
    let mut out: Vec<u8> = Vec::with_capacity(input.len());
    let mut rest = input;
    while !rest.is_empty() {
        // A run without '%', tab, CR or LF is copied as it is, unless the
        // output ends within two bytes of a '%' (the run could complete an
        // escape): no byte of it can end a "%XY".
        if !out.iter().rev().take(2).any(|&b| b == b'%') {
            let run = rest
                .iter()
                .position(|&b| matches!(b, b'%' | b'\t' | b'\r' | b'\n'))
                .unwrap_or(rest.len());
            out.extend_from_slice(&rest[..run]);
            rest = &rest[run..];
        }
        let Some((&b, tail)) = rest.split_first() else {
            break;
        };
        rest = tail;
        if matches!(b, b'\t' | b'\r' | b'\n') {
            continue;
        }
        out.push(b);
        // Only the tail can have become an escape: decode while it is one.
        while let [.., b'%', hi, lo] = out[..] {
            match (hex_value(hi), hex_value(lo)) {
                (Some(h), Some(l)) => {
                    out.truncate(out.len() - 3);
                    out.push(h << 4 | l);
                }
                _ => break,
            }
        }
    }
    out
}

/// The scheme of a URL and what follows it, as [`split_scheme`] found them.
struct SchemeSplit<'a> {
    /// The scheme, not yet lowercased; `http` when the URL has none.
    scheme: &'a [u8],
    /// What follows the scheme and its slashes: authority, path and query.
    rest: &'a [u8],
    /// Whether the input marks where its authority starts: a scheme with
    /// its slashes (`http://`, `https:\\`), the browser forms `https:host`
    /// and `https:/host`, or a scheme-relative `//`. A bare `host/path` has
    /// no such mark.
    explicit: bool,
}

impl<'a> SchemeSplit<'a> {
    fn parts(&self) -> (&'a [u8], &'a [u8]) {
        (self.scheme, self.rest)
    }
}

/// Splits `raw` into its scheme and the rest after the slashes (step 5).
///
/// For `http` and `https` the slashes may be `/` or `\` in any mix, and
/// there may be none or one (`https:host`, `https:/\host`), as browsers
/// read them (WHATWG URL Standard, "special authority ignore slashes
/// state"). Three or more slashes leave an empty authority, so
/// `http:///host` is rejected as the Go and Python clients do (conformance
/// section G), where browsers would skip them.
fn split_scheme(raw: &[u8]) -> Result<SchemeSplit<'_>, CanonError> {
    let implicit = |rest| SchemeSplit {
        scheme: b"http",
        rest,
        explicit: false,
    };
    let Some(&first) = raw.first() else {
        return Err(CanonError::Empty);
    };
    if first == b'/' || first == b'\\' || first == b'?' {
        // "//host" (scheme-relative) has a host; "/path" and "?q" do not.
        if raw.starts_with(b"//") && !raw.starts_with(b"///") {
            return Ok(SchemeSplit {
                scheme: b"http",
                rest: &raw[2..],
                explicit: true,
            });
        }
        return Err(CanonError::RelativeUrl);
    }
    if first.is_ascii_alphabetic() {
        let len = raw
            .iter()
            .position(|&b| !(b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')))
            .unwrap_or(raw.len());
        if raw.get(len) == Some(&b':') {
            let scheme = &raw[..len];
            let after = &raw[len + 1..];
            if let Some(rest) = after.strip_prefix(b"//") {
                return Ok(SchemeSplit {
                    scheme,
                    rest,
                    explicit: true,
                });
            }
            // "host:port[/...]" is a host with a port, not a scheme.
            let digits = after.iter().take_while(|b| b.is_ascii_digit()).count();
            let port_ends = matches!(after.get(digits), None | Some(b'/' | b'\\' | b'?'));
            if digits > 0 && port_ends {
                return Ok(implicit(raw));
            }
            if scheme.eq_ignore_ascii_case(b"http") || scheme.eq_ignore_ascii_case(b"https") {
                let slashes = after.iter().take_while(|&&b| b == b'/' || b == b'\\').count();
                // Two slashes are the authority's mark; with three or more the
                // authority is empty (rejected), and none or one is the
                // browsers' lenient form.
                let skip = if slashes >= 2 { 2 } else { slashes };
                return Ok(SchemeSplit {
                    scheme,
                    rest: &after[skip..],
                    explicit: true,
                });
            }
            return Err(CanonError::NotHierarchical);
        }
    } else if first == b':' {
        return Err(CanonError::EmptyHost);
    }
    Ok(implicit(raw))
}

/// Step 1 when the input has tab, CR or LF bytes: removes them.
fn strip_tab_cr_lf(url: &[u8]) -> Cow<'_, [u8]> {
    if url.iter().any(|&b| matches!(b, b'\t' | b'\r' | b'\n')) {
        Cow::Owned(
            url.iter()
                .copied()
                .filter(|&b| !matches!(b, b'\t' | b'\r' | b'\n'))
                .collect(),
        )
    } else {
        Cow::Borrowed(url)
    }
}

/// Byte classes, so that each scan of the hot path costs one table lookup
/// per byte.
const ESCAPE: u8 = 1 << 0;
/// `/` and `\`: path separators (step 8).
const SEPARATOR: u8 = 1 << 1;
/// `#`, `%`, tab, CR, LF: a fragment to cut or work for steps 1 and 4.
const PREPASS: u8 = 1 << 2;
/// `/`, `\` and `?`: the end of the authority (step 6).
const AUTHORITY_END: u8 = 1 << 3;
/// `?`: the start of the query (step 6).
const QUERY: u8 = 1 << 5;
/// Bytes a host keeps as they are: ASCII except uppercase letters, `.`,
/// `@`, `:`, `[` and what step 9 escapes. A host of only these (and single
/// inner dots) is copied unchanged.
const HOST_PLAIN: u8 = 1 << 4;

/// The class bits of every byte.
static CLASS: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        let mut c = 0;
        if b <= 0x20 || b >= 0x7f || b == b'#' || b == b'%' {
            c |= ESCAPE;
        } else if !(b.is_ascii_uppercase() || matches!(b, b'.' | b'@' | b':' | b'[')) {
            c |= HOST_PLAIN;
        }
        if b == b'/' || b == b'\\' {
            c |= SEPARATOR | AUTHORITY_END;
        }
        if b == b'?' {
            c |= AUTHORITY_END | QUERY;
        }
        if matches!(b, b'#' | b'%' | b'\t' | b'\r' | b'\n') {
            c |= PREPASS;
        }
        table[i] = c;
        i += 1;
    }
    table
};

/// Whether step 9 escapes `b`: `<= 0x20`, `>= 0x7f`, `#` or `%`.
fn needs_escape(b: u8) -> bool {
    CLASS[usize::from(b)] & ESCAPE != 0
}

/// Pushes `b`, escaped as `%XX` (uppercase hex) when step 9 says so.
fn push_escaped(b: u8, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    if needs_escape(b) {
        out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]]);
    } else {
        out.push(b);
    }
}

/// Escapes bytes `<= 0x20`, `>= 0x7f`, `#` and `%` into `out`.
fn escape_into(bytes: &[u8], out: &mut Vec<u8>) {
    let mut rest = bytes;
    // Copy the runs that need no escaping in one go.
    while let Some(i) = rest.iter().position(|&b| needs_escape(b)) {
        out.extend_from_slice(&rest[..i]);
        push_escaped(rest[i], out);
        rest = &rest[i + 1..];
    }
    out.extend_from_slice(rest);
}

/// Bytes that must not come out of UTS #46 processing of a non-ASCII host:
/// they delimit URL parts or start escapes, so a host holding them would not
/// parse back to itself. For example U+FF0F FULLWIDTH SOLIDUS maps to `/`,
/// and U+00AD SOFT HYPHEN, which UTS #46 deletes, can join `%` and two hex
/// digits into a new escape. This is the structural subset of the WHATWG URL
/// Standard's "forbidden domain code points" (which also lists `<>^|`, bytes
/// that ASCII hosts keep here, like the Go client's `W!eird<>Ho$^.com`).
const IDNA_DENY: idna::AsciiDenyList = idna::AsciiDenyList::new(false, "%#/:?@[\\]");

/// Writes the canonical, escaped host of `authority` into `out` (steps 6
/// and 7). Userinfo and port are cut on the delimiters as written; with
/// [`Unescape::PerComponent`] the host is unescaped only after that, so an
/// escaped `%40` or `%3A` cannot move where the host starts or ends, and one
/// that unescapes to a delimiter is refused as browsers refuse it.
fn canonical_host(authority: &[u8], unescape: Unescape, out: &mut Vec<u8>) -> Result<HostKind, CanonError> {
    let start = out.len();
    // Drop userinfo.
    let host_port = match authority.iter().rposition(|&b| b == b'@') {
        Some(i) => &authority[i + 1..],
        None => authority,
    };
    if host_port.first() == Some(&b'[') {
        let close = host_port
            .iter()
            .position(|&b| b == b']')
            .ok_or(CanonError::InvalidIpv6)?;
        let inner: Cow<'_, [u8]> = match unescape {
            Unescape::No => Cow::Borrowed(&host_port[1..close]),
            Unescape::PerComponent => Cow::Owned(unescape_fully(&host_port[1..close])),
        };
        out.extend_from_slice(canonical_ipv6(&inner)?.as_bytes());
        return Ok(HostKind::Ipv6);
    }
    // Drop the port: the host ends at the first ':' (WHATWG host parser).
    let host = match host_port.iter().position(|&b| b == b':') {
        Some(i) => &host_port[..i],
        None => host_port,
    };
    let host: Cow<'_, [u8]> = match unescape {
        Unescape::No => Cow::Borrowed(host),
        Unescape::PerComponent => {
            let host = unescape_fully(host);
            if let Some(&byte) = host
                .iter()
                .find(|&&b| matches!(b, b'/' | b'\\' | b'?' | b'@' | b':'))
            {
                return Err(CanonError::DelimiterInHost { byte });
            }
            Cow::Owned(host)
        }
    };
    if host.is_ascii() {
        // The common case, in one pass straight into the output.
        push_ascii_host(&host, out);
    } else {
        let mut name = normalize_dots(&host);
        if let Ok(s) = std::str::from_utf8(&name)
            && let Ok(ascii) = idna::domain_to_ascii_cow(s.as_bytes(), IDNA_DENY)
        {
            name = normalize_dots(ascii.as_bytes());
        }
        name.make_ascii_lowercase();
        escape_into(&name, out);
    }
    let written = &out[start..];
    if written.is_empty() {
        return Err(CanonError::EmptyHost);
    }
    if written[0] == b'[' {
        // Only leading dots stripped away can put '[' first (".[::1]"); the
        // canonical URL would then parse as an IPv6 literal.
        return Err(CanonError::InvalidIpv6);
    }
    Ok(ipv4_or_domain(start, out))
}

/// Finds the end of the authority (the first `/`, `\` or `?`) and whether
/// the authority is already a canonical domain host: non-empty, only
/// [`HOST_PLAIN`] bytes and dots, no leading, trailing or repeated dot.
fn scan_authority(rest: &[u8]) -> (usize, bool) {
    let mut plain = true;
    let mut after_dot = true;
    for (i, &b) in rest.iter().enumerate() {
        let class = CLASS[usize::from(b)];
        if class & AUTHORITY_END != 0 {
            return (i, plain && !after_dot);
        }
        if b == b'.' {
            plain &= !after_dot;
            after_dot = true;
        } else {
            plain &= class & HOST_PLAIN != 0;
            after_dot = false;
        }
    }
    (rest.len(), plain && !after_dot)
}

/// Finds the first `#` of `url` (its length when there is none) and whether
/// a `%`, tab, CR or LF comes before it. Eight bytes at a time while none of
/// `#`, `%` or a byte below 0x0e (which covers tab, LF and CR) is in sight,
/// then byte by byte: most URLs have neither a fragment nor an escape.
fn scan_fragment(url: &[u8]) -> (usize, bool) {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    // Whether some byte of `w` is below `n` (n <= 0x80): the "haszero"
    // family of Anderson's "Bit Twiddling Hacks".
    let has_below = |w: u64, n: u8| w.wrapping_sub(ONES * u64::from(n)) & !w & HIGHS != 0;
    let has_byte = |w: u64, b: u8| has_below(w ^ (ONES * u64::from(b)), 1);
    let mut start = 0;
    for chunk in url.chunks_exact(8) {
        let Ok(bytes) = <[u8; 8]>::try_from(chunk) else {
            break;
        };
        let w = u64::from_ne_bytes(bytes);
        if has_byte(w, b'#') || has_byte(w, b'%') || has_below(w, 0x0e) {
            break;
        }
        start += 8;
    }
    let mut needs_unescape = false;
    for (i, &b) in url.iter().enumerate().skip(start) {
        if CLASS[usize::from(b)] & PREPASS != 0 {
            if b == b'#' {
                return (i, needs_unescape);
            }
            needs_unescape = true;
        }
    }
    (url.len(), needs_unescape)
}

/// Rewrites the host written at `out[start..]` as dotted decimal when it is
/// an IPv4 address in any form. An escaped byte is never part of an address,
/// so parsing the escaped text is the same as parsing the bytes.
fn ipv4_or_domain(start: usize, out: &mut Vec<u8>) -> HostKind {
    let Some(ip) = parse_ipv4(&out[start..]) else {
        return HostKind::Domain;
    };
    out.truncate(start);
    push_ipv4(ip, out);
    HostKind::Ipv4
}

/// Whether `host`, an IPv4 address, is written in canonical dotted decimal:
/// four parts of at most three digits, none with a leading zero.
fn is_dotted_decimal(host: &[u8]) -> bool {
    let mut parts = 0;
    for part in host.split(|&b| b == b'.') {
        parts += 1;
        let canonical = match part {
            [b'0'] => true,
            [b'1'..=b'9', rest @ ..] => rest.len() <= 2 && rest.iter().all(u8::is_ascii_digit),
            _ => false,
        };
        if !canonical {
            return false;
        }
    }
    parts == 4
}

/// Writes `ip` in dotted decimal.
fn push_ipv4(ip: u32, out: &mut Vec<u8>) {
    for (i, octet) in ip.to_be_bytes().into_iter().enumerate() {
        if i > 0 {
            out.push(b'.');
        }
        push_decimal(octet, out);
    }
}

/// Step 7 for an ASCII host: strips leading and trailing dots, collapses
/// runs of dots, lowercases and escapes, appending to `out`.
fn push_ascii_host(host: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    let mut pending_dot = false;
    for &b in host {
        if b == b'.' {
            pending_dot = out.len() > start;
            continue;
        }
        if pending_dot {
            out.push(b'.');
            pending_dot = false;
        }
        push_escaped(b.to_ascii_lowercase(), out);
    }
}

fn push_decimal(n: u8, out: &mut Vec<u8>) {
    if n >= 100 {
        out.push(b'0' + n / 100);
    }
    if n >= 10 {
        out.push(b'0' + n / 10 % 10);
    }
    out.push(b'0' + n % 10);
}

/// Maps ideographic full stops to `.`, strips leading/trailing dots and
/// collapses runs of dots.
fn normalize_dots(host: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(host.len());
    let mut i = 0;
    let mut pending_dot = false;
    while i < host.len() {
        let (is_dot, width) = match &host[i..] {
            [b'.', ..] => (true, 1),
            // U+3002 IDEOGRAPHIC FULL STOP, U+FF0E FULLWIDTH FULL STOP,
            // U+FF61 HALFWIDTH IDEOGRAPHIC FULL STOP (UTS #46 maps all to '.').
            [0xE3, 0x80, 0x82, ..] | [0xEF, 0xBC, 0x8E, ..] | [0xEF, 0xBD, 0xA1, ..] => (true, 3),
            _ => (false, 1),
        };
        if is_dot {
            pending_dot = !out.is_empty();
        } else {
            if pending_dot {
                out.push(b'.');
                pending_dot = false;
            }
            out.push(host[i]);
        }
        i += width;
    }
    out
}

/// The WHATWG IPv4 parser: 1–4 dot-separated numbers, each decimal, octal
/// (leading `0`) or hex (`0x`); the last one fills the remaining bytes.
/// Returns `None` when the host is not an IPv4 address.
fn parse_ipv4(host: &[u8]) -> Option<u32> {
    // Cheap rejection of the common case, a name: an address holds only
    // digits, dots and the hex digits and 'x' of 0x-numbers.
    if !host
        .iter()
        .all(|&b| b.is_ascii_hexdigit() || b == b'.' || b == b'x' || b == b'X')
    {
        return None;
    }
    let mut parts = [0u64; 4];
    let mut count = 0;
    for part in host.split(|&b| b == b'.') {
        if count == 4 {
            return None;
        }
        parts[count] = parse_ipv4_number(part)?;
        count += 1;
    }
    let (&last, init) = parts[..count].split_last()?;
    let last_bits = 8 * (5 - count as u32);
    if last >= 1u64 << last_bits {
        return None;
    }
    let mut addr: u64 = last;
    for (i, &p) in init.iter().enumerate() {
        if p > 255 {
            return None;
        }
        addr |= p << (8 * (3 - i));
    }
    u32::try_from(addr).ok()
}

fn parse_ipv4_number(part: &[u8]) -> Option<u64> {
    if part.is_empty() {
        return None;
    }
    let (digits, radix) = if let Some(hex) = part.strip_prefix(b"0x").or_else(|| part.strip_prefix(b"0X")) {
        (hex, 16)
    } else if part.len() > 1 && part[0] == b'0' {
        (&part[1..], 8)
    } else {
        (part, 10)
    };
    if digits.is_empty() {
        // "0x" alone is zero in the WHATWG parser.
        return Some(0);
    }
    let mut value: u64 = 0;
    for &b in digits {
        let d = u64::from(hex_value(b)?);
        if d >= radix {
            return None;
        }
        value = value.checked_mul(radix)?.checked_add(d)?;
        if value > u64::from(u32::MAX) {
            return None;
        }
    }
    Some(value)
}

fn canonical_ipv6(inner: &[u8]) -> Result<String, CanonError> {
    let text = std::str::from_utf8(inner).map_err(|_| CanonError::InvalidIpv6)?;
    // Zone identifiers ("%eth0", already unescaped) are not part of the address.
    let text = text.split('%').next().unwrap_or(text);
    let addr: Ipv6Addr = text.parse().map_err(|_| CanonError::InvalidIpv6)?;
    let mut out = String::with_capacity(inner.len() + 2);
    out.push('[');
    if text.contains('.') {
        // Written with an embedded IPv4 address: keep the dotted quad (RFC 5952
        // section 5 recommends mixed notation for such addresses).
        let seg = addr.segments();
        let [a, b, c, d] = addr.octets()[12..16] else {
            return Err(CanonError::InvalidIpv6);
        };
        out.push_str(&rfc5952_head(&seg[..6]));
        out.push_str(&format!("{a}.{b}.{c}.{d}"));
    } else {
        out.push_str(&addr.to_string());
    }
    out.push(']');
    Ok(out)
}

/// RFC 5952 text of the six 16-bit groups before an embedded IPv4 address,
/// ending in `:` (or `::` when the zero run reaches the end).
fn rfc5952_head(groups: &[u16]) -> String {
    // Longest run of at least two zero groups, first one on ties.
    let (mut best_start, mut best_len) = (0, 0);
    let mut i = 0;
    while i < groups.len() {
        if groups[i] == 0 {
            let start = i;
            while i < groups.len() && groups[i] == 0 {
                i += 1;
            }
            if i - start > best_len {
                (best_start, best_len) = (start, i - start);
            }
        } else {
            i += 1;
        }
    }
    let hex = |g: &[u16]| g.iter().map(|x| format!("{x:x}")).collect::<Vec<_>>().join(":");
    if best_len >= 2 {
        let head = hex(&groups[..best_start]);
        let tail = hex(&groups[best_start + best_len..]);
        if tail.is_empty() {
            format!("{head}::")
        } else {
            format!("{head}::{tail}:")
        }
    } else {
        format!("{}:", hex(groups))
    }
}

/// Writes the canonical, escaped path at the start of `raw` (the bytes
/// after the authority) into `out`, in one pass and without a segment list:
/// the output is kept ending in `/` while segments are added, and `..`
/// truncates it back to the previous `/` (escaping never produces a `/`).
/// Returns where the query's `?` is in `raw`, if there is one.
fn canonical_path(raw: &[u8], out: &mut Vec<u8>) -> Option<usize> {
    if let Some(len) = canonical_path_len(raw) {
        // Most paths are canonical already: copy them in one piece.
        out.extend_from_slice(&raw[..len]);
        return (len < raw.len()).then_some(len);
    }
    canonical_path_slow(raw, out)
}

/// [`canonical_path`] by the full rules, segment by segment.
fn canonical_path_slow(raw: &[u8], out: &mut Vec<u8>) -> Option<usize> {
    let start = out.len();
    out.push(b'/');
    let mut seg_start = 0;
    // Whether the current segment holds a byte that step 9 escapes.
    let mut seg_escapes = false;
    let mut query = None;
    for (i, &b) in raw.iter().enumerate() {
        let class = CLASS[usize::from(b)];
        if class & (SEPARATOR | ESCAPE | QUERY) == 0 {
            continue;
        }
        if class & ESCAPE != 0 {
            seg_escapes = true;
            continue;
        }
        if class & QUERY != 0 {
            query = Some(i);
            break;
        }
        push_segment(&raw[seg_start..i], seg_escapes, start, out);
        seg_start = i + 1;
        seg_escapes = false;
    }
    // The last segment decides whether the path ends in a slash that stays
    // ("a/", "a/.", "a/..") or not ("a/b").
    let last = &raw[seg_start..query.unwrap_or(raw.len())];
    if !push_segment(last, seg_escapes, start, out) {
        out.pop();
    }
    query
}

/// The length of the path at the start of `raw` (up to its `?`) when that
/// path is canonical already, so that [`canonical_path`] may copy it as it
/// is: it starts with `/` and holds no `\\`, no byte that step 9 escapes and
/// no `/.` or `//` (the only ways to a dot segment or an empty one). `None`
/// sends the path through the full rules; it is also the answer for some
/// canonical paths (`/a/.b`), which the full rules leave unchanged.
///
/// Eight bytes at a time with exact byte masks (Anderson's "Bit Twiddling
/// Hacks", "determine if a word has a byte equal to n"), byte by byte for
/// the chunk holding the `?` and for the tail.
fn canonical_path_len(raw: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const LOWS: u64 = u64::from_le_bytes([0x7f; 8]);
    // 0x80 in each byte of `w` that equals `b`, 0 elsewhere (exact: no
    // borrow crosses bytes).
    let eq = |w: u64, b: u8| {
        let x = w ^ (ONES * u64::from(b));
        !(((x & LOWS) + LOWS) | x | LOWS)
    };
    // 0x80 in each byte below `n` (n <= 0x80), exact.
    let below = |w: u64, n: u8| !(((w & LOWS) + (ONES * u64::from(0x80 - n))) | w | LOWS);
    if raw.first() != Some(&b'/') {
        return None;
    }
    let mut i = 0;
    // Whether the byte before `raw[i]` is a '/'.
    let mut after_slash = false;
    while let Some(chunk) = raw.get(i..i + 8) {
        let Ok(bytes) = <[u8; 8]>::try_from(chunk) else {
            break;
        };
        let w = u64::from_le_bytes(bytes);
        let slashes = eq(w, b'/');
        let bad = eq(w, b'\\')
            | eq(w, b'%')
            | eq(w, b'#')
            | eq(w, 0x7f)
            | (w & !LOWS)
            | below(w, 0x21)
            // A '/' followed by '.' or '/', within the chunk or across
            // from the previous one.
            | (slashes & ((eq(w, b'.') | slashes) >> 8))
            | u64::from(after_slash && matches!(bytes[0], b'.' | b'/'));
        if bad != 0 || eq(w, b'?') != 0 {
            break;
        }
        after_slash = bytes[7] == b'/';
        i += 8;
    }
    for (j, &b) in raw.iter().enumerate().skip(i) {
        if b == b'?' {
            return Some(j);
        }
        if after_slash && (b == b'.' || b == b'/') || b == b'\\' || needs_escape(b) {
            return None;
        }
        after_slash = b == b'/';
    }
    Some(raw.len())
}

/// Adds one path segment to `out[path_start..]`, which is "/" or "/a/b/"
/// and stays ending in `/`; `""` and `.` add nothing and `..` drops the last
/// segment. Returns whether the segment leaves a trailing slash.
fn push_segment(seg: &[u8], escapes: bool, path_start: usize, out: &mut Vec<u8>) -> bool {
    match seg {
        b"" | b"." => true,
        b".." => {
            let dir = &out[path_start..out.len() - 1];
            let keep = dir.iter().rposition(|&b| b == b'/').map_or(1, |j| j + 1);
            out.truncate(path_start + keep);
            true
        }
        _ => {
            if escapes {
                escape_into(seg, out);
            } else {
                out.extend_from_slice(seg);
            }
            out.push(b'/');
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(s: &str) -> String {
        canonicalize(s)
            .map(|u| u.to_string())
            .unwrap_or_else(|e| format!("<{e}>"))
    }

    #[test]
    fn ipv4_forms() {
        assert_eq!(canon("http://3279880203/blah"), "http://195.127.0.11/blah");
        assert_eq!(canon("http://0x12.0x43.0x44.0x01"), "http://18.67.68.1/");
        assert_eq!(canon("http://10.1/"), "http://10.0.0.1/");
        assert_eq!(canon("http://012.1.1.1/"), "http://10.1.1.1/");
        assert_eq!(canon("http://256.1.1.1/"), "http://256.1.1.1/");
        assert_eq!(
            canon("http://24.174.232.35.bc.googleusercontent.com/"),
            "http://24.174.232.35.bc.googleusercontent.com/"
        );
    }

    #[test]
    fn ipv6_forms() {
        assert_eq!(
            canon("http://[FEDC:BA98:7654:3210:FEDC:BA98:7654:3210]:80/index.html"),
            "http://[fedc:ba98:7654:3210:fedc:ba98:7654:3210]/index.html"
        );
        assert_eq!(canon("http://[::192.9.5.5]/ipng"), "http://[::192.9.5.5]/ipng");
        assert_eq!(canon("http://[::ffff:1.2.3.4]/"), "http://[::ffff:1.2.3.4]/");
        assert_eq!(canon("http://[2001:0db8:0:0:0:0:0:1]/"), "http://[2001:db8::1]/");
        assert_eq!(canonicalize("http://[zz]/"), Err(CanonError::InvalidIpv6));
    }

    #[test]
    fn schemes_and_ports() {
        assert_eq!(canon("example.com:8080/x"), "http://example.com/x");
        assert_eq!(
            canonicalize("javascript:alert(1)"),
            Err(CanonError::NotHierarchical)
        );
        assert_eq!(
            canon("http://user:pw@google.com@evil.example/"),
            "http://evil.example/"
        );
        assert_eq!(canon("http://a.com?x=1"), "http://a.com/?x=1");
        assert_eq!(canon("http://a.com\\b\\c"), "http://a.com/b/c");
        assert_eq!(canon("//a.com/x"), "http://a.com/x");
    }

    #[test]
    fn idn() {
        assert_eq!(
            canon("http://www.\u{fc}mlat.com/"),
            "http://www.xn--mlat-zra.com/"
        );
        assert_eq!(canon("http://example\u{3002}com/"), "http://example.com/");
        assert_eq!(canon("http://ex\u{ad}ample.com/"), "http://example.com/");
    }

    #[test]
    fn expression_counts() {
        let u = canonicalize("http://a.b.c.d.e.f.g/1/2/3/4/5.html?q=1").unwrap();
        assert_eq!(u.expressions().count(), 30);
        let u = canonicalize("http://b/").unwrap();
        assert_eq!(u.expressions().map(|e| e.to_string()).collect::<Vec<_>>(), ["b/"]);
    }

    /// Idempotence counterexamples found by the property tests; each
    /// canonical form must canonicalize to itself.
    fn assert_fixed_point(input: &str, expected: &str) {
        assert_eq!(canon(input), expected, "canonical form of {input:?}");
        if !expected.starts_with('<') {
            assert_eq!(canon(expected), expected, "{expected:?} is not a fixed point");
        }
    }

    #[test]
    fn regression_host_ends_at_first_colon() {
        // Was "http://:/" and "http://a:b/": the port was cut at the last ':'.
        assert_eq!(canonicalize("http://::/"), Err(CanonError::EmptyHost));
        assert_fixed_point("http://a:b:c/x", "http://a/x");
        assert_fixed_point("http://a.com:80:90/", "http://a.com/");
    }

    #[test]
    fn regression_idna_output_with_url_delimiters() {
        // Punycode keeps ASCII: "%中文00" became "xn--%00-…", whose "%00"
        // decoded on the next pass.
        assert_fixed_point("http://%\u{4e2d}\u{6587}00/", "http://%25%E4%B8%AD%E6%96%8700/");
        // U+FF0F FULLWIDTH SOLIDUS maps to '/', which would split the host.
        assert_fixed_point("http://a\u{ff0f}b.com/", "http://a%EF%BC%8Fb.com/");
        // U+00AD SOFT HYPHEN is deleted, which would join "%" and "41".
        assert_fixed_point("http://a%\u{ad}41.com/", "http://a%25%C2%AD41.com/");
        // A plain IDN host is unaffected.
        assert_fixed_point("http://\u{fc}.com/", "http://xn--tda.com/");
    }

    #[test]
    fn regression_bracket_after_leading_dots() {
        // Was "http://[/": stripping the dot put '[' first.
        assert_eq!(canonicalize("http://.[::1]/"), Err(CanonError::InvalidIpv6));
        assert_fixed_point("http://a[b/", "http://a[b/");
    }

    /// An escaped delimiter in the authority must not move the host: browsers
    /// split the URL on the delimiters as written and only then unescape.
    /// Unescaping the whole URL first read this as host `www.wikipedia.org`.
    #[test]
    fn regression_escaped_slash_before_userinfo_does_not_hide_the_host() {
        assert_fixed_point(
            "https://www.wikipedia.org%2F@alibaba666.bet/",
            "https://alibaba666.bet/",
        );
        assert_fixed_point("www.wikipedia.org%2F@alibaba666.bet/x", "http://alibaba666.bet/x");
        assert_fixed_point("ht\ttp://a%2Fb@c.com/", "http://c.com/");
        assert_fixed_point("http://user%40x@evil.com/", "http://evil.com/");
        assert_fixed_point("http://good.com%3A80@evil.com/p", "http://evil.com/p");
        assert_fixed_point("//good.com%2F@evil.com/", "http://evil.com/");
        assert_fixed_point("http://%31%36%38.1.1.1/", "http://168.1.1.1/");
        assert_fixed_point("http://[%3A%3A1]/", "http://[::1]/");
        assert_fixed_point("http://ex%41mple.com/", "http://example.com/");
        // Path and query are still unescaped before they are split (v4).
        assert_fixed_point("http://a.com/x%2Fy", "http://a.com/x/y");
        assert_fixed_point("http://a.com/x%3Fy", "http://a.com/x?y");
        // A whole URL escaped as one string is still read unescaped.
        assert_fixed_point("http%3A%2F%2Fwackyurl.com:80/", "http://wackyurl.com/");
        assert_fixed_point("%2F%2Fa.com/x", "http://a.com/x");
    }

    /// A host that unescapes to a URL delimiter has no page behind it:
    /// browsers refuse it (WHATWG forbidden domain code points).
    #[test]
    fn escaped_delimiters_in_the_host_are_refused() {
        for (url, byte) in [
            ("http://evil.com%40good.com/", b'@'),
            ("http://a.com%2Fb/", b'/'),
            ("http://a.com%5Cb/", b'\\'),
            ("http://a.com%3Fb/", b'?'),
            ("http://a.com%3A80/", b':'),
            ("a.com%2Fb", b'/'),
        ] {
            assert_eq!(
                canonicalize(url),
                Err(CanonError::DelimiterInHost { byte }),
                "{url}"
            );
        }
        assert_eq!(
            canonicalize("http://a.com%2Fb/").unwrap_err().to_string(),
            "host holds '/' once unescaped, a URL delimiter browsers reject in a host"
        );
    }

    /// http(s) URLs as browsers read them: backslashes for slashes, and none
    /// or one slash after the scheme (WHATWG "special authority ignore
    /// slashes state"). Three slashes stay invalid (conformance section G).
    #[test]
    fn browser_forms_of_http_schemes() {
        assert_fixed_point("https:\\\\evil.com\\x", "https://evil.com/x");
        assert_fixed_point("https:/\\evil.com/", "https://evil.com/");
        assert_fixed_point("https:\\/evil.com/", "https://evil.com/");
        assert_fixed_point("https:evil.com", "https://evil.com/");
        assert_fixed_point("HTTP:/evil.com/a", "http://evil.com/a");
        assert_fixed_point("https:evil.com%2F@good.com/", "https://good.com/");
        assert_eq!(canonicalize("http:///x"), Err(CanonError::EmptyHost));
        assert_eq!(canonicalize("http:\\\\\\x"), Err(CanonError::EmptyHost));
        assert_eq!(canonicalize("https:"), Err(CanonError::EmptyHost));
        // Other schemes still need "//", and "host:port" stays a host.
        assert_eq!(canonicalize("ftp:\\\\a.com/"), Err(CanonError::NotHierarchical));
        assert_eq!(canonicalize("mailto:a%40b.com"), Err(CanonError::NotHierarchical));
        assert_eq!(canon("localhost:8080/x"), "http://localhost/x");
    }

    #[test]
    fn path_dot_segments_without_a_segment_list() {
        assert_eq!(canon("http://a/.."), "http://a/");
        assert_eq!(canon("http://a/../../x/./y/.."), "http://a/x/");
        assert_eq!(canon("http://a/x/y/../../z"), "http://a/z");
        assert_eq!(canon("http://a/x%2F..%2Fy"), "http://a/y");
        assert_eq!(canon("http://a/x\\..\\y\\"), "http://a/y/");
    }

    /// The word-at-a-time scan agrees with a plain byte loop for every
    /// special byte at every position across chunk boundaries.
    #[test]
    fn scan_fragment_matches_byte_loop() {
        let naive = |url: &[u8]| {
            let cut = url.iter().position(|&b| b == b'#').unwrap_or(url.len());
            let work = url[..cut]
                .iter()
                .any(|&b| matches!(b, b'%' | b'\t' | b'\r' | b'\n'));
            (cut, work)
        };
        for len in 0..26 {
            for at in 0..len {
                for special in [
                    b'#',
                    b'%',
                    b'\t',
                    b'\r',
                    b'\n',
                    0x00,
                    0x0d,
                    0x0e,
                    0x23 ^ 0x80,
                    0xff,
                ] {
                    let mut url = vec![b'a'; len];
                    url[at] = special;
                    assert_eq!(scan_fragment(&url), naive(&url), "{url:?}");
                    url[len - 1 - at / 2] = b'#';
                    assert_eq!(scan_fragment(&url), naive(&url), "{url:?}");
                }
            }
        }
    }

    /// The fast path of `canonical_path` agrees with the full rules for
    /// every special byte at every position across chunk boundaries.
    #[test]
    fn canonical_path_fast_path_matches_full_rules() {
        let full = |raw: &[u8]| {
            // Canonicalize through the full rules by forcing the slow path.
            let mut out = Vec::new();
            let q = canonical_path_slow(raw, &mut out);
            (out, q)
        };
        let fast = |raw: &[u8]| {
            let mut out = Vec::new();
            let q = canonical_path(raw, &mut out);
            (out, q)
        };
        let specials: &[&[u8]] = &[
            b"/", b".", b"./", b"/.", b"//", b"..", b"?", b"\\", b"%", b"#", b" ", b"\x7f", b"\x80", b"\xff",
            b"\x00", b"a",
        ];
        for len in 1..20 {
            for at in 0..len {
                for special in specials {
                    let mut raw = vec![b'a'; len];
                    raw[0] = b'/';
                    raw.splice(at..at, special.iter().copied());
                    let (out, q) = fast(&raw);
                    assert_eq!(
                        (out.clone(), q),
                        full(&raw),
                        "{:?}",
                        String::from_utf8_lossy(&raw)
                    );
                    if canonical_path_len(&raw).is_some() {
                        assert_eq!(&out[..], &raw[..q.unwrap_or(raw.len())], "{raw:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn regression_dot_segment_before_a_fragment_in_the_next_block() {
        // A "/." or "/.." whose segment ends at a '#' past the end of the
        // 64-byte block it starts in was kept as a name, so the canonical
        // path kept its dot segment (and missed the listed directory).
        for pad in 1..200 {
            let parent = format!("http://evil.example/1/2/3/4/5/{}", "p".repeat(pad));
            for (tail, expected) in [
                ("/.#x", format!("{parent}/")),
                ("/.#", format!("{parent}/")),
                ("/..#x", "http://evil.example/1/2/3/4/5/".to_owned()),
                ("/..#", "http://evil.example/1/2/3/4/5/".to_owned()),
            ] {
                let input = format!("{parent}{tail}");
                assert_eq!(canon(&input), expected, "{input}");
                assert_eq!(
                    canonicalize(&input),
                    canonicalize_by_steps(input.as_bytes()),
                    "{input}"
                );
            }
        }
    }

    #[test]
    fn unescape_fully_copies_runs_like_the_byte_loop() {
        // The byte-at-a-time definition that the run copying must match.
        fn bytewise(input: &[u8]) -> Vec<u8> {
            let mut out: Vec<u8> = Vec::new();
            for &b in input.iter().filter(|b| !matches!(b, b'\t' | b'\r' | b'\n')) {
                out.push(b);
                while let [.., b'%', hi, lo] = out[..] {
                    let (Some(h), Some(l)) = (hex_value(hi), hex_value(lo)) else {
                        break;
                    };
                    out.truncate(out.len() - 3);
                    out.push(h << 4 | l);
                }
            }
            out
        }
        use rand::{Rng, SeedableRng};
        let alphabet = b"%%%2255aF0g\t\n/";
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5afe);
        for _ in 0..50_000 {
            let len = rng.gen_range(0..14);
            let input: Vec<u8> = (0..len)
                .map(|_| alphabet[rng.gen_range(0..alphabet.len())])
                .collect();
            assert_eq!(
                unescape_fully(&input),
                bytewise(&input),
                "{:?}",
                input.escape_ascii().to_string()
            );
        }
    }

    #[test]
    fn unescape_is_linear_and_complete() {
        let mut s = String::from("http://host/");
        s.push('%');
        for _ in 0..30_000 {
            s.push_str("25");
        }
        assert_eq!(canon(&s), "http://host/%25");
    }
}
