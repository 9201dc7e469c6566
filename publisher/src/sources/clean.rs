//! Steps 1 to 3 of reading a line, for every line format: a byte-order
//! mark and white space trimmed, comments skipped, quotes removed (a
//! `urls` line goes on in `urls`).

use crate::config::SourceFormat;

use super::outcome::cleaned;
use super::white::{first_char, is_unicode_white, last_char, unquote};

/// What cleaning did to a line (bits of [`CLEANED_KINDS`]).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Cuts(pub(super) u8);

/// Each [`Cuts`] bit and the [`cleaned`] kind it counts as.
const CLEANED_KINDS: [(u8, &str); 7] = [
    (Cuts::UNICODE, cleaned::UNICODE_WHITE_SPACE),
    (Cuts::QUOTES, cleaned::QUOTES),
    (Cuts::COLUMN, cleaned::COLUMN),
    (Cuts::COMMENT, cleaned::COMMENT),
    (Cuts::SPACE, cleaned::SPACE),
    (Cuts::SPACE_IN_HOST, cleaned::SPACE_IN_HOST),
    (Cuts::WRAPPER, cleaned::WRAPPER),
];

impl Cuts {
    pub(super) const UNICODE: u8 = 1;
    pub(super) const QUOTES: u8 = 2;
    pub(super) const COLUMN: u8 = 4;
    pub(super) const COMMENT: u8 = 8;
    pub(super) const SPACE: u8 = 16;
    pub(super) const SPACE_IN_HOST: u8 = 32;
    pub(super) const WRAPPER: u8 = 64;

    pub(super) fn kinds(self) -> impl Iterator<Item = &'static str> {
        CLEANED_KINDS
            .into_iter()
            .filter(move |(bit, _)| self.0 & bit != 0)
            .map(|(_, kind)| kind)
    }
}

/// A line ready to read: its entry text and what cleaning did.
pub(super) struct Cleaned<'a> {
    /// The entry text (for `urls`, the first reading).
    pub(super) text: &'a [u8],
    /// `urls`: the further readings of the line — the URL field as written
    /// when a space is inside it, further URLs on the line (steps 4 and 5
    /// of the module docs). Empty for almost every line.
    pub(super) more: Vec<&'a [u8]>,
    pub(super) cuts: Cuts,
    /// Why the line is rejected before any reading (`urls`: a URL that
    /// cannot be told apart from the columns after it).
    pub(super) refused: Option<&'static str>,
}

/// Whether `format` is read line by line (else a CSV value or JSON string).
fn is_line_format(format: SourceFormat) -> bool {
    !matches!(format, SourceFormat::Csv | SourceFormat::Json)
}

/// Steps 1 and 2 of the module docs: the line without a byte-order mark
/// and trimmed; `None` for a blank line or a comment.
pub(super) fn trim_line(format: SourceFormat, raw: &[u8]) -> Option<(&[u8], Cuts)> {
    let mut cuts = Cuts::default();
    let line = raw.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(raw);
    let text = trim_white(line, &mut cuts);
    let first = *text.first()?;
    // `!` starts an adblock comment, which URL lists derived from adblock
    // lists keep (urlhaus-filter: `! Homepage: https://…`); no URL starts
    // with it.
    let bang_comment = matches!(format, SourceFormat::AdblockHosts | SourceFormat::Urls);
    if is_line_format(format) && (first == b'#' || (bang_comment && first == b'!')) {
        return None;
    }
    if bang_comment && is_adblock_header(text) {
        return None;
    }
    Some((text, cuts))
}

/// A filter list's header line, `[Adblock Plus 2.0]`, `[Adblock]` or
/// `[uBlock Origin]` (Adblock Plus's filter syntax: the first line names
/// the syntax), in adblock lists and the URL lists made from them: a
/// comment, where it would be refused as not a host name. Only those
/// names, with no `:` or `/`: a bracketed URL or IPv6 host
/// (`[ http://evil.example/x ]`, `[2001:db8::1]`) is an entry.
fn is_adblock_header(text: &[u8]) -> bool {
    let Some(inner) = text.strip_prefix(b"[").and_then(|t| t.strip_suffix(b"]")) else {
        return false;
    };
    let starts = |name: &[u8]| {
        inner
            .get(..name.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(name))
    };
    (starts(b"adblock") || starts(b"ublock")) && !inner.iter().any(|&b| b == b':' || b == b'/')
}

/// Steps 3 and 4 of the module docs for a trimmed line of any format but
/// `urls` (read on by [`clean_url_line`](super::urls::clean_url_line)), or
/// a CSV value or JSON string; `None` for a line with no entry.
pub(super) fn clean_entry(format: SourceFormat, mut text: &[u8], mut cuts: Cuts) -> Option<Cleaned<'_>> {
    // Most lines hold no `#` and no quote: nothing below can change them.
    if let Some(inner) = unquote(text) {
        text = trim_white(inner, &mut cuts);
        cuts.0 |= Cuts::QUOTES;
    } else if format == SourceFormat::Csv
        && let Some(inner) = after_lone_quote(text)
    {
        text = inner;
        cuts.0 |= Cuts::WRAPPER;
    } else if matches!(
        format,
        SourceFormat::Hosts | SourceFormat::Domains | SourceFormat::Sha256
    ) && let Some(before) = before_first(text, b'#')
    {
        text = trim_white(before, &mut cuts);
        cuts.0 |= Cuts::COMMENT;
        if let Some(inner) = unquote(text) {
            text = trim_white(inner, &mut cuts);
            cuts.0 |= Cuts::QUOTES;
        }
    }
    if text.is_empty() {
        return None;
    }
    Some(Cleaned {
        text,
        more: Vec::new(),
        cuts,
        refused: None,
    })
}

/// A CSV value's URL after a lone opening quote that nothing closes
/// (`"http://evil.example/a`, a quote the CSV reader took as the value's
/// own when white space came before it, or left by a hand-made export), as
/// the `urls` format reads such a line: kept, it would be the URL's host
/// (`"http`), listing a page no browser visits.
fn after_lone_quote(text: &[u8]) -> Option<&[u8]> {
    let (&quote, inner) = text.split_first()?;
    (matches!(quote, b'"' | b'\'') && !inner.contains(&quote) && super::url_entry::has_scheme(inner))
        .then_some(inner)
}

/// `bytes` without ASCII and Unicode white space at either end; sets
/// [`Cuts::UNICODE`] when Unicode white space was removed.
fn trim_white<'a>(mut bytes: &'a [u8], cuts: &mut Cuts) -> &'a [u8] {
    loop {
        bytes = trim_controls_start(bytes);
        match first_char(bytes) {
            Some((c, len)) if is_unicode_white(c) => {
                bytes = bytes.get(len..).unwrap_or_default();
                cuts.0 |= Cuts::UNICODE;
            }
            _ => break,
        }
    }
    loop {
        bytes = trim_controls_end(bytes);
        match last_char(bytes) {
            Some((c, len)) if is_unicode_white(c) => {
                bytes = bytes.get(..bytes.len() - len).unwrap_or_default();
                cuts.0 |= Cuts::UNICODE;
            }
            _ => break,
        }
    }
    bytes
}

/// `bytes` without the C0 controls and spaces at its start: what the URL
/// Standard's basic URL parser trims first (step 1), and the agent's
/// [`trim_url_text`](blocksieve_format::trim_url_text) with it
/// (ASCII white space is among them).
fn trim_controls_start(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|&b| b > b' ').unwrap_or(bytes.len());
    &bytes[start..]
}

/// [`trim_controls_start`] at the end.
fn trim_controls_end(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().rposition(|&b| b > b' ').map_or(0, |i| i + 1);
    &bytes[..end]
}

/// The bytes of `text` before its first `byte`, if it holds one. Most
/// lines hold none, which `contains` finds with a word-at-a-time scan.
fn before_first(text: &[u8], byte: u8) -> Option<&[u8]> {
    if !text.contains(&byte) {
        return None;
    }
    text.split(|&b| b == byte).next()
}

#[cfg(test)]
mod tests {
    use crate::config::SourceFormat;
    use crate::sources::tests::{collect, exprs, read_one};
    use crate::sources::{cleaned, read_line, reason};

    /// A C0 control at a line's ends (`\x01http://…`, a stray byte of a
    /// feed's export) is trimmed, as the URL Standard's parser and the
    /// agent trim it: the line was refused as text joined before the
    /// scheme, and the page a browser visits answered safe.
    #[test]
    fn regression_c0_controls_are_trimmed_from_feed_lines() {
        for line in [
            &b"\x01http://evil.example/a"[..],
            b"\x00\x1fhttp://evil.example/a\x02",
            b"\x0b http://evil.example/a \x1b",
        ] {
            assert_eq!(
                exprs(SourceFormat::Urls, line),
                Ok(vec!["evil.example/a".to_owned()]),
                "{line:?}"
            );
        }
        assert_eq!(
            exprs(SourceFormat::Hosts, b"\x010.0.0.0 evil.example\x01"),
            Ok(vec!["evil.example/".to_owned()])
        );
        assert_eq!(
            exprs(SourceFormat::Domains, b"\x1fevil.example"),
            Ok(vec!["evil.example/".to_owned()])
        );
        // DEL is no C0 control: browsers keep it (escaped), as the agent does.
        assert!(exprs(SourceFormat::Urls, b"\x7fhttp://evil.example/a").is_err());
    }

    // Real lines of the union feed end in U+00A0 or U+FEFF.
    #[test]
    fn unicode_white_space_is_trimmed_from_feed_lines() {
        for (line, expression) in [
            ("http://ulvis.net/IFHc\u{a0}", "ulvis.net/IFHc"),
            ("https://clck.ru/NdB3a\u{a0}", "clck.ru/NdB3a"),
            ("https://clck.ru/PR3CL?/w/seed/\u{a0}", "clck.ru/PR3CL?/w/seed/"),
            ("https://j.mp/2Ru15Ss\u{a0}", "j.mp/2Ru15Ss"),
            (
                "https://ginexis.blogspot.com/?23sk\u{feff}",
                "ginexis.blogspot.com/?23sk",
            ),
            (
                "\u{3000}\u{2003}http://lead.example/x\u{202f}\u{205f}\u{200a} ",
                "lead.example/x",
            ),
            // Bidirectional marks, left by copying from a right-to-left page
            // (a leading one made the line no URL, a trailing one was
            // escaped into it).
            ("\u{200e}http://rtl.example/x", "rtl.example/x"),
            ("http://rtl.example/x\u{200f}", "rtl.example/x"),
            ("\u{2067}http://rtl.example/x\u{2069}\u{202c}", "rtl.example/x"),
        ] {
            let out = read_line(SourceFormat::Urls, line.as_bytes());
            assert_eq!(out.cleaned, [cleaned::UNICODE_WHITE_SPACE], "{line:?}");
            assert_eq!(
                exprs(SourceFormat::Urls, line.as_bytes()),
                Ok(vec![expression.to_owned()])
            );
        }
        // Every line format, and JSON strings.
        assert_eq!(
            exprs(SourceFormat::Hosts, "0.0.0.0 evil.example\u{a0}".as_bytes()),
            Ok(vec!["evil.example/".to_owned()])
        );
        assert_eq!(
            exprs(SourceFormat::Json, "\u{feff}evil.example\u{3000}".as_bytes()),
            Ok(vec!["evil.example/".to_owned()])
        );
        assert_eq!(
            exprs(SourceFormat::Domains, "evil.example\u{200e}".as_bytes()),
            Ok(vec!["evil.example/".to_owned()])
        );
        // Typographic quotes around a name, as around a URL.
        for line in [
            "\u{201c}evil.example\u{201d}",
            "\u{ab}evil.example\u{bb}",
            "\u{2018}evil.example\u{2019}",
        ] {
            assert_eq!(
                exprs(SourceFormat::Domains, line.as_bytes()),
                Ok(vec!["evil.example/".to_owned()]),
                "{line}"
            );
        }
        // Inside a URL, U+00A0 separates fields as a space does: the line is
        // read cut there and as written (the canonicalizer escapes it).
        assert_eq!(
            exprs(SourceFormat::Urls, "http://a.example/x\u{a0}y".as_bytes()),
            Ok(vec!["a.example/x".to_owned(), "a.example/x%C2%A0y".to_owned()])
        );
        // A byte that is not UTF-8 at the end is no white space.
        assert_eq!(
            exprs(SourceFormat::Urls, b"http://a.example/x\xa0"),
            Ok(vec!["a.example/x%A0".to_owned()])
        );
        let (_, report) = collect("http://ulvis.net/IFHc\u{a0}\n".as_bytes(), SourceFormat::Urls);
        assert_eq!(report.cleaned[cleaned::UNICODE_WHITE_SPACE], 1);
    }

    #[test]
    fn quoted_lines_lose_one_pair_of_quotes() {
        let readings = read_one(SourceFormat::Urls, b"\"https://x.example/a,b,c\"").unwrap();
        assert_eq!(readings[0].text, b"https://x.example/a,b,c");
        assert_eq!(readings[0].expressions, ["x.example/a,b,c"]);
        assert_eq!(
            read_line(SourceFormat::Urls, b"\"https://x.example/a,b,c\"").cleaned,
            [cleaned::QUOTES]
        );
        assert_eq!(
            exprs(SourceFormat::Urls, b"'https://x.example/a'"),
            Ok(vec!["x.example/a".to_owned()])
        );
        // Quotes then a comment or a column.
        assert_eq!(
            exprs(SourceFormat::Urls, b"\"https://x.example/a\"  # note"),
            Ok(vec!["x.example/a".to_owned()])
        );
        // Only one pair, and only a matching one: the quote left before
        // the scheme is no host (it was listed as the host `"https`).
        assert_eq!(
            exprs(SourceFormat::Urls, b"\"\"https://x.example/a\"\""),
            Err(reason::TEXT_BEFORE_SCHEME)
        );
        // Unmatched quotes stay, and a host name holds none.
        assert_eq!(
            read_one(SourceFormat::Domains, b"'evil.example\"").map(|_| ()),
            Err(reason::NOT_A_HOST_NAME)
        );
        // An empty quoted line is blank.
        assert!(read_line(SourceFormat::Urls, b"\"\"").is_skipped());
    }
}
