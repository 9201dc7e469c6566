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
