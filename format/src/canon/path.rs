//! Step 8: the canonical path (separators, dot segments, empty segments),
//! and the escaped query after it.

use super::escape::{CLASS, ESCAPE, QUERY, SEPARATOR, escape_into, needs_escape};

/// Steps 8 and 9 for what follows the authority (already unescaped):
/// appends the canonical path and, when there is a query, `?` and the
/// escaped query. Returns where the path ends in `out`.
pub(super) fn push_path_and_query(path_and_query: &[u8], out: &mut Vec<u8>) -> usize {
    let query_start = canonical_path(path_and_query, out);
    let path_end = out.len();
    if let Some(i) = query_start {
        out.push(b'?');
        escape_into(&path_and_query[i + 1..], out);
    }
    path_end
}

/// The path of `path_and_query` (up to its first `?`) resolved as browsers
/// resolve it before anything is unescaped, followed by the query as it is;
/// `None` when the path holds neither `\` nor a dot segment, so there is
/// nothing to resolve.
///
/// A browser parses a URL before the Safe Browsing client sees it (WHATWG
/// URL Standard, "path state" of a special URL): `\` is a `/`, and a
/// segment `.` or `..` — also written `%2e`, in either case — is resolved
/// while every other escape is still as written; `..` removes the segment
/// before it even when that one is empty (`a//../b` is `a/b`). Step 8
/// resolves the unescaped path, where `..` after `//` removes the segment
/// before the empty one and an escaped `/` or `?` has become a delimiter:
/// `a//../b`, `a%2Fb/../c` and `a%3Fb/../c` would canonicalize to `/b`,
/// `/a/c` and a query `b/../c`, while a browser that visits them holds
/// `/a/b`, `/c` and `/c`. Resolving as browsers do first makes a URL
/// canonicalize as the browser's own form of it does: a listed URL written
/// either way is one entry. Tab, CR and LF are removed first, as step 1
/// does (and browsers do).
pub(super) fn resolved_as_browsers(path_and_query: &[u8]) -> Option<Vec<u8>> {
    let end = path_and_query
        .iter()
        .position(|&b| b == b'?')
        .unwrap_or(path_and_query.len());
    let stripped: Vec<u8>;
    let path = if path_and_query[..end]
        .iter()
        .any(|b| matches!(b, b'\t' | b'\r' | b'\n'))
    {
        stripped = (path_and_query[..end].iter().copied())
            .filter(|b| !matches!(b, b'\t' | b'\r' | b'\n'))
            .collect();
        &stripped[..]
    } else {
        &path_and_query[..end]
    };
    let separator = |b: &u8| *b == b'/' || *b == b'\\';
    if !path.contains(&b'\\') && !path.split(separator).any(|s| dot_segment(s).is_some()) {
        return None;
    }
    // The path starts with its separator (the authority ends at one).
    let body = path
        .strip_prefix(b"/")
        .or_else(|| path.strip_prefix(b"\\"))
        .unwrap_or(path);
    let mut segments: Vec<&[u8]> = Vec::new();
    let count = body.split(separator).count();
    for (i, segment) in body.split(separator).enumerate() {
        let last = i + 1 == count;
        match dot_segment(segment) {
            Some(Dots::Two) => {
                segments.pop();
                if last {
                    segments.push(b"");
                }
            }
            Some(Dots::One) => {
                if last {
                    segments.push(b"");
                }
            }
            None => segments.push(segment),
        }
    }
    let mut out = Vec::with_capacity(path_and_query.len());
    for segment in &segments {
        out.push(b'/');
        out.extend_from_slice(segment);
    }
    if segments.is_empty() {
        out.push(b'/');
    }
    out.extend_from_slice(&path_and_query[end..]);
    Some(out)
}

/// A dot segment as the WHATWG URL Standard reads one.
enum Dots {
    /// `.` or `%2e`.
    One,
    /// `..`, `.%2e`, `%2e.` or `%2e%2e`.
    Two,
}

fn dot_segment(segment: &[u8]) -> Option<Dots> {
    let dot = |s: &[u8]| s == b"." || s.eq_ignore_ascii_case(b"%2e");
    match segment.len() {
        1 | 3 if dot(segment) => Some(Dots::One),
        2 | 4 | 6 if (1..segment.len()).any(|i| dot(&segment[..i]) && dot(&segment[i..])) => Some(Dots::Two),
        _ => None,
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
    use crate::canon::tests::canon;

    #[test]
    fn path_dot_segments_without_a_segment_list() {
        assert_eq!(canon("http://a/.."), "http://a/");
        assert_eq!(canon("http://a/../../x/./y/.."), "http://a/x/");
        assert_eq!(canon("http://a/x/y/../../z"), "http://a/z");
        assert_eq!(canon("http://a/x%2F..%2Fy"), "http://a/y");
        assert_eq!(canon("http://a/x\\..\\y\\"), "http://a/y/");
    }

    /// A path as written is resolved as browsers resolve it before it is
    /// unescaped: what each canonicalizes to is what the browser's own form
    /// of it (Chromium's `new URL(…).href`, second column) canonicalizes to.
    /// Crafted from real feed lines; each was a different entry before.
    #[test]
    fn paths_resolve_as_browsers_resolve_them_before_unescaping() {
        for (written, browser, canonical) in [
            // `..` after `//` removes the empty segment.
            (
                "http://a.example/cef/gov//../acesso.php",
                "http://a.example/cef/gov/acesso.php",
                "http://a.example/cef/gov/acesso.php",
            ),
            (
                "http://a.example/x//.%2e/y",
                "http://a.example/x/y",
                "http://a.example/x/y",
            ),
            (
                "http://a.example/x///../y",
                "http://a.example/x//y",
                "http://a.example/x/y",
            ),
            // An escaped '/' or '?' is no separator while the dots resolve.
            (
                "http://a.example/hola/supp%2F1a0/../70",
                "http://a.example/hola/70",
                "http://a.example/hola/70",
            ),
            (
                "http://a.example/l/p.php%3Fdi/.%2e/s=1",
                "http://a.example/l/s=1",
                "http://a.example/l/s=1",
            ),
            // '\' is a '/' before an escaped '?' makes a query of the rest.
            (
                "http://a.example/%253fp\\1K/v.html",
                "http://a.example/%253fp/1K/v.html",
                "http://a.example/?p/1K/v.html",
            ),
            // Dot segments written escaped, in either case, and across a tab.
            (
                "http://a.example/a/%2E%2e/b",
                "http://a.example/b",
                "http://a.example/b",
            ),
            (
                "http://a.example/a/.\t./b",
                "http://a.example/b",
                "http://a.example/b",
            ),
            (
                "http://a.example/a/b/%2e",
                "http://a.example/a/b/",
                "http://a.example/a/b/",
            ),
            (
                "http://a.example/a/b/..?q=/../",
                "http://a.example/a/?q=/../",
                "http://a.example/a/?q=/../",
            ),
            // Unchanged: what unescaping reveals still resolves after it.
            (
                "http://a.example/a/%252e%252e/b",
                "http://a.example/a/%252e%252e/b",
                "http://a.example/b",
            ),
            (
                "http://a.example/x%2F..%2Fy",
                "http://a.example/x%2F..%2Fy",
                "http://a.example/y",
            ),
        ] {
            assert_eq!(canon(written), canonical, "{written}");
            assert_eq!(canon(browser), canonical, "{browser}");
            assert_eq!(canon(canonical), canonical, "{canonical}");
        }
        assert_eq!(resolved_as_browsers(b"/a/b.c/.d/..e?/../"), None);
        assert_eq!(resolved_as_browsers(b"/a/../b?q").as_deref(), Some(&b"/b?q"[..]));
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
}
