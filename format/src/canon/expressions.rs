//! The host-suffix/path-prefix expressions of a canonical URL (v4
//! "Suffix/Prefix Expressions"): where its suffixes and directory prefixes
//! lie, and the iterator over their combinations.

use std::fmt;

use super::url::CanonicalUrl;

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

    /// The most specific expression: the first of
    /// [`expressions`](Self::expressions), the host with the exact path and
    /// its query (without a `?` when the query is empty), e.g.
    /// `a.b.c/1/2.html?param=1`. One slice of the URL, found without
    /// laying out the others (what a publisher hashes for a URL entry).
    ///
    /// ```
    /// use blocksieve_format::canonicalize;
    /// let url = canonicalize("http://a.b.c/1/2.html?param=1").unwrap();
    /// assert_eq!(url.most_specific_expression(), "a.b.c/1/2.html?param=1");
    /// assert_eq!(canonicalize("http://a.b.c/x?").unwrap().most_specific_expression(), "a.b.c/x");
    /// ```
    pub fn most_specific_expression(&self) -> &str {
        let end = if self.serialization.len() > self.path_end + 1 {
            self.serialization.len()
        } else {
            self.path_end
        };
        &self.serialization[self.host_start..end]
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
    fn the_most_specific_expression_is_the_first_of_all() {
        let urls = [
            "http://a.b.c.d.e.f.g/1/2/3/4/5.html?q=1",
            "http://b/",
            "http://a.b/x?",
            "http://a.b/x?#f",
            "http://a.b/?y",
            "http://1.2.3.4/a/b",
            "http://[::1]/p?q",
            "https://www.example.com:8080/a%20b/../c?d=e&f",
            "http://xn--bcher-kva.example/",
        ];
        for u in urls {
            let url = canonicalize(u).unwrap();
            assert_eq!(
                url.most_specific_expression(),
                url.expressions().next().unwrap().as_str(),
                "{u}"
            );
        }
    }

    #[test]
    fn expression_counts() {
        let u = canonicalize("http://a.b.c.d.e.f.g/1/2/3/4/5.html?q=1").unwrap();
        assert_eq!(u.expressions().count(), 30);
        let u = canonicalize("http://b/").unwrap();
        assert_eq!(u.expressions().map(|e| e.to_string()).collect::<Vec<_>>(), ["b/"]);
    }
}
