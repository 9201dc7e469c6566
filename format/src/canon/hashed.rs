//! A URL's expressions and their full hashes, kept together: what a client
//! needs for every check, canonicalized once and, in the common cases,
//! without touching the heap.

use std::fmt;

use super::common::{Common, common_case};
use arrayvec::ArrayVec;

use super::hashing::expression_spans;
use super::steps::canonicalize_by_steps;
use super::url::{CanonError, CanonicalUrl, Layout, MAX_EXPRESSIONS, MAX_URL_BYTES};
use crate::FullHash;

/// The longest host kept on the stack with the path `/` it lacks (a host
/// is at most 253 bytes in DNS); a longer one is canonicalized.
const HOST_ON_STACK: usize = 256;

/// Every expression of a URL with its full hash, in the order of
/// [`CanonicalUrl::expressions`] (the exact URL first): the same strings
/// and hashes as `canonicalize(input)?.expressions()`, computed in one
/// pass.
///
/// Each expression is one contiguous slice of the canonical URL (a host
/// suffix runs into the path prefix after it), so only where each starts
/// and ends is kept. When the input is canonical as written (most URLs in
/// traffic and feeds), those slices are of the input itself: nothing is
/// copied or allocated. A host alone (`example.com`) is copied to the
/// stack with its path `/`. Any other input is canonicalized into a
/// [`CanonicalUrl`], once: asking for an expression later (a prefix hit)
/// never canonicalizes again.
///
/// ```
/// use blocksieve_format::{HashedUrl, canonicalize};
/// let url = HashedUrl::of(b"http://a.b.c/1/2.html?param=1").unwrap();
/// let canonical = canonicalize("http://a.b.c/1/2.html?param=1").unwrap();
/// let expected: Vec<_> = canonical.expressions().map(|e| (e.as_str().to_owned(), e.full_hash())).collect();
/// let got: Vec<_> = url.iter().map(|(e, h)| (e.to_owned(), *h)).collect();
/// assert_eq!(got, expected);
/// assert_eq!(url.expression(0), Some("a.b.c/1/2.html?param=1"));
/// assert!(HashedUrl::of(b"mailto:someone@example.com").is_err());
/// ```
#[derive(Clone)]
pub struct HashedUrl<'a> {
    text: Text<'a>,
    /// Where expression `i` is in `text`, for each `i` of `hashes`.
    /// `ArrayVec`s, not arrays: a check writes the ~5 slots it uses, not
    /// the 30 a URL could have (zeroing 1.2 KB cost ~130 instructions a
    /// check).
    spans: ArrayVec<(u32, u32), MAX_EXPRESSIONS>,
    hashes: ArrayVec<FullHash, MAX_EXPRESSIONS>,
}

/// The canonical URL's bytes, from the host on or whole.
#[derive(Clone)]
enum Text<'a> {
    /// Canonical as written: the input.
    Input(&'a [u8]),
    /// A host without a path, and the `/` it gets.
    Host {
        bytes: [u8; HOST_ON_STACK + 1],
        len: usize,
    },
    /// Canonicalized.
    Canonical(CanonicalUrl),
}

impl Default for HashedUrl<'_> {
    /// No URL yet: no expression, until [`HashedUrl::set`].
    fn default() -> Self {
        Self {
            text: Text::Input(&[]),
            spans: ArrayVec::new(),
            hashes: ArrayVec::new(),
        }
    }
}

impl Text<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Self::Input(bytes) => bytes,
            Self::Host { bytes, len } => bytes.get(..*len).unwrap_or_default(),
            Self::Canonical(url) => url.serialization.as_bytes(),
        }
    }
}

impl<'a> HashedUrl<'a> {
    /// Canonicalizes `input` (Safe Browsing v4 "Canonicalization") and
    /// hashes each of its expressions.
    ///
    /// # Errors
    ///
    /// As [`canonicalize`](super::canonicalize).
    #[inline(always)]
    pub fn of(input: &'a [u8]) -> Result<Self, CanonError> {
        let mut this = Self::default();
        this.set(input)?;
        Ok(this)
    }

    /// [`Self::of`] into `self`, which a check can keep where it is: the
    /// value is large (the hashes of up to 30 expressions), and moving it
    /// costs about a fifth of a check. On error `self` holds no expression.
    ///
    /// # Errors
    ///
    /// As [`canonicalize`](super::canonicalize).
    #[inline(always)]
    pub fn set(&mut self, input: &'a [u8]) -> Result<(), CanonError> {
        self.set_then(input, |_| {})
    }

    /// [`Self::set`], calling `on_hash` with each full hash as soon as it
    /// is computed, in expression order: a check starts loading the filter
    /// memory for one expression ([`PrefixFilter::prefetch`](crate::PrefixFilter::prefetch))
    /// while the next ones are hashed.
    ///
    /// # Errors
    ///
    /// As [`canonicalize`](super::canonicalize); `on_hash` is not called.
    #[inline(always)]
    pub fn set_then(&mut self, input: &'a [u8], on_hash: impl FnMut(&FullHash)) -> Result<(), CanonError> {
        self.spans.clear();
        self.hashes.clear();
        let this = self;
        let (host_start, path_end, layout) = match (input.len() <= MAX_URL_BYTES)
            .then(|| common_case(input))
            .flatten()
        {
            Some(Common::AsWritten {
                end,
                host_start,
                path_end,
                add_slash: false,
                layout,
                ..
            }) => {
                this.text = Text::Input(&input[..end]);
                (host_start, path_end, layout)
            }
            Some(Common::AsWritten {
                end,
                host_start,
                add_slash: true,
                layout,
                ..
            }) if end - host_start < HOST_ON_STACK => {
                let len = end - host_start + 1;
                let mut bytes = [b'/'; HOST_ON_STACK + 1];
                bytes[..len - 1].copy_from_slice(&input[host_start..end]);
                this.text = Text::Host { bytes, len };
                (0, len, layout.moved(host_start, 0))
            }
            Some(Common::Built(url)) => this.set_canonical(url),
            // The steps give the same URL as the common case (checked by
            // the property tests and the fuzz target).
            Some(Common::AsWritten { .. }) | None => this.set_canonical(canonicalize_by_steps(input)?),
        };
        this.hash(host_start, path_end, &layout, on_hash);
        Ok(())
    }

    fn set_canonical(&mut self, url: CanonicalUrl) -> (usize, usize, Layout) {
        let found = (url.host_start, url.path_end, url.layout);
        self.text = Text::Canonical(url);
        found
    }

    /// Lists the expressions of the text, then hashes them in one loop (see
    /// [`CanonicalUrl::full_hashes_into`]).
    #[inline(always)]
    fn hash(
        &mut self,
        host_start: usize,
        path_end: usize,
        layout: &Layout,
        mut on_hash: impl FnMut(&FullHash),
    ) {
        let bytes = self.text.bytes();
        let (listed, listed_count) = expression_spans(bytes.len(), host_start, path_end, layout);
        for &(start, end) in &listed[..listed_count] {
            if let Some(expression) = bytes.get(start as usize..end as usize) {
                // At most MAX_EXPRESSIONS spans are listed: never full.
                let hash = FullHash::of(expression);
                on_hash(&hash);
                let _ = self.spans.try_push((start, end));
                let _ = self.hashes.try_push(hash);
            }
        }
    }

    /// The full hash of each expression, in expression order.
    #[inline]
    pub fn hashes(&self) -> &[FullHash] {
        &self.hashes
    }

    /// The number of expressions (1 to [`MAX_EXPRESSIONS`]).
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    /// Whether there is no expression: only before [`Self::set`] succeeds
    /// (a URL has at least one).
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// Expression `index` (in the order of [`Self::hashes`]), e.g.
    /// `b.c/1/`; `None` past the last.
    pub fn expression(&self, index: usize) -> Option<&str> {
        let &(start, end) = self.spans.get(index)?;
        let bytes = self.text.bytes().get(start as usize..end as usize)?;
        // Canonical URLs are ASCII: this never fails.
        std::str::from_utf8(bytes).ok()
    }

    /// Each expression and its full hash, the exact URL first.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &FullHash)> {
        (0..self.hashes.len()).filter_map(move |i| Some((self.expression(i)?, self.hashes.get(i)?)))
    }
}

impl fmt::Debug for HashedUrl<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonicalize;

    #[test]
    fn the_same_expressions_and_hashes_as_a_canonical_url() {
        let inputs = [
            "http://a.b.c/1/2.html?param=1",
            "https://www.example.com/a/b/c/d/e/f/g?q=1#frag",
            "example.com",
            "http://EXAMPLE.com/%7Efoo/../bar",
            "http://1.2.3.4/x/y",
            "www.example.com/a/",
            "http://a.b.c.d.e.f.g/1.html",
            "http://host.example:8080/x",
            &format!("{}.com", "a".repeat(300)),
        ];
        for input in inputs {
            let hashed = HashedUrl::of(input.as_bytes()).unwrap();
            let canonical = canonicalize(input).unwrap();
            let expected: Vec<(String, FullHash)> = canonical
                .expressions()
                .map(|e| (e.as_str().to_owned(), e.full_hash()))
                .collect();
            let got: Vec<(String, FullHash)> = hashed.iter().map(|(e, h)| (e.to_owned(), *h)).collect();
            assert_eq!(got, expected, "{input}");
            assert_eq!(hashed.len(), expected.len());
            assert!(!hashed.is_empty());
            assert_eq!(hashed.expression(hashed.len()), None);
            let mut vec = Vec::new();
            crate::full_hashes(input, &mut vec).unwrap();
            assert_eq!(hashed.hashes(), vec.as_slice(), "{input}");
            // `set_then` sees every hash, in order, and sets the same.
            let mut seen = Vec::new();
            let mut then = HashedUrl::default();
            then.set_then(input.as_bytes(), |h| seen.push(*h)).unwrap();
            assert_eq!(seen, vec, "{input}");
            assert_eq!(then.hashes(), hashed.hashes(), "{input}");
        }
        assert!(HashedUrl::of(b"").is_err());
        assert!(HashedUrl::of(b"mailto:x@y").is_err());
        let mut calls = 0;
        assert!(
            HashedUrl::default()
                .set_then(b"mailto:x@y", |_| calls += 1)
                .is_err()
        );
        assert_eq!(calls, 0, "no hash, no call");
    }
}
