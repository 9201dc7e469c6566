//! The steps of the module docs taken one by one: the way through for
//! every input the common case does not take. Steps 1 to 6 are here; the
//! unescaping of step 4, the escaping of step 9 and the byte classes are in
//! `escape`, step 7 in `host`, step 8 in `path`.

use std::borrow::Cow;

use super::escape::{AUTHORITY_END, CLASS, HOST_PLAIN, PREPASS, Unescape, unescape_fully};
use super::host::{canonical_host, ipv4_or_domain};
use super::path::{push_path_and_query, resolved_as_browsers};
use super::url::{CanonError, CanonicalUrl, Layout, check_length};

/// [`canonicalize`](super::canonicalize) by the steps of the module docs, one
/// after the other. Every input goes this way unless
/// [`canonicalize_common`](super::common::canonicalize_common) takes it; the
/// two must agree on every input they both accept (checked by the property
/// tests and the fuzz target through [`crate::fuzzing`]).
pub(crate) fn canonicalize_by_steps(input: &[u8]) -> Result<CanonicalUrl, CanonError> {
    check_length(input)?;
    // 1. Remove tab, CR and LF; 2. trim C0 controls and space.
    let start = input.iter().position(|&b| b > 0x20).unwrap_or(input.len());
    let end = input.iter().rposition(|&b| b > 0x20).map_or(start, |i| i + 1);
    let trimmed = &input[start..end];
    // 3. Cut the fragment, noting on the way whether step 1 or 4 has work.
    let (fragment_start, needs_unescape) = scan_fragment(trimmed);
    let without_fragment = &trimmed[..fragment_start];
    if !needs_unescape {
        // The common case: nothing to unescape, so the raw delimiters are
        // the only ones.
        let (scheme, rest) = split_scheme(without_fragment)?.parts();
        return assemble(scheme, rest, Unescape::No);
    }
    // 4. Unescape, per component where the raw input shows its structure.
    let stripped = strip_tab_cr_lf(without_fragment);
    match split_scheme(&stripped) {
        Ok(split) if split.explicit => {
            let (scheme, rest) = split.parts();
            assemble(scheme, rest, Unescape::PerComponent)
        }
        Ok(_) => {
            // No scheme as written. If unescaping reveals one
            // ("http%3A%2F%2Fhost/"), the whole URL was escaped: read it
            // unescaped, as the v4 text does. Otherwise the input is
            // "host/path" and is read like "http://" + input.
            let unescaped = unescape_fully(&stripped);
            let split = split_scheme(&unescaped)?;
            if split.explicit {
                let (scheme, rest) = split.parts();
                assemble(scheme, rest, Unescape::No)
            } else {
                assemble(b"http", &stripped, Unescape::PerComponent)
            }
        }
        Err(_) => {
            // Not a URL as written ("mailto:", "/path", "host:80%2Fx"):
            // decide on the unescaped text, as the v4 text does.
            let unescaped = unescape_fully(&stripped);
            let (scheme, rest) = split_scheme(&unescaped)?.parts();
            assemble(scheme, rest, Unescape::No)
        }
    }
}

/// Steps 6 to 9: builds the canonical URL from the scheme and what follows
/// its `//`.
fn assemble(scheme: &[u8], rest: &[u8], unescape: Unescape) -> Result<CanonicalUrl, CanonError> {
    // 6. Authority, path, query: the authority ends at the first '/', ''
    // or '?', the path at the first '?' after it.
    let (authority_end, plain_host) = scan_authority(rest);
    let (authority, path_and_query) = rest.split_at(authority_end);
    // The path resolved as browsers resolve it, before it is unescaped.
    let resolved = resolved_as_browsers(path_and_query);
    let path_and_query = resolved.as_deref().unwrap_or(path_and_query);
    let path_and_query: Cow<'_, [u8]> = match unescape {
        Unescape::No => Cow::Borrowed(path_and_query),
        Unescape::PerComponent => Cow::Owned(unescape_fully(path_and_query)),
    };

    // Most URLs need no escaping: room for the parts plus a little.
    let mut out: Vec<u8> = Vec::with_capacity(scheme.len() + 3 + rest.len() + 8);
    out.extend(scheme.iter().map(u8::to_ascii_lowercase));
    let scheme_end = out.len();
    out.extend_from_slice(b"://");
    let host_start = out.len();
    let host_kind = if plain_host {
        // The common case: no userinfo, port, uppercase, stray dots or bytes
        // to escape (so no '%' either), so the host is the authority as it is.
        out.extend_from_slice(authority);
        ipv4_or_domain(host_start, &mut out)
    } else {
        canonical_host(authority, unescape, &mut out)?
    };
    let host_end = out.len();
    let path_end = push_path_and_query(&path_and_query, &mut out);
    // Every byte pushed above is ASCII (escape_into escapes the rest), so the
    // conversion cannot fail; the lossy fallback only avoids a panic path.
    let serialization =
        String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());

    let layout = Layout::scan(
        serialization.as_bytes(),
        host_start,
        host_end,
        path_end,
        host_kind,
    );
    Ok(CanonicalUrl {
        serialization,
        scheme_end,
        host_start,
        host_end,
        path_end,
        host_kind,
        layout,
    })
}

/// The scheme of a URL and what follows it, as [`split_scheme`] found them.
struct SchemeSplit<'a> {
    /// The scheme, not yet lowercased; `http` when the URL has none.
    scheme: &'a [u8],
    /// What follows the scheme and its slashes: authority, path and query.
    rest: &'a [u8],
    /// Whether the input marks where its authority starts: a scheme with
    /// its slashes (`http://`, `https:\\`), the browser forms `https:host`
    /// and `https:/host`, or a scheme-relative `//`. A bare `host/path` has
    /// no such mark.
    explicit: bool,
}

impl<'a> SchemeSplit<'a> {
    fn parts(&self) -> (&'a [u8], &'a [u8]) {
        (self.scheme, self.rest)
    }
}

/// Splits `raw` into its scheme and the rest after the slashes (step 5).
///
/// For `http` and `https` the slashes may be `/` or `\` in any mix, and
/// there may be none or one (`https:host`, `https:/\host`), as browsers
/// read them (WHATWG URL Standard, "special authority ignore slashes
/// state"). Three or more slashes leave an empty authority, so
/// `http:///host` is rejected as the Go and Python clients do (conformance
/// section G), where browsers would skip them.
fn split_scheme(raw: &[u8]) -> Result<SchemeSplit<'_>, CanonError> {
    let implicit = |rest| SchemeSplit {
        scheme: b"http",
        rest,
        explicit: false,
    };
    let Some(&first) = raw.first() else {
        return Err(CanonError::Empty);
    };
    if first == b'/' || first == b'\\' || first == b'?' {
        // "//host" (scheme-relative) has a host; "/path" and "?q" do not.
        if raw.starts_with(b"//") && !raw.starts_with(b"///") {
            return Ok(SchemeSplit {
                scheme: b"http",
                rest: &raw[2..],
                explicit: true,
            });
        }
        return Err(CanonError::RelativeUrl);
    }
    if first.is_ascii_alphabetic() {
        let len = raw
            .iter()
            .position(|&b| !(b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')))
            .unwrap_or(raw.len());
        if raw.get(len) == Some(&b':') {
            let scheme = &raw[..len];
            let after = &raw[len + 1..];
            if let Some(rest) = after.strip_prefix(b"//") {
                return Ok(SchemeSplit {
                    scheme,
                    rest,
                    explicit: true,
                });
            }
            let http = scheme.eq_ignore_ascii_case(b"http") || scheme.eq_ignore_ascii_case(b"https");
            // "host:port[/...]" is a host with a port, not a scheme, unless
            // the "host" is `http` or `https`: browsers read `http:16909060/`
            // as the scheme and the host 16909060 (1.2.3.4), never as the
            // host `http` on port 16909060.
            let digits = after.iter().take_while(|b| b.is_ascii_digit()).count();
            let port_ends = matches!(after.get(digits), None | Some(b'/' | b'\\' | b'?'));
            if digits > 0 && port_ends && !http {
                return Ok(implicit(raw));
            }
            if http {
                let slashes = after.iter().take_while(|&&b| b == b'/' || b == b'\\').count();
                // Two slashes are the authority's mark; with three or more the
                // authority is empty (rejected), and none or one is the
                // browsers' lenient form.
                let skip = if slashes >= 2 { 2 } else { slashes };
                return Ok(SchemeSplit {
                    scheme,
                    rest: &after[skip..],
                    explicit: true,
                });
            }
            return Err(CanonError::NotHierarchical);
        }
    } else if first == b':' {
        return Err(CanonError::EmptyHost);
    }
    Ok(implicit(raw))
}

/// Step 1 when the input has tab, CR or LF bytes: removes them.
fn strip_tab_cr_lf(url: &[u8]) -> Cow<'_, [u8]> {
    if url.iter().any(|&b| matches!(b, b'\t' | b'\r' | b'\n')) {
        Cow::Owned(
            url.iter()
                .copied()
                .filter(|&b| !matches!(b, b'\t' | b'\r' | b'\n'))
                .collect(),
        )
    } else {
        Cow::Borrowed(url)
    }
}

/// Finds the end of the authority (the first `/`, `\` or `?`) and whether
/// the authority is already a canonical domain host: non-empty, only
/// [`HOST_PLAIN`] bytes and dots, no leading, trailing or repeated dot.
fn scan_authority(rest: &[u8]) -> (usize, bool) {
    let mut plain = true;
    let mut after_dot = true;
    for (i, &b) in rest.iter().enumerate() {
        let class = CLASS[usize::from(b)];
        if class & AUTHORITY_END != 0 {
            return (i, plain && !after_dot);
        }
        if b == b'.' {
            plain &= !after_dot;
            after_dot = true;
        } else {
            plain &= class & HOST_PLAIN != 0;
            after_dot = false;
        }
    }
    (rest.len(), plain && !after_dot)
}

/// Finds the first `#` of `url` (its length when there is none) and whether
/// a `%`, tab, CR or LF comes before it. Eight bytes at a time while none of
/// `#`, `%` or a byte below 0x0e (which covers tab, LF and CR) is in sight,
/// then byte by byte: most URLs have neither a fragment nor an escape.
fn scan_fragment(url: &[u8]) -> (usize, bool) {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    // Whether some byte of `w` is below `n` (n <= 0x80): the "haszero"
    // family of Anderson's "Bit Twiddling Hacks".
    let has_below = |w: u64, n: u8| w.wrapping_sub(ONES * u64::from(n)) & !w & HIGHS != 0;
    let has_byte = |w: u64, b: u8| has_below(w ^ (ONES * u64::from(b)), 1);
    let mut start = 0;
    for chunk in url.chunks_exact(8) {
        let Ok(bytes) = <[u8; 8]>::try_from(chunk) else {
            break;
        };
        let w = u64::from_ne_bytes(bytes);
        if has_byte(w, b'#') || has_byte(w, b'%') || has_below(w, 0x0e) {
            break;
        }
        start += 8;
    }
    let mut needs_unescape = false;
    for (i, &b) in url.iter().enumerate().skip(start) {
        if CLASS[usize::from(b)] & PREPASS != 0 {
            if b == b'#' {
                return (i, needs_unescape);
            }
            needs_unescape = true;
        }
    }
    (url.len(), needs_unescape)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canon::tests::{assert_fixed_point, canon};
    use crate::{CanonError, canonicalize};

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

    /// An escaped delimiter in the authority must not move the host: browsers
    /// split the URL on the delimiters as written and only then unescape.
    /// Unescaping the whole URL first read this as host `www.wikipedia.org`.
    #[test]
    fn regression_escaped_slash_before_userinfo_does_not_hide_the_host() {
        assert_fixed_point(
            "https://www.wikipedia.org%2F@alibaba666.bet/",
            "https://alibaba666.bet/",
        );
        assert_fixed_point("www.wikipedia.org%2F@alibaba666.bet/x", "http://alibaba666.bet/x");
        assert_fixed_point("ht\ttp://a%2Fb@c.com/", "http://c.com/");
        assert_fixed_point("http://user%40x@evil.com/", "http://evil.com/");
        assert_fixed_point("http://good.com%3A80@evil.com/p", "http://evil.com/p");
        assert_fixed_point("//good.com%2F@evil.com/", "http://evil.com/");
        assert_fixed_point("http://%31%36%38.1.1.1/", "http://168.1.1.1/");
        assert_fixed_point("http://[%3A%3A1]/", "http://[::1]/");
        assert_fixed_point("http://ex%41mple.com/", "http://example.com/");
        // Path and query are still unescaped before they are split (v4).
        assert_fixed_point("http://a.com/x%2Fy", "http://a.com/x/y");
        assert_fixed_point("http://a.com/x%3Fy", "http://a.com/x?y");
        // A whole URL escaped as one string is still read unescaped.
        assert_fixed_point("http%3A%2F%2Fwackyurl.com:80/", "http://wackyurl.com/");
        assert_fixed_point("%2F%2Fa.com/x", "http://a.com/x");
    }

    /// http(s) URLs as browsers read them: backslashes for slashes, and none
    /// or one slash after the scheme (WHATWG "special authority ignore
    /// slashes state"). Three slashes stay invalid (conformance section G).
    #[test]
    fn browser_forms_of_http_schemes() {
        assert_fixed_point("https:\\\\evil.com\\x", "https://evil.com/x");
        assert_fixed_point("https:/\\evil.com/", "https://evil.com/");
        assert_fixed_point("https:\\/evil.com/", "https://evil.com/");
        assert_fixed_point("https:evil.com", "https://evil.com/");
        assert_fixed_point("HTTP:/evil.com/a", "http://evil.com/a");
        assert_fixed_point("https:evil.com%2F@good.com/", "https://good.com/");
        assert_eq!(canonicalize("http:///x"), Err(CanonError::EmptyHost));
        assert_eq!(canonicalize("http:\\\\\\x"), Err(CanonError::EmptyHost));
        assert_eq!(canonicalize("https:"), Err(CanonError::EmptyHost));
        // Other schemes still need "//", and "host:port" stays a host.
        assert_eq!(canonicalize("ftp:\\\\a.com/"), Err(CanonError::NotHierarchical));
        assert_eq!(canonicalize("mailto:a%40b.com"), Err(CanonError::NotHierarchical));
        assert_eq!(canon("localhost:8080/x"), "http://localhost/x");
    }

    /// `http:` or `https:` followed by digits is the scheme and a numeric
    /// host, as browsers read it (`new URL("http:16909060/x").href` is
    /// `http://1.2.3.4/x` in Chromium), not the host `http` with a port:
    /// a feed line written so listed `http/x`, which no visit checks.
    #[test]
    fn regression_http_colon_digits_is_a_scheme_and_a_numeric_host() {
        assert_fixed_point("http:16909060/x", "http://1.2.3.4/x");
        assert_fixed_point("HTTPS:017\\a?q", "https://0.0.0.15/a?q");
        assert_fixed_point("http:1", "http://0.0.0.1/");
        assert_fixed_point("http:80/%41", "http://0.0.0.80/A");
        // A host with a port still reads as one.
        assert_eq!(canon("httpx:8080/x"), "http://httpx/x");
        assert_eq!(canon("http.example:8080/x"), "http://http.example/x");
    }

    /// The word-at-a-time scan agrees with a plain byte loop for every
    /// special byte at every position across chunk boundaries.
    #[test]
    fn scan_fragment_matches_byte_loop() {
        let naive = |url: &[u8]| {
            let cut = url.iter().position(|&b| b == b'#').unwrap_or(url.len());
            let work = url[..cut]
                .iter()
                .any(|&b| matches!(b, b'%' | b'\t' | b'\r' | b'\n'));
            (cut, work)
        };
        for len in 0..26 {
            for at in 0..len {
                for special in [
                    b'#',
                    b'%',
                    b'\t',
                    b'\r',
                    b'\n',
                    0x00,
                    0x0d,
                    0x0e,
                    0x23 ^ 0x80,
                    0xff,
                ] {
                    let mut url = vec![b'a'; len];
                    url[at] = special;
                    assert_eq!(scan_fragment(&url), naive(&url), "{url:?}");
                    url[len - 1 - at / 2] = b'#';
                    assert_eq!(scan_fragment(&url), naive(&url), "{url:?}");
                }
            }
        }
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
