//! The common case: a URL read in one pass, 64 bytes at a time, with the
//! byte classes of `scan` (portable SIMD); see "Two ways through, one
//! result" in the module docs.

use super::escape::unescape_fully;
use super::host::{is_dotted_decimal, parse_ipv4, push_ipv4};
use super::path::{push_path_and_query, resolved_as_browsers};
use super::url::{CanonicalUrl, HostKind, Layout, MAX_URL_BYTES, first_slashes, last_dots};
use crate::scan;

/// [`common_case`] as a [`CanonicalUrl`].
pub(super) fn canonicalize_common(input: &[u8]) -> Option<CanonicalUrl> {
    into_url(input, common_case(input)?)
}

/// What [`common_case`] found in `input`, as a [`CanonicalUrl`]; `None`
/// only if the input is not UTF-8 where it was found canonical (it cannot
/// be: every byte there is printable ASCII).
pub(super) fn into_url(input: &[u8], common: Common) -> Option<CanonicalUrl> {
    match common {
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
pub(super) enum Common {
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
/// 8 and 9 exactly as in `steps::assemble`. Returns `None` for every other
/// input, which then goes through
/// [`canonicalize_by_steps`](super::canonicalize_by_steps).
///
/// When the input is canonical as written (but for the `http://` that a
/// URL without a scheme gets), nothing is copied: [`Common::AsWritten`]
/// says where its parts are, and [`full_hashes`](super::full_hashes) hashes
/// its expressions as slices of the input.
///
/// Most URLs in feeds and in traffic are of this kind; the steps taken one
/// by one cost about twice as much on them.
pub(super) fn common_case(input: &[u8]) -> Option<Common> {
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
        let resolved = resolved_as_browsers(path_and_query);
        let path_end = push_path_and_query(
            &unescape_fully(resolved.as_deref().unwrap_or(path_and_query)),
            &mut out,
        );
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

/// Whether [`full_hashes`](super::full_hashes) hashes `input`'s expressions as slices of it,
/// with no copy (for tests and benchmarks).
pub(crate) fn canonical_as_written(input: &[u8]) -> bool {
    input.len() <= MAX_URL_BYTES && matches!(common_case(input), Some(Common::AsWritten { .. }))
}

#[cfg(test)]
mod tests {
    use crate::canon::canonicalize_by_steps;
    use crate::canon::tests::canon;
    use crate::canonicalize;

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
}
