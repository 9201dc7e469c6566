//! The full hashes of a URL's expressions, listed first and hashed in one
//! loop, from a [`CanonicalUrl`] or straight from the URL as given.

use super::common::{Common, common_case};
use super::steps::canonicalize_by_steps;
use super::url::{CanonError, CanonicalUrl, Layout, MAX_EXPRESSIONS, MAX_URL_BYTES};

impl CanonicalUrl {
    /// Appends the full hash of every expression to `out`, in the order of
    /// [`expressions`](Self::expressions): the same values as
    /// [`Expression::full_hash`](super::Expression::full_hash) of each,
    /// computed in one loop over the expression strings once they are all
    /// listed. The hashes do not depend on each other, so the processor
    /// overlaps consecutive ones when nothing else runs between them; hashing
    /// while iterating costs about 7 % more per URL
    /// (`benches/canonicalize.rs`).
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
    let (spans, count) = expression_spans(url.len(), host_start, path_end, layout);
    let mut texts: [&[u8]; MAX_EXPRESSIONS] = [&[]; MAX_EXPRESSIONS];
    let mut listed = 0;
    for (slot, &(start, end)) in texts.iter_mut().zip(&spans[..count]) {
        if let Some(text) = url.get(start as usize..end as usize) {
            *slot = text;
            listed += 1;
        }
    }
    out.extend(texts[..listed].iter().map(|text| crate::FullHash::of(text)));
}

/// Where each expression of a canonical URL `url_len` bytes long starts
/// (its host suffix) and ends (its path prefix), in the order of
/// [`CanonicalUrl::expressions`], and how many there are. Every expression
/// is one contiguous slice of the URL from the host on: a host suffix runs
/// into the path that follows it.
pub(super) fn expression_spans(
    url_len: usize,
    host_start: usize,
    path_end: usize,
    layout: &Layout,
) -> ([(u32, u32); MAX_EXPRESSIONS], usize) {
    let mut starts = [host_start; 5];
    let suffixes = usize::from(layout.suffix_count);
    for (start, &suffix) in starts[1..].iter_mut().zip(&layout.suffixes[..suffixes]) {
        *start = suffix as usize;
    }
    let mut ends = [path_end; 6];
    let mut path_count = 1;
    if url_len > path_end + 1 {
        // A non-empty query: the most specific expression keeps it.
        ends[0] = url_len;
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
    let mut spans = [(0u32, 0u32); MAX_EXPRESSIONS];
    let mut slots = spans.iter_mut();
    let mut count = 0;
    for &start in &starts[..1 + suffixes] {
        for &end in &ends[..path_count] {
            // A layout outside the URL would drop an expression (a false
            // negative): the fuzz target and the tests run with this check.
            debug_assert!(
                start <= end && end <= url_len,
                "expression {start}..{end} outside the URL"
            );
            if let Some(slot) = slots.next() {
                // MAX_URL_BYTES fits in u32.
                *slot = (start as u32, end as u32);
                count += 1;
            }
        }
    }
    (spans, count)
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
/// As [`canonicalize`](super::canonicalize); `out` is left as it was.
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
