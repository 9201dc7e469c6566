//! Feed artifacts around a URL's scheme that browsers read past: a
//! doubled scheme, extra slashes, backslashes for slashes. Stripped before
//! a URL line is canonicalized, and for the text a reading shows
//! ([`Read::to_reading`](super::entry::Read::to_reading)).

/// Feed artifacts around an `http` or `https` scheme, which browsers read
/// past: a doubled scheme, `http://https://host/…` → `https://host/…`, and
/// more than two slashes, `http:///host/…` or `http:\\\host/…` → `host/…`
/// ([`strip_mixed_slashes`] when the first two are not `//`; the URL Standard's
/// "special authority ignore slashes" state skips any number of `/` and
/// `\`; the scheme does not change an expression). The Safe Browsing
/// canonicalizer refuses the latter (an empty host), as an agent should
/// for such a URL given to it: only a feed line is read past it.
pub(super) fn strip_scheme_artifacts(line: &[u8]) -> &[u8] {
    // Called for every URL line: one scheme compare for most lines.
    let Some(inner) = strip_http_scheme(line) else {
        return strip_defanged_scheme(line).unwrap_or_else(|| strip_mixed_slashes(line));
    };
    if strip_http_scheme(inner).is_some() {
        return inner;
    }
    // The last two slashes kept (`//user:pw@host/…` is read with its user
    // name, where `user:pw@…` would read `user` as a scheme).
    let scheme = line.len() - inner.len();
    match inner.iter().position(|&b| b != b'/' && b != b'\\') {
        Some(host) if host > 0 => match line.get(scheme + host - 2..) {
            Some(rest) if rest.starts_with(b"//") => rest,
            _ => past_userinfo(inner.get(host..).unwrap_or(inner)),
        },
        _ => line,
    }
}

/// `http:` or `https:` followed by three or more slashes written with a
/// `\` among the first two (`http:\\\host/…`, `http:/\/host/…`; with `//`
/// first, [`strip_scheme_artifacts`] reads them): `host/…`, as browsers
/// skip them. `line` itself for any other line (two slashes or fewer are
/// the canonicalizer's to read).
fn strip_mixed_slashes(line: &[u8]) -> &[u8] {
    let Some(after) = strip_prefix_ignore_case(line, b"http") else {
        return line;
    };
    let after = match after.split_first() {
        Some((b's' | b'S', rest)) => rest,
        _ => after,
    };
    let Some(after) = after.strip_prefix(b":") else {
        return line;
    };
    match after.iter().position(|&b| b != b'/' && b != b'\\') {
        // As above, the last two slashes kept when they are `//`.
        Some(host) if host >= 3 => match after.get(host - 2..) {
            Some(rest) if rest.starts_with(b"//") => rest,
            _ => past_userinfo(&after[host..]),
        },
        _ => line,
    }
}

/// A defanged `http` or `https` scheme (`hxxp:`, `hxxps:`, any case) not
/// followed by `//` (`hxxp:/host/…`, `hxxp:\\host/…`, `hxxps:host/…`):
/// `host/…`, as browsers read `http:/host/…` (the URL Standard's special
/// authority states skip any slashes, or none). Read as a scheme of its
/// own, the URL has no host and the line was refused.
fn strip_defanged_scheme(line: &[u8]) -> Option<&[u8]> {
    let after = strip_prefix_ignore_case(line, b"hxxp")?;
    let after = match after.split_first() {
        Some((b's' | b'S', rest)) => rest,
        _ => after,
    };
    let after = after.strip_prefix(b":")?;
    if after.starts_with(b"//") {
        return None;
    }
    let host = after
        .iter()
        .position(|&b| b != b'/' && b != b'\\')
        .unwrap_or(after.len());
    Some(past_userinfo(after.get(host..).unwrap_or_default()))
}

/// A URL's text from its authority on, past a user name and password
/// (`u:p@host/…` → `host/…`, after the authority's last `@`, as browsers
/// read the host): without a scheme or `//` before it, `u:` would read as
/// a scheme. The canonical form drops them anyway.
fn past_userinfo(rest: &[u8]) -> &[u8] {
    let end = rest
        .iter()
        .position(|&b| matches!(b, b'/' | b'\\' | b'?' | b'#'))
        .unwrap_or(rest.len());
    match memchr::memrchr(b'@', &rest[..end]) {
        Some(at) => &rest[at + 1..],
        None => rest,
    }
}

/// `s` after a leading `http://` or `https://`, compared ignoring ASCII
/// case.
fn strip_http_scheme(s: &[u8]) -> Option<&[u8]> {
    let rest = strip_prefix_ignore_case(s, b"http")?;
    let rest = match rest.split_first() {
        Some((b's' | b'S', after)) => after,
        _ => rest,
    };
    rest.strip_prefix(b"://")
}

/// `s` without `prefix`, compared ignoring ASCII case.
fn strip_prefix_ignore_case<'a>(s: &'a [u8], prefix: &[u8]) -> Option<&'a [u8]> {
    let (head, tail) = s.split_at_checked(prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then_some(tail)
}

/// The authority of URL text (past a scheme, `name:`, and any slashes or
/// backslashes after it, as browsers skip them), and whether anything
/// follows it (a path, query or fragment).
pub(super) fn authority(text: &[u8]) -> (&[u8], bool) {
    let scheme = text
        .iter()
        .position(|&b| !(b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')))
        .filter(|&at| at > 0 && text.get(at) == Some(&b':'))
        .map_or(0, |at| at + 1);
    let rest = text.get(scheme..).unwrap_or_default();
    let slashes = rest.iter().take_while(|&&b| b == b'/' || b == b'\\').count();
    let rest = rest.get(slashes..).unwrap_or_default();
    match rest.iter().position(|b| matches!(b, b'/' | b'\\' | b'?' | b'#')) {
        Some(end) => (rest.get(..end).unwrap_or_default(), true),
        None => (rest, false),
    }
}

#[cfg(test)]
mod tests {
    /// A defanged scheme with fewer than two slashes, or backslashes
    /// (`hxxp:/evil[.]example/login`), was refused as a URL with no host,
    /// where the URL refanged, `http:/evil.example/login`, is one browsers
    /// visit as `http://evil.example/login`.
    #[test]
    fn regression_a_defanged_scheme_without_two_slashes_is_read_as_http() {
        use crate::config::SourceFormat;
        use crate::sources::tests::exprs;
        for line in [
            &b"hxxp:/evil[.]example/login"[..],
            b"hxxps:evil[.]example/login",
            b"hXXp:\\\\evil[.]example\\login",
            b"hxxp:/evil.example/login",
        ] {
            assert_eq!(
                exprs(SourceFormat::Urls, line),
                Ok(vec!["evil.example/login".to_owned()]),
                "{}",
                line.escape_ascii()
            );
        }
    }

    #[test]
    fn a_doubled_scheme_and_extra_slashes_are_stripped_in_any_case_and_nothing_else() {
        use super::strip_scheme_artifacts as strip;
        let cases: [(&[u8], &[u8]); 22] = [
            (b"http:///a.example/p", b"//a.example/p"),
            (b"http:\\\\\\a.example/p", b"a.example/p"),
            (b"HTTPS:/\\/a.example/p", b"a.example/p"),
            (b"http:\\//u:p@a.example/p", b"//u:p@a.example/p"),
            (b"http:\\\\\\u:p@a.example/p", b"a.example/p"),
            (b"http://\\\\u:p@b@a.example/p?q@x", b"a.example/p?q@x"),
            (b"http:\\\\a.example/p", b"http:\\\\a.example/p"),
            (b"http:\\\\\\", b"http:\\\\\\"),
            (b"ftp:\\\\\\a.example/p", b"ftp:\\\\\\a.example/p"),
            (b"HTTPS:////a.example/p", b"//a.example/p"),
            (b"http://\\\\a.example/p", b"a.example/p"),
            (b"http:///", b"http:///"),
            (b"ftp:///a.example/p", b"ftp:///a.example/p"),
            (b"http://https://a.example/", b"https://a.example/"),
            (b"HTTPS://http://a.example/", b"http://a.example/"),
            (b"https://HtTpS://a.example/", b"HtTpS://a.example/"),
            (b"http://a.example/", b"http://a.example/"),
            (b"http://httpx://a.example/", b"http://httpx://a.example/"),
            (b"http://http:/a.example/", b"http://http:/a.example/"),
            (b"ftp://http://a.example/", b"ftp://http://a.example/"),
            (b"http:", b"http:"),
            (b"", b""),
        ];
        // A defanged scheme without `//` (`hxxp:/…`), which browsers read as
        // `http:/…` once refanged.
        for (line, stripped) in [
            (&b"hxxp:/a.example/p"[..], &b"a.example/p"[..]),
            (b"HXXPS:\\\\a.example/p", b"a.example/p"),
            (b"hxxps:a.example/p", b"a.example/p"),
            (b"hxxp:/u:p@a.example/p", b"a.example/p"),
            (b"hxxp://a.example/p", b"hxxp://a.example/p"),
            (b"hxxpx:/a.example/p", b"hxxpx:/a.example/p"),
        ] {
            assert_eq!(strip(line), stripped, "{}", String::from_utf8_lossy(line));
        }
        for (line, stripped) in cases {
            assert_eq!(strip(line), stripped, "{}", String::from_utf8_lossy(line));
        }
    }
}
