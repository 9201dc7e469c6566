//! The canonical URL: its one buffer, the offsets of its parts, and the
//! layout of its host suffixes and directory prefixes that the expressions
//! are read from. Every other file of the module builds or reads these.

use std::fmt;

use crate::scan;

/// The longest URL accepted, in bytes, before any processing: 2 MiB, the
/// limit Chromium applies to URLs (`url::kMaxURLChars`). Real feeds carry
/// URLs of up to 64 KiB.
pub const MAX_URL_BYTES: usize = 2 * 1024 * 1024;

/// The most expressions one URL can produce: 5 hosts × 6 paths.
pub const MAX_EXPRESSIONS: usize = 30;

/// [`CanonError::TooLong`] for an input over [`MAX_URL_BYTES`]: every way
/// through canonicalization checks this first.
pub(super) fn check_length(input: &[u8]) -> Result<(), CanonError> {
    if input.len() > MAX_URL_BYTES {
        return Err(CanonError::TooLong {
            len: input.len(),
            max: MAX_URL_BYTES,
        });
    }
    Ok(())
}

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
    pub(super) serialization: String,
    /// End of the scheme (the `:` of `://`).
    pub(super) scheme_end: usize,
    /// Start of the host, just after `://`.
    pub(super) host_start: usize,
    /// End of the host and start of the path.
    pub(super) host_end: usize,
    /// End of the path: the `?` of the query, or the end of the string.
    pub(super) path_end: usize,
    pub(super) host_kind: HostKind,
    /// Where the host suffixes start and the directory prefixes end, found
    /// while canonicalizing so that listing the expressions scans nothing.
    pub(super) layout: Layout,
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
}

impl fmt::Display for CanonicalUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.serialization)
    }
}

/// The host suffixes and directory prefixes of a canonical URL, as offsets
/// into its serialization (which is at most 3 ×
/// [`MAX_URL_BYTES`] long, so `u32` holds them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub(super) struct Layout {
    /// Starts of the host suffixes other than the exact host, longest first:
    /// the last five labels down to the last two.
    pub(super) suffixes: [u32; 4],
    pub(super) suffix_count: u8,
    /// Ends of the directory prefixes `/`, `/a/`, `/a/b/`, `/a/b/c/` (just
    /// after each of the first four slashes of the path) other than the
    /// exact path, shortest first.
    pub(super) dirs: [u32; 4],
    pub(super) dir_count: u8,
}

impl Layout {
    /// The layout of `url[host_start..host_end]` (a host of `kind`) and
    /// `url[host_end..path_end]` (its path), found by scanning them.
    pub(super) fn scan(
        url: &[u8],
        host_start: usize,
        host_end: usize,
        path_end: usize,
        kind: HostKind,
    ) -> Self {
        let mut layout = Self::default();
        if kind == HostKind::Domain {
            layout.set_suffixes(&last_dots(url, host_start, host_end));
        }
        layout.set_dirs(&first_slashes(url, host_end, path_end), path_end);
        layout
    }

    /// This layout for the same URL at `to` rather than `from` (every
    /// position is at `from` or after it).
    pub(super) fn moved(mut self, from: usize, to: usize) -> Self {
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
    pub(super) fn set_suffixes(&mut self, last_dots: &[usize; 5]) {
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
    pub(super) fn set_dirs(&mut self, first_slashes: &[usize; 4], path_end: usize) {
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
pub(super) fn last_dots(url: &[u8], start: usize, end: usize) -> [usize; 5] {
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
pub(super) fn first_slashes(url: &[u8], start: usize, end: usize) -> [usize; 4] {
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
