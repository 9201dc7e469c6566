//! What a URL entry stands for: its most specific expression (and that of
//! the line as written, for a URL written with `&amp;`).

use blocksieve_format::{CanonError, CanonicalForm, canonicalize, canonicalize_form};

use super::breadth::{is_host_wide, too_broad};
use super::entry::{Entry, Read, UrlEntry, most_specific};
use super::outcome::reason;
use super::visit::Visit;

/// A URL canonicalized, checked to have an expression and not to block too
/// much: borrowed from `line` when the line is canonical as written.
fn url_canonical(line: &[u8]) -> Result<CanonicalForm<'_>, &'static str> {
    let url = canonicalize_form(strip_doubled_scheme(line)).map_err(url_error)?;
    not_too_broad(url)
}

/// [`url_canonical`] of a line made here (`&amp;` decoded), owned.
fn url_canonical_owned(line: &[u8]) -> Result<CanonicalForm<'static>, &'static str> {
    let url = canonicalize(strip_doubled_scheme(line)).map_err(url_error)?;
    not_too_broad(CanonicalForm::Built(url))
}

fn not_too_broad(url: CanonicalForm<'_>) -> Result<CanonicalForm<'_>, &'static str> {
    // Forbidden host code points (URL Standard, "host parsing") that the
    // Safe Browsing canonicalization keeps: accepted, the entry would be
    // counted as read and match nothing, hiding a misconfigured source
    // from the parse-collapse gate.
    if memchr::memchr2(b'|', b'^', url.host()).is_some() {
        return Err(reason::ADBLOCK_SYNTAX_IN_HOST);
    }
    if let Some(reason) = too_broad(url.host(), url.host_kind(), is_host_wide(&url)) {
        return Err(reason);
    }
    // Every canonical URL has an expression (the host and path, at least
    // `/`), so none is rejected for lacking one.
    Ok(url)
}

/// Whether `line` contains `&amp;`. Most lines have no `&` at all, which
/// `memchr` finds (vectorized, where `<[u8]>::contains` reads a word at a
/// time); a window compare at every byte cost a quarter of canonicalizing
/// a URL (callgrind, BENCHMARKS.md row 3). A line with one compares at
/// each `&` only: `memmem::find` built a searcher per line, about 1 % of
/// the parse of the 854k feed, most of whose query strings have an `&`.
fn contains_amp_entity(line: &[u8]) -> bool {
    memchr::memchr_iter(b'&', line).any(|at| line.get(at..).is_some_and(|rest| rest.starts_with(b"&amp;")))
}

pub(super) fn url_entry(line: &[u8]) -> Result<UrlEntry<'_>, &'static str> {
    let written = url_canonical(line)?;
    if !contains_amp_entity(line) {
        return Ok(UrlEntry {
            first: written,
            others: Vec::new(),
        });
    }
    // Decoded a level at a time: a line escaped twice (`&amp;amp;`, as
    // some feeds write a URL taken from HTML) stands for the URL with `&`,
    // and each level between may be the one a page's link held. At most
    // `MAX_AMP_LEVELS` levels, then the whole decoding at once: a hostile
    // line of 100,000 nested entities costs a dozen readings, not 100,000.
    let deepest = deepest_amp_run(line);
    let levels = (1..=deepest.min(MAX_AMP_LEVELS)).chain((deepest > MAX_AMP_LEVELS).then_some(deepest));
    let mut readings: Vec<CanonicalForm<'static>> = Vec::new();
    for level in levels {
        let decoded = url_canonical_owned(&decode_amp_levels(line, level))?;
        let seen = std::iter::once(&written)
            .chain(&readings)
            .any(|r| r.most_specific_expression() == decoded.most_specific_expression());
        if !seen {
            readings.push(decoded);
        }
    }
    // The most decoded reading first (the URL a browser visits), then the
    // levels between, then the line as written.
    let Some(first) = readings.pop() else {
        return Ok(UrlEntry {
            first: written,
            others: Vec::new(),
        });
    };
    readings.reverse();
    let mut others: Vec<CanonicalForm<'_>> = readings;
    others.push(written);
    Ok(UrlEntry { first, others })
}

/// The expression a URL entry stands for: its most specific expression.
/// `line` is the URL itself: no line cleaning is done (see [`read_line`](super::read_line)).
///
/// # Errors
///
/// The reason, one of [`reason`], when the line is not a URL with a host
/// or would block too much.
pub fn url_expression(line: &[u8]) -> Result<String, String> {
    let url = url_canonical(line)?;
    Ok(most_specific(&url))
}

/// The expressions a URL line stands for: [`url_expression`] of the line as
/// written and, when it contains `&amp;`, also of the line with `&amp;`
/// decoded to `&` (the URL a browser actually visits), and of each level
/// between for a line escaped more than once (`&amp;amp;`; the first 12
/// levels, past which only the whole decoding). Listing them keeps the
/// entry as written matching, so nothing the feed names is missed.
///
/// # Errors
///
/// The reason, one of [`reason`], when the line as written is not a URL or
/// would block too much.
pub fn url_expressions(line: &[u8]) -> Result<Vec<String>, String> {
    Ok(url_entry(line)?.to_strings())
}

/// The reason for a URL entry that does not canonicalize.
fn url_error(e: CanonError) -> &'static str {
    match e {
        CanonError::Empty => reason::EMPTY_URL,
        CanonError::TooLong { .. } => reason::TOO_LONG,
        CanonError::NotHierarchical => reason::NOT_HIERARCHICAL,
        CanonError::RelativeUrl => reason::RELATIVE_URL,
        CanonError::EmptyHost => reason::EMPTY_HOST,
        CanonError::InvalidIpv6 => reason::INVALID_IPV6,
        CanonError::DelimiterInHost { .. } => reason::DELIMITER_IN_HOST,
        _ => reason::NOT_A_URL,
    }
}

/// The levels of `&amp;` escaping decoded one by one, then all at once
/// past this many (the shared URL feeds nest up to 9).
pub const MAX_AMP_LEVELS: usize = 12;

/// The most `amp;` that follow one `&` in `line`: how many times `&amp;`
/// must be decoded to `&` for none to be left.
fn deepest_amp_run(line: &[u8]) -> usize {
    memchr::memchr_iter(b'&', line)
        .map(|at| amp_run(line.get(at + 1..).unwrap_or_default()))
        .max()
        .unwrap_or(0)
}

/// How many `amp;` start `rest`.
fn amp_run(rest: &[u8]) -> usize {
    rest.chunks(4).take_while(|c| *c == b"amp;").count()
}

/// `line` with `&amp;` decoded to `&` `level` times over, in one pass: a
/// `&` followed by `m` × `amp;` keeps `m - level` of them (none past `m`),
/// as `level` passes of replacing every `&amp;` with `&` would leave it.
fn decode_amp_levels(line: &[u8], level: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = memchr::memchr(b'&', rest) {
        let (head, tail) = rest.split_at(at + 1);
        out.extend_from_slice(head);
        let run = amp_run(tail);
        let kept = run.saturating_sub(level);
        for _ in 0..kept {
            out.extend_from_slice(b"amp;");
        }
        rest = tail.get(4 * run..).unwrap_or_default();
    }
    out.extend_from_slice(rest);
    out
}

/// `http://https://host/…` → `https://host/…` (a feed artifact).
pub(super) fn strip_doubled_scheme(line: &[u8]) -> &[u8] {
    // Called for every URL line: one scheme compare for most lines.
    match strip_http_scheme(line) {
        Some(inner) if strip_http_scheme(inner).is_some() => inner,
        _ => line,
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

/// A URL entry with one reading.
pub(super) fn read_url(text: &[u8], v: &mut impl Visit) {
    match v.canonicalizing(|| url_entry(text)) {
        Ok(entry) => v.accepted(&[url_read(text, entry)]),
        Err(reason) => v.rejected(text, reason),
    }
}

/// The reading of URL `text`: the text the build reads is the URL after a
/// doubled scheme is removed.
pub(super) fn url_read<'a>(text: &'a [u8], entry: UrlEntry<'a>) -> Read<'a> {
    Read {
        text: strip_doubled_scheme(text),
        entry: Entry::Url(entry),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::SourceFormat;
    use crate::sources::reason;
    use crate::sources::tests::{collect, hashes, read_one};

    #[test]
    fn an_amp_entity_is_found_at_any_ampersand_and_only_whole() {
        use super::contains_amp_entity as amp;
        for yes in [
            &b"a?b=1&amp;c=2"[..],
            b"&amp;",
            b"a&&amp;",
            b"a&b&amp;",
            b"&amp;amp;",
        ] {
            assert!(amp(yes), "{}", String::from_utf8_lossy(yes));
        }
        for no in [
            &b"a?b=1&c=2"[..],
            b"",
            b"&",
            b"&am",
            b"a&amp",
            b"&AMP;",
            b"amp;",
            b"& amp;",
        ] {
            assert!(!amp(no), "{}", String::from_utf8_lossy(no));
        }
    }

    #[test]
    fn a_doubled_scheme_is_stripped_in_any_case_and_nothing_else() {
        use super::strip_doubled_scheme as strip;
        let cases: [(&[u8], &[u8]); 9] = [
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
        for (line, stripped) in cases {
            assert_eq!(strip(line), stripped, "{}", String::from_utf8_lossy(line));
        }
    }

    #[test]
    fn url_lines_keep_path_and_query() {
        let text = b"http://a.example/x/y?q=1\nhttps://b.example\nmailto:x@y\n/relative/path\n";
        let (out, report) = collect(text, SourceFormat::Urls);
        assert_eq!(out, hashes(&["a.example/x/y?q=1", "b.example/"]));
        assert_eq!(report.rejected[reason::NOT_HIERARCHICAL], 1);
        assert_eq!(report.rejected[reason::RELATIVE_URL], 1);
        assert_eq!(report.samples.len(), 2);
    }

    #[test]
    fn url_quirks() {
        let text = b"http://a.example/p?x=1&amp;y=2\nhttp://https://inner.example/login\r\n  http://b.example/trailing  \n\xEF\xBB\xBFhttp://c.example/\nhttp://d.example/\xff\xfe\n";
        let (out, report) = collect(text, SourceFormat::Urls);
        assert_eq!(
            out,
            hashes(&[
                "a.example/p?x=1&y=2",
                "a.example/p?x=1&amp;y=2",
                "inner.example/login",
                "b.example/trailing",
                "c.example/",
                "d.example/%FF%FE"
            ])
        );
        assert_eq!(report.rejected_total(), 0);
        assert!(report.cleaned.is_empty(), "{:?}", report.cleaned);
        // The entry text of a doubled scheme is the inner URL the build reads.
        let readings = read_one(SourceFormat::Urls, b"http://https://inner.example/login").unwrap();
        assert_eq!(readings[0].text, b"https://inner.example/login");
    }

    /// Adblock syntax read as URLs: `|` and `^` in a host are forbidden by
    /// the URL Standard, so no browser visits such a URL. Accepted, each
    /// line was counted as read and matched nothing; in a path or query
    /// they are ordinary bytes.
    #[test]
    fn a_host_with_adblock_syntax_is_rejected_for_that_reason() {
        for line in [
            &b"||evil.example^"[..],
            b"||files.example/a/b^$all",
            b"http://a|b.example/",
            b"evil.example^",
        ] {
            assert_eq!(
                read_one(SourceFormat::Urls, line),
                Err(reason::ADBLOCK_SYNTAX_IN_HOST),
                "{}",
                line.escape_ascii()
            );
        }
        let readings = read_one(SourceFormat::Urls, b"http://evil.example/p|q^?x=|^").unwrap();
        assert_eq!(readings[0].expressions, ["evil.example/p|q^?x=|^"]);
        // The same lines in their own format are read as rules.
        let readings = read_one(SourceFormat::AdblockHosts, b"||evil.example^").unwrap();
        assert_eq!(readings[0].expressions, ["evil.example/"]);
    }

    /// Decoding levels at once gives what decoding one level at a time
    /// gives, and a line nested 100,000 deep costs a few readings.
    #[test]
    fn amp_levels_decode_like_repeated_replacement_and_stay_bounded() {
        use super::{MAX_AMP_LEVELS, decode_amp_levels, deepest_amp_run};
        fn replace_once(s: &[u8]) -> Vec<u8> {
            let text = String::from_utf8(s.to_vec()).unwrap();
            text.replace("&amp;", "&").into_bytes()
        }
        for line in [
            &b"a?x=1&amp;amp;amp;y=2&amp;z&&amp&amp;amp"[..],
            b"&amp;&amp;amp;amp;amp;",
            b"no entity & here",
            b"&&amp;amp;&",
        ] {
            let mut expected = line.to_vec();
            for level in 0..6 {
                assert_eq!(
                    decode_amp_levels(line, level),
                    expected,
                    "{} {level}",
                    line.escape_ascii()
                );
                expected = replace_once(&expected);
            }
        }
        assert_eq!(deepest_amp_run(b"a&amp;b&amp;amp;amp;c&"), 3);
        let mut hostile = b"http://a.example/?x=&".to_vec();
        for _ in 0..100_000 {
            hostile.extend_from_slice(b"amp;");
        }
        hostile.extend_from_slice(b"y=2");
        let readings = read_one(SourceFormat::Urls, &hostile).unwrap();
        assert_eq!(readings[0].expressions.len(), MAX_AMP_LEVELS + 2);
        assert_eq!(readings[0].expressions[0], "a.example/?x=&y=2");
    }

    /// A URL taken from HTML twice over (464 distinct lines of the shared
    /// URL feeds, nested up to 9 deep): the URL a browser visits has `&`,
    /// and each level between may be the one a page's link held.
    #[test]
    fn an_amp_entity_escaped_again_is_decoded_at_every_level() {
        let readings = read_one(SourceFormat::Urls, b"http://a.example/p?x=1&amp;amp;amp;y=2").unwrap();
        assert_eq!(
            readings[0].expressions,
            [
                "a.example/p?x=1&y=2",
                "a.example/p?x=1&amp;y=2",
                "a.example/p?x=1&amp;amp;y=2",
                "a.example/p?x=1&amp;amp;amp;y=2",
            ]
        );
        // Levels that read the same are listed once; the line as written last.
        let readings = read_one(SourceFormat::Urls, b"http://b.example/p#f&amp;amp;g").unwrap();
        assert_eq!(readings[0].expressions, ["b.example/p"]);
        let (out, report) = collect(b"http://c.example/?a&amp;amp;b\n", SourceFormat::Urls);
        assert_eq!(
            out,
            hashes(&["c.example/?a&b", "c.example/?a&amp;b", "c.example/?a&amp;amp;b"])
        );
        assert_eq!(report.rejected_total(), 0);
    }
}
