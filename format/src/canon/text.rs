//! The white space around a URL given as text: what both sides trim before
//! canonicalizing a URL that came as text rather than from a browser's
//! parser (a feed line on the publisher, a URL handed to an agent's check).
//!
//! The canonicalizer trims what the URL Standard trims (C0 controls and
//! space, "basic URL parser" step 1). Text copied from a page, a mail or a
//! chat also ends in U+00A0 NO-BREAK SPACE, U+3000 IDEOGRAPHIC SPACE and
//! the like, which a browser's address bar trims from pasted text (but its
//! URL parser escapes: `%C2%A0`). Trimmed by one side only, a listed URL
//! would be another expression to the other: a feed line ending in U+00A0
//! listed `host/page`, while an agent handed the same text checked
//! `host/page%C2%A0` and answered safe.

/// Whether `c` is white space trimmed from the ends of URL text: what
/// Unicode calls white space (U+00A0, U+2000 to U+200A, U+202F, U+205F,
/// U+3000, …, and ASCII white space), the invisible U+FEFF ZERO WIDTH
/// NO-BREAK SPACE, U+200B ZERO WIDTH SPACE and U+2060 WORD JOINER, which
/// copying from a web page leaves behind, and the invisible bidirectional
/// marks copying from a right-to-left page leaves (U+200E LEFT-TO-RIGHT
/// MARK, U+200F, U+061C, the embeddings and overrides U+202A to U+202E,
/// the isolates U+2066 to U+2069; Unicode's `Bidi_Control`).
pub fn is_text_white_space(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '\u{FEFF}' | '\u{200B}' | '\u{2060}' | '\u{200E}' | '\u{200F}' | '\u{061C}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
        )
}

/// `text` without [`is_text_white_space`] characters or C0 controls at
/// either end. A text starting and ending in a printable ASCII byte (every
/// URL a browser hands over) is returned as it is after two comparisons.
#[inline(always)]
pub fn trim_url_text(text: &str) -> &str {
    match (text.as_bytes().first(), text.as_bytes().last()) {
        (Some(&first), Some(&last)) if (0x21..0x7f).contains(&first) && (0x21..0x7f).contains(&last) => text,
        _ => trim_slow(text),
    }
}

#[inline(never)]
fn trim_slow(text: &str) -> &str {
    text.trim_matches(|c: char| c <= ' ' || is_text_white_space(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_text_loses_unicode_white_space_at_its_ends_only() {
        for (text, trimmed) in [
            ("http://ulvis.net/IFHc\u{a0}", "http://ulvis.net/IFHc"),
            ("\u{a0}http://ulvis.net/IFHc", "http://ulvis.net/IFHc"),
            ("\u{3000}http://x.example/a\u{3000}", "http://x.example/a"),
            ("\u{feff}http://x.example/\u{200b}", "http://x.example/"),
            ("\u{1}\u{a0} http://x.example/ \u{200e}\t", "http://x.example/"),
            ("http://x.example/a\u{a0}b", "http://x.example/a\u{a0}b"),
            ("http://x.example/", "http://x.example/"),
            ("", ""),
            ("\u{a0}", ""),
        ] {
            assert_eq!(trim_url_text(text), trimmed, "{text:?}");
        }
    }
}
