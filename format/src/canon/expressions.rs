//! The host-suffix/path-prefix expressions of a canonical URL (v4
//! "Suffix/Prefix Expressions"): where its suffixes and directory prefixes
//! lie, and the iterator over their combinations.

use std::fmt;

use super::{CanonicalUrl, HostKind};
use crate::scan;

/// The host suffixes and directory prefixes of a canonical URL, as offsets
/// into its serialization (which is at most 3 ×
/// [`MAX_URL_BYTES`](super::MAX_URL_BYTES) long, so `u32` holds them).
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

impl CanonicalUrl {
    /// All host-suffix/path-prefix expressions of this URL (at most
    /// [`MAX_EXPRESSIONS`](super::MAX_EXPRESSIONS), no duplicates): for each
    /// host suffix (exact host first), the exact path with query, the exact
    /// path, then the directory prefixes from `/` down.
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

#[cfg(test)]
mod tests {
    use crate::canonicalize;

    #[test]
    fn expression_counts() {
        let u = canonicalize("http://a.b.c.d.e.f.g/1/2/3/4/5.html?q=1").unwrap();
        assert_eq!(u.expressions().count(), 30);
        let u = canonicalize("http://b/").unwrap();
        assert_eq!(u.expressions().map(|e| e.to_string()).collect::<Vec<_>>(), ["b/"]);
    }
}
