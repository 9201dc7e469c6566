//! White space and quotes: the white space that separates fields, the
//! white space trimmed from lines, and a pair of surrounding quotes.

/// Where the first field-separating white space of `text` starts
/// ([`white_len`]), if it holds any.
pub(super) fn first_white(text: &[u8]) -> Option<usize> {
    (0..text.len()).find(|&j| text.get(j..).is_some_and(|r| white_len(r) > 0))
}

/// The white space that separates fields: ASCII white space and Unicode
/// white space, but not the invisible U+FEFF, U+200B and U+2060 (inside a
/// URL they are the canonicalizer's to escape; trimmed at the ends only).
pub(super) fn is_field_white(c: char) -> bool {
    c.is_whitespace()
}

/// The fields of `text` separated by white space ([`white_len`]).
pub(super) fn split_white(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = text;
    std::iter::from_fn(move || {
        while white_len(rest) > 0 {
            rest = rest.get(white_len(rest)..).unwrap_or_default();
        }
        if rest.is_empty() {
            return None;
        }
        let len = first_white(rest).unwrap_or(rest.len());
        let (field, after) = rest.split_at(len);
        rest = after;
        Some(field)
    })
}

/// The length of the field-separating white space `bytes` start with: one
/// ASCII white-space byte, or one character of [`is_field_white`]; 0 when
/// it starts with none.
pub(super) fn white_len(bytes: &[u8]) -> usize {
    match bytes.first() {
        Some(b) if b.is_ascii_whitespace() => 1,
        Some(b) if !b.is_ascii() => first_char(bytes)
            .filter(|(c, _)| is_field_white(*c))
            .map_or(0, |(_, len)| len),
        _ => 0,
    }
}

/// Unicode white space trimmed from feed lines besides ASCII white space:
/// [`blocksieve_format::is_text_white_space`], the set an agent trims from
/// a URL handed to it as text, so that both sides read the same URL.
pub(super) fn is_unicode_white(c: char) -> bool {
    blocksieve_format::is_text_white_space(c)
}

/// The UTF-8 character `bytes` start with, and its length, when it is not
/// ASCII.
pub(super) fn first_char(bytes: &[u8]) -> Option<(char, usize)> {
    let len = match bytes.first()? {
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => return None,
    };
    let c = std::str::from_utf8(bytes.get(..len)?).ok()?.chars().next()?;
    Some((c, len))
}

/// The UTF-8 character `bytes` end with, and its length, when it is not
/// ASCII.
pub(super) fn last_char(bytes: &[u8]) -> Option<(char, usize)> {
    if bytes.last()?.is_ascii() {
        return None;
    }
    let start = bytes.len().saturating_sub(4);
    let tail = bytes.get(start..)?;
    let lead = tail.iter().rposition(|&b| b & 0xC0 != 0x80)?;
    let mut chars = std::str::from_utf8(tail.get(lead..)?).ok()?.chars();
    let c = chars.next()?;
    chars.next().is_none().then_some((c, tail.len() - lead))
}

/// The typographic quotes a word processor writes, opening and closing:
/// `“…”`, `‘…’`, `«…»`, `„…“`.
const TYPOGRAPHIC_QUOTES: [(&str, &str); 4] = [
    ("\u{201C}", "\u{201D}"),
    ("\u{2018}", "\u{2019}"),
    ("\u{AB}", "\u{BB}"),
    ("\u{201E}", "\u{201C}"),
];

/// `"…"` or `'…'` → `…` (one pair of matching quotes), and a pair of
/// [`TYPOGRAPHIC_QUOTES`] (left on, `“evil.example”` was the host
/// `xn--evil-996a.xn--example-…`, which nothing visits).
pub(super) fn unquote(text: &[u8]) -> Option<&[u8]> {
    let (&open, rest) = text.split_first()?;
    if open.is_ascii() {
        let (&close, inner) = rest.split_last()?;
        return (matches!(open, b'"' | b'\'') && open == close).then_some(inner);
    }
    TYPOGRAPHIC_QUOTES
        .iter()
        .find_map(|(open, close)| text.strip_prefix(open.as_bytes())?.strip_suffix(close.as_bytes()))
}
