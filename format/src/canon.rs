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
//! 5. Split off the scheme. A scheme is `[A-Za-z][A-Za-z0-9+.-]*:`. Followed by
//!    `//` it is kept (lowercased). A URL without a scheme is treated as
//!    `http://` + URL (v4: "if the URL has no scheme, assume http"). A
//!    `host:port` input such as `example.com:8080/x` is read as a host with a
//!    port, not as the scheme `example.com`. Any other scheme that is not
//!    followed by `//` (`mailto:`, `javascript:`, `data:`) is rejected with
//!    [`CanonError::NotHierarchical`]: these URLs have no host to look up.
//! 6. The query starts at the first `?` after the scheme (so `http://a.com?q`
//!    has host `a.com`, path `/` and query `q`), and the authority ends at the
//!    first `/` or `\` (browsers treat `\` as `/` in http(s) URLs). Userinfo
//!    (everything up to the last `@`) and the port are dropped (v4 official
//!    vector `http://www.gotaport.com:1234/` → no port; the v2/v3 documents
//!    kept it, the v4 ones do not).
//! 7. Host (v4 "To canonicalize the hostname"): the ideographic full stops
//!    U+3002, U+FF0E and U+FF61 become `.`; leading and trailing dots are
//!    removed and runs of dots collapse to one; ASCII letters are lowercased;
//!    a host with non-ASCII characters that is valid UTF-8 is converted to
//!    Punycode by UTS #46 (the `idna` crate), so `www.ümlat.com` becomes
//!    `www.xn--mlat-zra.com`. A host that is not valid UTF-8, or that UTS #46
//!    rejects, keeps its bytes (escaped in step 9), like Chromium's
//!    `http://%01%80.com/` official vector. A host that parses as an IPv4
//!    address in any form browsers accept (1 to 4 parts, each decimal, octal
//!    with a leading `0`, or hex with `0x`; the last part fills the remaining
//!    bytes — the WHATWG "IPv4 parser") becomes dotted decimal, so
//!    `3279880203` is `195.127.0.11` and `10.1` is `10.0.0.1`. A number that
//!    overflows its part is not an address and stays a host name. A bracketed
//!    host must be an IPv6 address; it is written in RFC 5952 form (lowercase,
//!    longest zero run as `::`) inside its brackets, except that an address
//!    written with an embedded dotted quad keeps that quad (`[::192.9.5.5]`,
//!    as in the Go client's vectors). An empty host is rejected with
//!    [`CanonError::EmptyHost`].
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

use std::fmt;
use std::net::Ipv6Addr;

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
    scheme: String,
    host: String,
    host_kind: HostKind,
    /// The path followed, when there is a query, by `?` and the query. Kept
    /// in one buffer so that both "path" and "path?query" expressions are
    /// slices of it.
    path_and_query: String,
    /// Byte length of the path within `path_and_query`.
    path_len: usize,
}

impl CanonicalUrl {
    /// The lowercased scheme, e.g. `http`.
    pub fn scheme(&self) -> &str {
        &self.scheme
    }

    /// The canonical host, e.g. `www.example.com`, `192.0.2.1` or `[2001:db8::1]`.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Whether the host is a domain name or an IP address.
    pub fn host_kind(&self) -> HostKind {
        self.host_kind
    }

    /// The canonical path, always starting with `/`.
    pub fn path(&self) -> &str {
        &self.path_and_query[..self.path_len]
    }

    /// The query without its `?`: `None` when the URL has no `?`, `Some("")`
    /// for an empty query.
    pub fn query(&self) -> Option<&str> {
        self.path_and_query.get(self.path_len + 1..)
    }

    /// The path followed by `?query` when the URL has a query.
    pub fn path_and_query(&self) -> &str {
        &self.path_and_query
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
}

impl fmt::Display for CanonicalUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}{}", self.scheme, self.host, self.path_and_query)
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
}

impl Expression<'_> {
    /// The SHA-256 full hash of this expression's string, computed without
    /// concatenating host and path.
    pub fn full_hash(&self) -> crate::FullHash {
        crate::FullHash::of_parts(self.host.as_bytes(), self.path.as_bytes())
    }
}

impl fmt::Display for Expression<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.host)?;
        f.write_str(self.path)
    }
}

/// Iterator over the expressions of a [`CanonicalUrl`]; see
/// [`CanonicalUrl::expressions`].
#[derive(Debug, Clone)]
pub struct Expressions<'a> {
    url: &'a CanonicalUrl,
    /// Byte offsets into the host where each host suffix starts.
    host_starts: [usize; 5],
    host_count: usize,
    /// Byte ranges `0..end` of `path_and_query`, one per path expression.
    path_ends: [usize; 6],
    path_count: usize,
    next: usize,
}

impl<'a> Expressions<'a> {
    fn new(url: &'a CanonicalUrl) -> Self {
        let mut host_starts = [0usize; 5];
        let mut host_count = 1;
        if url.host_kind == HostKind::Domain {
            // Offsets just after each dot, i.e. where every proper suffix starts.
            let host = url.host.as_bytes();
            let mut dots = [0usize; 5];
            let mut ndots = 0;
            // Walk from the end collecting the last five dots.
            let mut i = host.len();
            while i > 0 && ndots < 5 {
                i -= 1;
                if host[i] == b'.' {
                    dots[ndots] = i + 1;
                    ndots += 1;
                }
            }
            // dots[0] starts the last two labels' TLD ("com"), never used alone.
            // Suffixes with k labels (k = 2..=5) start at dots[k - 1]; a suffix
            // equal to the whole host is already the exact host.
            let total_labels = host.iter().filter(|&&b| b == b'.').count() + 1;
            let max_k = (total_labels - 1).min(5);
            let mut k = max_k;
            while k >= 2 {
                host_starts[host_count] = dots[k - 1];
                host_count += 1;
                k -= 1;
            }
        }

        let mut path_ends = [0usize; 6];
        let mut path_count = 0;
        let pq = url.path_and_query.as_bytes();
        if url.query().is_some_and(|q| !q.is_empty()) {
            path_ends[path_count] = pq.len();
            path_count += 1;
        }
        path_ends[path_count] = url.path_len;
        path_count += 1;
        // Directory prefixes "/", "/a/", "/a/b/", "/a/b/c/": the first four
        // slashes of the path, each taken as a prefix ending after it, unless it
        // equals the exact path already listed.
        let path = &pq[..url.path_len];
        let mut prefixes = 0;
        for (i, &b) in path.iter().enumerate() {
            if prefixes == 4 {
                break;
            }
            if b == b'/' {
                let end = i + 1;
                if end != url.path_len {
                    path_ends[path_count] = end;
                    path_count += 1;
                }
                prefixes += 1;
            }
        }

        Self {
            url,
            host_starts,
            host_count,
            path_ends,
            path_count,
            next: 0,
        }
    }
}

impl<'a> Iterator for Expressions<'a> {
    type Item = Expression<'a>;

    fn next(&mut self) -> Option<Expression<'a>> {
        let total = self.host_count * self.path_count;
        if self.next >= total {
            return None;
        }
        let h = self.next / self.path_count;
        let p = self.next % self.path_count;
        self.next += 1;
        let url: &'a CanonicalUrl = self.url;
        Some(Expression {
            host: &url.host[self.host_starts[h]..],
            path: &url.path_and_query[..self.path_ends[p]],
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.host_count * self.path_count - self.next;
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
    // 1. Remove tab, CR and LF; 2. trim C0 controls and space.
    let start = input.iter().position(|&b| b > 0x20).unwrap_or(input.len());
    let end = input.iter().rposition(|&b| b > 0x20).map_or(start, |i| i + 1);
    let trimmed = &input[start..end];
    // 3. Cut the fragment.
    let without_fragment = match trimmed.iter().position(|&b| b == b'#') {
        Some(i) => &trimmed[..i],
        None => trimmed,
    };
    // 4. Unescape to a fixed point (also drops tab, CR and LF as it copies;
    // decoded %09/%0d/%0a bytes are kept).
    let raw = unescape_fully(without_fragment);
    if raw.is_empty() {
        return Err(CanonError::Empty);
    }

    // 5. Scheme.
    let (scheme, rest) = split_scheme(&raw)?;
    // 6. Query, authority, path.
    let (before_query, query) = match rest.iter().position(|&b| b == b'?') {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let authority_end = before_query
        .iter()
        .position(|&b| b == b'/' || b == b'\\')
        .unwrap_or(before_query.len());
    let authority = &before_query[..authority_end];
    let raw_path = &before_query[authority_end..];

    let (host, host_kind) = canonical_host(authority)?;

    let mut path_and_query = String::with_capacity(raw_path.len() + query.map_or(0, |q| q.len() + 1) + 1);
    canonical_path(raw_path, &mut path_and_query);
    let path_len = path_and_query.len();
    if let Some(q) = query {
        path_and_query.push('?');
        escape_into(q, &mut path_and_query);
    }

    Ok(CanonicalUrl {
        scheme,
        host,
        host_kind,
        path_and_query,
        path_len,
    })
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
    for &b in input {
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

fn split_scheme(raw: &[u8]) -> Result<(String, &[u8]), CanonError> {
    let first = raw[0];
    if first == b'/' || first == b'\\' || first == b'?' {
        // "//host" (scheme-relative) has a host; "/path" and "?q" do not.
        if raw.starts_with(b"//") && !raw.starts_with(b"///") {
            return Ok(("http".to_owned(), &raw[2..]));
        }
        return Err(CanonError::RelativeUrl);
    }
    if first.is_ascii_alphabetic() {
        let len = raw
            .iter()
            .position(|&b| !(b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')))
            .unwrap_or(raw.len());
        if raw.get(len) == Some(&b':') {
            let after = &raw[len + 1..];
            if let Some(rest) = after.strip_prefix(b"//") {
                return Ok((raw[..len].to_ascii_lowercase().escape_ascii().to_string(), rest));
            }
            // "host:port[/...]" is a host with a port, not a scheme.
            let digits = after.iter().take_while(|b| b.is_ascii_digit()).count();
            let port_ends = matches!(after.get(digits), None | Some(b'/' | b'\\' | b'?'));
            if !(digits > 0 && port_ends) {
                return Err(CanonError::NotHierarchical);
            }
        }
    } else if first == b':' {
        return Err(CanonError::EmptyHost);
    }
    Ok(("http".to_owned(), raw))
}

/// Escapes bytes `<= 0x20`, `>= 0x7f`, `#` and `%` into `out`.
fn escape_into(bytes: &[u8], out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in bytes {
        if b <= 0x20 || b >= 0x7f || b == b'#' || b == b'%' {
            out.push('%');
            out.push(HEX[usize::from(b >> 4)] as char);
            out.push(HEX[usize::from(b & 0xf)] as char);
        } else {
            out.push(b as char);
        }
    }
}

fn canonical_host(authority: &[u8]) -> Result<(String, HostKind), CanonError> {
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
        let inner = &host_port[1..close];
        return canonical_ipv6(inner).map(|h| (h, HostKind::Ipv6));
    }
    // Drop the port.
    let host = match host_port.iter().rposition(|&b| b == b':') {
        Some(i) => &host_port[..i],
        None => host_port,
    };
    let mut name = normalize_dots(host);
    if !name.is_ascii() {
        if let Ok(s) = std::str::from_utf8(&name) {
            if let Ok(ascii) = idna::domain_to_ascii_cow(s.as_bytes(), idna::AsciiDenyList::EMPTY) {
                name = normalize_dots(ascii.as_bytes());
            }
        }
    }
    if name.is_empty() {
        return Err(CanonError::EmptyHost);
    }
    name.make_ascii_lowercase();
    if let Some(ip) = parse_ipv4(&name) {
        let [a, b, c, d] = ip.to_be_bytes();
        return Ok((format!("{a}.{b}.{c}.{d}"), HostKind::Ipv4));
    }
    let mut out = String::with_capacity(name.len());
    escape_into(&name, &mut out);
    Ok((out, HostKind::Domain))
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
    let mut parts = [0u64; 4];
    let mut count = 0;
    for part in host.split(|&b| b == b'.') {
        if count == 4 {
            return None;
        }
        parts[count] = parse_ipv4_number(part)?;
        count += 1;
    }
    let last = parts[count - 1];
    let last_bits = 8 * (5 - count as u32);
    if count == 0 || last >= 1u64 << last_bits {
        return None;
    }
    let mut addr: u64 = last;
    for (i, &p) in parts[..count - 1].iter().enumerate() {
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

/// Writes the canonical, escaped form of `raw` (the bytes between the
/// authority and the query) into `out`.
fn canonical_path(raw: &[u8], out: &mut String) {
    // Segments between slashes; "" and "." vanish, ".." pops.
    let mut segments: Vec<&[u8]> = Vec::new();
    let mut trailing_slash = false;
    for seg in raw.split(|&b| b == b'/' || b == b'\\') {
        match seg {
            b"" | b"." => trailing_slash = true,
            b".." => {
                segments.pop();
                trailing_slash = true;
            }
            s => {
                segments.push(s);
                trailing_slash = false;
            }
        }
    }
    out.push('/');
    for (i, seg) in segments.iter().enumerate() {
        escape_into(seg, out);
        if i + 1 < segments.len() || trailing_slash {
            out.push('/');
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
