//! Steps 3 to 5 of reading a `urls` line: its fields, quoted or not, which
//! of them are URLs, and the readings of a URL with a space inside.

use std::collections::HashSet;

use super::clean::{Cleaned, Cuts};
use super::entry::{Entry, Read};
use super::outcome::reason;
use super::scheme::{authority, strip_scheme_artifacts};
use super::url_entry::{
    DEFANGED_DOTS, UNICODE_DOTS, has_scheme, is_bare_ipv6, read_url, refang, url_entry, url_read,
};
use super::visit::Visit;
use super::white::{first_white, split_white, unquote, white_len};

/// Whether every byte of `text` is ASCII above the space (`!` to DEL: the
/// test the exact one below refines). Checked 32 bytes at a time with no early exit inside a
/// chunk, which the compiler turns into vector compares: a byte-at-a-time
/// `any` (one branch per byte) was 6 % of an 854k-line build's CPU.
fn all_printable(text: &[u8]) -> bool {
    let outside = |chunk: &[u8]| {
        chunk
            .iter()
            .fold(0u8, |acc, &b| acc | u8::from(b.wrapping_sub(0x21) >= 0x5f))
    };
    let mut chunks = text.chunks_exact(32);
    chunks.all(|c| outside(c) == 0) && outside(chunks.remainder()) == 0
}

/// Steps 3 to 5 of the module docs for a `urls` line (trimmed, not a
/// comment).
pub(super) fn clean_url_line(text: &[u8], mut cuts: Cuts) -> Option<Cleaned<'_>> {
    // Most lines are one URL: ASCII, no white space, no quote at the start.
    // First one compare a byte (vectorized: no byte at or below the space
    // and none above ASCII), then, only for a line with such a byte, the
    // exact test (a control character other than white space is neither).
    if !matches!(text.first(), Some(b'"' | b'\'' | b'<' | b'(' | b'[' | b'`'))
        && (all_printable(text) || !text.iter().any(|&b| b.is_ascii_whitespace() || !b.is_ascii()))
    {
        return Some(Cleaned {
            text,
            more: Vec::new(),
            cuts,
            refused: None,
        });
    }
    let (mut fields, comment) = url_fields(text);
    if comment {
        cuts.0 |= Cuts::COMMENT;
    }
    // The first wrapped URL before any field with a scheme, when no other
    // field names a host or URL (columns may come first: `"Phishing"
    // (http://…)`, `1.2.3.4<TAB><http://…>`). Beside another host or URL
    // it is an annotation (`http://evil.example/p (http://bank.example)`,
    // `evil.example/login (http://bank.example/login)`) or the line is
    // ambiguous (`paypal.com (http://evil.example/login)`): unwrapped, it
    // would list a page or site the line may only mention.
    let wrapped = fields
        .iter()
        .enumerate()
        .take_while(|(_, f)| !has_scheme(f.text))
        .find_map(|(i, f)| Some((i, unwrap(f.text).filter(|_| !f.quoted)?)));
    let mut wrapper = None;
    if let Some((i, (inner, open, close))) = wrapped {
        // The fields up to the one its closing bracket ends are its own
        // (`(http://a.example/my file.html)`).
        let end = (i + 1..fields.len())
            .find(|&j| fields.get(j).is_some_and(|f| f.text.ends_with(close)))
            .unwrap_or(i);
        let beside = fields
            .iter()
            .enumerate()
            .any(|(j, f)| (j < i || j > end) && names_host_or_url(f.text));
        if !beside && let Some(field) = fields.get_mut(i) {
            field.text = inner;
            field.start += open;
            wrapper = Some((i, close));
            cuts.0 |= Cuts::WRAPPER;
        }
    }
    // The URL fields: those starting with a scheme; when none does, the
    // first that looks like a host or URL, else the first.
    let mut chosen: Vec<usize> = (0..fields.len())
        .filter(|&i| fields.get(i).is_some_and(|f| has_scheme(f.text)))
        .collect();
    if chosen.is_empty() {
        let nonempty = || (0..fields.len()).filter(|&i| fields.get(i).is_some_and(|f| !f.text.is_empty()));
        let like = |i: &usize, min: u8| fields.get(*i).is_some_and(|f| url_likeness(f.text) >= min);
        let pick = nonempty()
            .find(|i| like(i, 2))
            .or_else(|| nonempty().find(|i| like(i, 1)))
            .or_else(|| nonempty().next());
        chosen.extend(pick);
    }
    let mut readings: Vec<&[u8]> = Vec::new();
    let mut refused = None;
    let mut used = 0;
    // A host alone is read cut before columns only as the line's one URL:
    // beside another (`https://www.bank.example (phish:
    // http://evil.example/login)`) the columns may be about that one.
    let alone = chosen.len() == 1;
    for (n, &i) in chosen.iter().enumerate() {
        let Some(field) = fields.get(i) else { continue };
        used += 1;
        if field.quoted {
            cuts.0 |= Cuts::QUOTES;
            readings.push(field.text);
            // A space inside a quoted URL: also the URL cut there, when the
            // cut falls after the host or only columns follow (as below).
            if let Some(cut) = cut_at_white(field.text) {
                let after = split_white(field.text.get(cut.len()..).unwrap_or_default());
                if cuts_after_host(cut) || alone && only_columns_follow(cut, after) {
                    cuts.0 |= Cuts::SPACE;
                    readings.push(cut);
                } else {
                    cuts.0 |= Cuts::SPACE_IN_HOST;
                }
            }
            continue;
        }
        // Unquoted fields joined to this one by spaces may belong to it.
        let next_chosen = chosen.get(n + 1).copied().unwrap_or(fields.len());
        let mut last = i;
        while last + 1 < next_chosen && fields.get(last + 1).is_some_and(|f| f.after_spaces && !f.quoted) {
            last += 1;
        }
        used += last - i;
        let Some(end) = fields.get(last) else { continue };
        if last == i {
            readings.push(field.text);
            continue;
        }
        let written = text.get(field.start..end.end).unwrap_or(field.text);
        // A URL with no path, then an `@` after the space before any path
        // (`https://evil.example spoof@bank.example`): the line is that URL
        // and columns (an e-mail address), or one URL whose user name runs
        // to the `@` (browsers visit `bank.example`). Either host listed
        // host-wide may be one the line does not name: neither is (unless
        // brackets make it one URL: `<http://a.example x@b.example>`).
        let wrapped_here = wrapper.is_some_and(|(at, _)| at == i);
        if !wrapped_here && user_name_across_space(field.text, written) {
            refused.get_or_insert(reason::AMBIGUOUS_USER_NAME);
            continue;
        }
        // The field alone when the space falls after the host, or when
        // what follows is no more host: a space inside a host makes no
        // URL, and the cut would list a host-wide expression for a host
        // the line does not name (`http://bank.example .evil.example/login`),
        // where a host followed by a column (`http://evil.example
        // 2020-01-01`, `evil.example (PayPal)`) names that host.
        let joined = fields
            .get(i + 1..=last)
            .unwrap_or_default()
            .iter()
            .map(|f| f.text);
        if cuts_after_host(field.text) || alone && only_columns_follow(field.text, joined) {
            cuts.0 |= Cuts::SPACE;
            readings.push(field.text);
        } else {
            cuts.0 |= Cuts::SPACE_IN_HOST;
        }
        // The wrapper's closing bracket, when it ends the last field joined.
        let written = match wrapper.filter(|&(at, _)| at == i) {
            Some((_, close)) if closes(written, close) => {
                written.get(..written.len() - close.len()).unwrap_or(written)
            }
            _ => written,
        };
        readings.push(written);
    }
    if used < fields.iter().filter(|f| !f.text.is_empty() || f.quoted).count() {
        cuts.0 |= Cuts::COLUMN;
    }
    // A line in quotes whose closing quote no field took may be one URL
    // holding its quote character (`"http://a.example/q?x="a",b"`): read
    // it whole too.
    if let Some(inner) = unquote(text)
        && fields.last().is_some_and(|f| !f.quoted)
        && readings.first().is_some_and(|r| *r != inner)
        && has_scheme(inner)
    {
        cuts.0 |= Cuts::QUOTES;
        readings.push(inner);
    }
    let mut readings = readings.into_iter();
    let Some(first) = readings.next() else {
        // A line whose only URL was refused: rejected for that reason.
        return refused.map(|reason| Cleaned {
            text,
            more: Vec::new(),
            cuts,
            refused: Some(reason),
        });
    };
    Some(Cleaned {
        text: first,
        more: readings.collect(),
        cuts,
        refused: None,
    })
}

/// One field of a `urls` line.
#[derive(Debug, Clone, Copy)]
struct Field<'a> {
    /// The field, without its quotes.
    text: &'a [u8],
    /// Where it starts and ends in the line (quotes included).
    start: usize,
    end: usize,
    /// Whether it was quoted.
    quoted: bool,
    /// Whether the white space before it holds no TAB (or other ASCII
    /// control): spaces, and Unicode white space, may be inside a URL.
    after_spaces: bool,
}

/// The fields of a `urls` line, split at white space (ASCII, and the
/// Unicode white space of
/// [`is_field_white`](super::white::is_field_white)); a field starting
/// with a quote runs to its closing quote ([`closing_quote`]), and a `,`
/// or `;` right after it separates it from the next. Also whether a comment was
/// cut: an unquoted field starting with `#` after the first starts one.
fn url_fields(text: &[u8]) -> (Vec<Field<'_>>, bool) {
    let mut fields = Vec::new();
    let mut i = 0;
    let mut spaces_only = true;
    // Where a field opening with `"` (then `'`) was found to have no
    // closing quote: none opening later has one either (its candidates are
    // among the first's), so the line is not scanned to its end again for
    // each (a hostile line of 200,000 `'"a ` took over a minute).
    let mut unclosed: [Option<usize>; 2] = [None, None];
    while let Some(rest) = text.get(i..).filter(|r| !r.is_empty()) {
        let white = white_len(rest);
        if white > 0 {
            if rest
                .first()
                .is_some_and(|&b| b.is_ascii_whitespace() && b != b' ')
            {
                spaces_only = false;
            }
            i += white;
            continue;
        }
        let after_spaces = spaces_only && !fields.is_empty();
        spaces_only = true;
        let quote = match rest.first() {
            Some(b'"') => Some(0),
            Some(b'\'') => Some(1),
            _ => None,
        };
        let known_unclosed = quote.is_some_and(|q| unclosed[q].is_some_and(|from| from <= i));
        let close = if known_unclosed { None } else { closing_quote(rest) };
        if let (Some(q), None) = (quote, close) {
            unclosed[q].get_or_insert(i);
        }
        if let Some(close) = close {
            fields.push(Field {
                text: rest.get(1..close).unwrap_or_default(),
                start: i,
                end: i + close + 1,
                quoted: true,
                after_spaces: false,
            });
            i += close + 1;
            if text.get(i).is_some_and(|b| matches!(b, b',' | b';')) {
                i += 1;
                spaces_only = false;
            }
            continue;
        }
        if rest.first() == Some(&b'#') && !fields.is_empty() {
            return (fields, true);
        }
        let len = first_white(rest).unwrap_or(rest.len());
        fields.push(Field {
            text: rest.get(..len).unwrap_or_default(),
            start: i,
            end: i + len,
            quoted: false,
            after_spaces,
        });
        i += len;
    }
    (fields, false)
}

/// How much a field without a scheme looks like a URL or host rather than
/// a column: 2 when it holds a `/` (and is not only digits and slashes: a
/// date), or a `.` and a letter (`a.example`, `a.example/p`); 1 for a
/// dotted-quad IPv4 address (also the address column of a hosts line); 0
/// for dates, counts and words.
fn url_likeness(field: &[u8]) -> u8 {
    let dots = field.iter().filter(|&&b| b == b'.').count();
    // A date written with slashes (`01/02/2020`) holds a `/` but no URL.
    let date = field.iter().all(|&b| b.is_ascii_digit() || b == b'/');
    if field.contains(&b'/') && !date || dots > 0 && field.iter().any(u8::is_ascii_alphabetic) {
        2
    } else if dots == 3 {
        1
    } else {
        0
    }
}

/// Whether the fields that follow URL text `url` after a space are
/// columns of the line, so that `url` alone is what the line names: dates,
/// times and numbers (`2020-01-01`, `12/31/2020`, `2024-05-01T12:00:00Z`,
/// `+00:00`, `1.2.3.4`, and `AM`, `PM`, `UTC`, `GMT`) until a separator
/// field (`-`, `|`, `–`, `—`) or a field opening a parenthesis, after which
/// any text is a comment (`http://evil.example 2020-01-01 (PayPal
/// phishing)`, `evil.example - 100% fake login`). Never when a field holds
/// an `@` (a user name: `http://bank.example (x)@evil.example/` visits
/// `evil.example`; so `- reported to abuse@cert.example` keeps the line
/// from being cut too), or a `%` before the comment (`%2eevil`), when `url` ends in a `.` (`http://www.chase.
/// 2020`), or when its host is digits and dots short of a dotted quad
/// (`http://192.168 1.1/`: the rest of an address). A word is not a
/// column: it may be the rest of a host split by the space
/// (`http://www.paypal.co m`), and neither is a path or query (`/123`,
/// `?id=1`: the line names a page, not the host).
fn only_columns_follow<'a>(url: &[u8], fields: impl Iterator<Item = &'a [u8]>) -> bool {
    const SEPARATORS: [&[u8]; 4] = [b"-", b"|", "\u{2013}".as_bytes(), "\u{2014}".as_bytes()];
    let host = match memchr::memmem::find(url, b"://") {
        Some(at) => url.get(at + 3..).unwrap_or_default(),
        None => url,
    };
    let partial_address = host.iter().all(|&b| b.is_ascii_digit() || b == b'.')
        && host.iter().filter(|&&b| b == b'.').count() < 3;
    if url.ends_with(b".") || partial_address {
        return false;
    }
    let mut comment = false;
    for field in fields {
        // A URL after the space, even in a comment, may be what the line
        // names (`http://paypal.com (http://evil.example/login)`).
        if memchr::memmem::find(field, b"://").is_some() {
            return false;
        }
        // An `@` anywhere: the line as written may be a URL with a user
        // name. A `%` only before a comment (`- 100% phishing` is text).
        if field.contains(&b'@') || !comment && field.contains(&b'%') {
            return false;
        }
        if comment {
            continue;
        }
        if SEPARATORS.contains(&field) || field.starts_with(b"(") {
            comment = true;
        } else if !is_time(field) {
            return false;
        }
    }
    true
}

/// Whether URL field `url`, with no path, and the fields joined to it by
/// spaces (`written`) hold an `@` in their authority: the host would be
/// read after it, from a field after the space. Both are read as the
/// build reads a URL: refanged, past a doubled scheme or extra slashes
/// (`hxxps[:]//evil[.]example`, `https://https://…`, `http:\\…`).
fn user_name_across_space(url: &[u8], written: &[u8]) -> bool {
    let (_, path) = authority(&as_read(url));
    !path && authority(&as_read(written)).0.contains(&b'@')
}

/// URL text as the build reads it ([`refang`], [`strip_scheme_artifacts`]).
fn as_read(text: &[u8]) -> Vec<u8> {
    let refanged = refang(text);
    strip_scheme_artifacts(refanged.as_deref().unwrap_or(text)).to_vec()
}

/// Brackets and quotes that wrap a URL, opening and closing: ASCII ones,
/// a Markdown code span's backticks, and the typographic quotes a word
/// processor writes (`“…”`, `‘…’`, `«…»`, `„…“`).
const WRAPPERS: [(&[u8], &[u8]); 8] = [
    (b"<", b">"),
    (b"(", b")"),
    (b"[", b"]"),
    (b"`", b"`"),
    ("\u{201C}".as_bytes(), "\u{201D}".as_bytes()),
    ("\u{2018}".as_bytes(), "\u{2019}".as_bytes()),
    ("\u{AB}".as_bytes(), "\u{BB}".as_bytes()),
    ("\u{201E}".as_bytes(), "\u{201C}".as_bytes()),
];

/// A URL field without its wrapper, the wrapper's opening length and its
/// closing text: `<http://…>`, `(http://…)`, `[http://…]`, `` `http://…` ``
/// and typographic quotes ([`WRAPPERS`]; the closing one removed when it
/// ends the field, [`closes`]), or a quote that opens the field and that
/// nothing closes (`"http://…`, `'http://…`); a URL or host without a
/// scheme only when the wrapper closes around it whole (`<a.example/p>`,
/// `(a.example)`; beside another host it stays a column). Left on, a
/// wrapper became part of the host (`“http` read as the host
/// `xn--http-996a`, `(a.example` for `(a.example/p)`).
fn unwrap(field: &[u8]) -> Option<(&[u8], usize, &'static [u8])> {
    let (open, close) = match field.first()? {
        b'"' => (1, &b"\""[..]),
        b'\'' => (1, &b"'"[..]),
        _ => WRAPPERS
            .iter()
            .find(|(open, _)| field.starts_with(open))
            .map(|&(open, close)| (open.len(), close))?,
    };
    let inner = field.get(open..)?;
    if matches!(close, b"\"" | b"'") && inner.contains(&close[0]) {
        return None;
    }
    // A Markdown link, `[text](url)`, is no URL in brackets.
    if close == b"]" && memchr::memmem::find(inner, b"](").is_some() {
        return None;
    }
    if !has_scheme(inner) {
        // A URL or host without a scheme wrapped whole (`<evil.example/login>`,
        // `(evil.example)`); not an IPv6 address in its own brackets.
        let stripped = inner.strip_suffix(close).filter(|_| closes(inner, close))?;
        let authority = stripped.split(|&b| b == b'/').next().unwrap_or_default();
        let url = names_host_or_url(stripped) || url_likeness(stripped) > 0;
        return (url && !is_bare_ipv6(authority)).then_some((stripped, open, close));
    }
    let inner = match inner.strip_suffix(close) {
        Some(stripped) if closes(inner, close) => stripped,
        _ => inner,
    };
    Some((inner, open, close))
}

/// Whether `text` (unwrapped) ends in the wrapper's `close`: a `)` or `]`
/// the URL's own `(` or `[` opened does not (`(http://w.example/Foo_(bar)`,
/// `[http://[2001:db8::1]/]`), the others always do (no URL holds them
/// unescaped).
fn closes(text: &[u8], close: &[u8]) -> bool {
    let count = |b: u8| text.iter().filter(|&&c| c == b).count();
    text.ends_with(close)
        && match close {
            b")" => count(b')') > count(b'('),
            b"]" => count(b']') > count(b'['),
            _ => true,
        }
}

/// Whether a field is a date, a time or a number (`2020-01-01`,
/// `12/31/2020`, `2024-05-01T12:00:00.000Z`, `+00:00`, `1.2.3.4`, `AM`,
/// `PM`, `UTC`, `GMT`): a column beside a URL.
fn is_time(field: &[u8]) -> bool {
    const TIME_WORDS: [&[u8]; 4] = [b"am", b"pm", b"utc", b"gmt"];
    field.first().is_some_and(|&b| b.is_ascii_digit() || b == b'+')
        && field.iter().all(|&b| {
            b.is_ascii_digit() || matches!(b, b'-' | b'/' | b'.' | b':' | b',' | b'+' | b'T' | b'Z')
        })
        || TIME_WORDS.iter().any(|w| w.eq_ignore_ascii_case(field))
}

/// Whether a field names a host or URL, for the wrapper rule: it has a
/// scheme, or a `.` and a letter and is not a time
/// (`evil.example/login`, `Trojan.Win32.Agent`, not `N/A` or
/// `2024-05-01T12:00:00.000Z`), or a defanged or non-ASCII dot
/// (`evil[dot]example`, `evil。example`).
fn names_host_or_url(field: &[u8]) -> bool {
    let has = |dot: &&[u8]| field.windows(dot.len()).any(|w| w.eq_ignore_ascii_case(dot));
    has_scheme(field)
        || field.contains(&b'.') && field.iter().any(u8::is_ascii_alphabetic) && !is_time(field)
        || DEFANGED_DOTS.iter().chain(&UNICODE_DOTS).any(has)
}

/// `text` cut at its first white space, if it holds any.
fn cut_at_white(text: &[u8]) -> Option<&[u8]> {
    text.get(..first_white(text)?)
}

/// Whether URL text (with or without a scheme) goes on past its host: it
/// holds a `/`, `\`, `?` or `#` after the authority's start. A URL cut
/// there still names the host the whole URL names.
fn cuts_after_host(url: &[u8]) -> bool {
    let authority = match memchr::memmem::find(url, b"://") {
        Some(at) if has_scheme(url) => url.get(at + 3..).unwrap_or_default(),
        _ => url,
    };
    // Slashes before the host (`http:///host`) are read past, not a path.
    let slashes = authority.iter().take_while(|&&b| b == b'/' || b == b'\\').count();
    let authority = authority.get(slashes..).unwrap_or_default();
    authority.iter().any(|b| matches!(b, b'/' | b'\\' | b'?' | b'#'))
}

/// Where the field `text` starts with closes, when it starts with a quote
/// (`"` or `'`): the first matching quote that ends the text or is
/// followed by white space, `,`, `;` or `#`.
fn closing_quote(text: &[u8]) -> Option<usize> {
    let (&open, rest) = text.split_first()?;
    if !matches!(open, b'"' | b'\'') {
        return None;
    }
    let mut from = 0;
    while let Some(at) = rest.get(from..).and_then(|r| memchr::memchr(open, r)) {
        let close = from + at;
        let after = rest.get(close + 1..).unwrap_or_default();
        let ends = match after.first() {
            None => true,
            Some(b) => matches!(b, b',' | b';' | b'#') || white_len(after) > 0,
        };
        if ends {
            return Some(close + 1);
        }
        from = close + 1;
    }
    None
}

/// A `urls` line: one reading, or more (step 5 of the module docs). The
/// entry is accepted when any reading is, with every reading accepted;
/// rejected with the first reading's reason when none is.
pub(super) fn read_url_line(line: &Cleaned<'_>, v: &mut impl Visit) {
    if line.more.is_empty() {
        return read_url(line.text, v);
    }
    let mut accepted: Vec<Read<'_>> = Vec::new();
    // The expressions of each reading kept, to drop a later reading with
    // the same ones: a set, so that a hostile line of many URLs costs time
    // in proportion to its length (a comparison with every earlier reading
    // took 1.4 s for 6,000 URLs on one line, and grew with the square).
    let mut seen: HashSet<Vec<String>> = HashSet::new();
    let mut first_error = None;
    for text in std::iter::once(line.text).chain(line.more.iter().copied()) {
        match v.canonicalizing(|| url_entry(text)) {
            Ok(entry) => {
                let read = url_read(text, entry);
                let new = match &read.entry {
                    Entry::Url(e) => seen.insert(e.to_strings()),
                    _ => true,
                };
                if new {
                    accepted.push(read);
                }
            }
            Err(reason) => {
                first_error.get_or_insert(reason);
            }
        }
    }
    if accepted.is_empty() {
        v.rejected(line.text, first_error.unwrap_or(reason::NOT_A_URL));
    } else {
        v.accepted(&accepted);
    }
}

#[cfg(test)]
mod tests {
    use crate::config::SourceFormat;
    use crate::sources::tests::{collect, exprs, first_expr, hashes, read_one};
    use crate::sources::{cleaned, read_line, reason};

    #[test]
    fn all_printable_is_true_exactly_when_every_byte_is_ascii_above_the_space() {
        // Every byte value at every position of lines of 0 to 70 bytes
        // (across the 32-byte chunks and their remainder).
        for len in 0..70 {
            assert!(super::all_printable(&vec![b'a'; len]));
            for at in 0..len {
                for b in 0..=255u8 {
                    let mut line = vec![b'~'; len];
                    line[at] = b;
                    assert_eq!(
                        super::all_printable(&line),
                        (0x21..=0x7f).contains(&b),
                        "{len} {at} {b}"
                    );
                }
            }
        }
    }

    /// urlhaus-filter's header, as its URL list keeps it: the `!` lines are
    /// comments; read as entries, the homepage line listed that page.
    #[test]
    fn adblock_comment_lines_of_a_url_list_are_skipped() {
        let (out, report) = collect(
            b"! Title: Malicious URL Blocklist\n! Homepage: https://gitlab.com/malware-filter/urlhaus-filter\n\
              !   License: https://gitlab.com/malware-filter/urlhaus-filter#license\nhttp://listed.example/p\n",
            SourceFormat::Urls,
        );
        assert_eq!(out, hashes(&["listed.example/p"]));
        assert_eq!(
            (report.lines, report.accepted, report.rejected_total()),
            (4, 1, 0)
        );
    }

    #[test]
    fn url_line_with_a_trailing_comment_is_cut_and_counted() {
        let line = b"http://comment.example/p # seen 2020-01-01";
        let out = read_line(SourceFormat::Urls, line);
        assert_eq!(out.cleaned, [cleaned::COMMENT]);
        let readings = read_one(SourceFormat::Urls, line).unwrap();
        assert_eq!(readings[0].text, b"http://comment.example/p");
        assert_eq!(readings[0].expressions, ["comment.example/p"]);
        // A `#` right after the URL is its fragment, not a comment.
        let out = read_line(
            SourceFormat::Urls,
            b"https://bcpzonasegurabeta.viabcp.com/#/iniciar-sesion",
        );
        assert!(out.cleaned.is_empty());
        assert_eq!(
            exprs(
                SourceFormat::Urls,
                b"https://bcpzonasegurabeta.viabcp.com/#/iniciar-sesion"
            ),
            Ok(vec!["bcpzonasegurabeta.viabcp.com/".to_owned()])
        );
        let (out, report) = collect(
            b"http://comment.example/p\t# x\nhttp://c.example/q  #\n",
            SourceFormat::Urls,
        );
        assert_eq!(out, hashes(&["comment.example/p", "c.example/q"]));
        // A TAB before the `#` is white space before a comment.
        assert_eq!(report.cleaned[cleaned::COMMENT], 2);
        assert!(!report.cleaned.contains_key(cleaned::COLUMN));
        // Unicode white space before `#` too.
        assert_eq!(
            exprs(
                SourceFormat::Urls,
                "http://a.example/p\u{a0}# seen 2020".as_bytes()
            ),
            Ok(vec!["a.example/p".to_owned()])
        );
    }

    #[test]
    fn url_line_with_a_tab_column_is_cut_and_counted() {
        let line = b"http://tab.example/mid\t2020-01-01";
        let readings = read_one(SourceFormat::Urls, line).unwrap();
        assert_eq!(readings[0].text, b"http://tab.example/mid");
        assert_eq!(readings[0].expressions, ["tab.example/mid"]);
        let (out, report) = collect(line, SourceFormat::Urls);
        assert_eq!(out, hashes(&["tab.example/mid"]));
        assert_eq!(report.cleaned[cleaned::COLUMN], 1);
        assert_eq!(report.accepted, 1);
    }

    // A space is a column separator or part of the URL;
    // both readings are published so that neither is lost.
    #[test]
    fn url_line_with_a_space_inside_is_read_both_ways() {
        let line = b"http://x.example/my file.html";
        let readings = read_one(SourceFormat::Urls, line).unwrap();
        let texts: Vec<&[u8]> = readings.iter().map(|r| r.text.as_slice()).collect();
        assert_eq!(texts, [&b"http://x.example/my"[..], &line[..]]);
        assert_eq!(
            exprs(SourceFormat::Urls, line),
            Ok(vec![
                "x.example/my".to_owned(),
                "x.example/my%20file.html".to_owned()
            ])
        );
        let (out, report) = collect(b"http://x.example/p seen 2020-01-01\n", SourceFormat::Urls);
        assert_eq!(out, hashes(&["x.example/p", "x.example/p%20seen%202020-01-01"]));
        assert_eq!((report.accepted, report.cleaned[cleaned::SPACE]), (1, 1));
        // A space in the fragment changes nothing.
        assert_eq!(
            exprs(SourceFormat::Urls, b"http://x.example/p#a b"),
            Ok(vec!["x.example/p".to_owned()])
        );
        // A space inside the host: no cut reading, and the line as written
        // names a host no browser visits.
        assert_eq!(
            exprs(SourceFormat::Urls, b"http://evil .example/p"),
            Err(reason::FORBIDDEN_IN_HOST)
        );
        assert_eq!(
            read_line(SourceFormat::Urls, b"http://evil .example/p").cleaned,
            [cleaned::SPACE_IN_HOST]
        );
    }

    /// A URL with no path followed by a column (`URL date`, `URL
    /// (comment)`) names its host: it is read cut at the space too. It was
    /// read as written only, `evil.example%202020-01-01/`, which no visit
    /// matches (the report said "read cut at the space and as written").
    /// A space followed by more host (`.evil.example/`) or another URL is
    /// still not cut: the host alone is not what the line names.
    #[test]
    fn a_host_followed_by_a_column_is_read_cut_at_the_space() {
        for line in [
            &b"http://evil.example 2020-01-01"[..],
            b"evil.example 2020-01-01",
            b"http://evil.example (PayPal phishing)",
            b"https://EVIL.example  - phishing",
            b"http://evil.example 1.2.3.4",
            b"http://evil.example 12/31/2020",
            b"http://evil.example 2024-05-01T12:00:00Z",
            b"http://evil.example 2024-05-01 12:00:00 UTC",
            b"http://evil.example 12/31/2020 10:00 PM",
            b"http://evil.example 2024-05-01 12:00:00 +00:00",
            b"http://evil.example - 100% phishing",
            b"evil.example 2020-01-01 | 95% confidence",
            b"\"http://evil.example 2020-01-01\"",
        ] {
            assert_eq!(
                exprs(SourceFormat::Urls, line),
                Ok(vec!["evil.example/".to_owned()]),
                "{}",
                line.escape_ascii()
            );
            assert!(
                read_line(SourceFormat::Urls, line)
                    .cleaned
                    .contains(&cleaned::SPACE)
            );
        }
        // Found by a reviewer: a user name (`@`), a dot written another
        // way, a path or query, a host ending in `.`.
        for line in [
            &b"http://bank.example .evil.example/login"[..],
            b"http://bank.example evil.example/login",
            b"http://bank.example evil.example",
            b"http://bank.example @1.2.3.4",
            b"http://bank.example @[2001:db8::1]",
            b"https://www.bank.example @0x01020304",
            b"http://bank.example @3232235777",
            "http://bank.example \u{ff0e}evil\u{ff0e}example".as_bytes(),
            "http://bank.example \u{3002}evil\u{3002}example".as_bytes(),
            b"http://bank.example %2eevil%2eexample",
            b"http://bank.example /123/456",
            b"http://bank.example ?id=1",
            b"http://bank.example /",
            b"http://www.bank. example",
            b"\"http://bank.example @1.2.3.4\"",
            // Found by a second review: a dot at the end written another
            // way, a last label split by the space, a wrapped URL after
            // the first.
            b"http://www.bank%2e example",
            "http://www.bank\u{3002} example".as_bytes(),
            b"http://www.bank.example co",
            b"http://www.bank.exam ple",
            b"http://evil.example/p (http://bank.example)",
            b"http://evil.example/p <http://bank.example>",
            b"http://evil.example/p \"http://bank.example",
            // A third review: an `@` after a comment, the rest of an address.
            b"http://bank.example (x)@evil.example/",
            b"http://bank.example - x@evil.example/",
            b"http://bank.example 2020-01-01 (x)@evil.example/login",
            b"<http://bank.example (x)@evil.example/>",
            b"\"http://bank.example - x@evil.example/\"",
            b"bank.example (x)@evil.example/login",
            // A fifth: a wrapped site beside a URL without a scheme.
            b"evil.example/login (http://bank.example)",
            b"evil.example <https://www.bank.example/>",
            b"2020-01-01 evil.example/login (http://bank.example)",
            b"\"evil.example/login\" (http://bank.example)",
            b"evil.example/login 'http://bank.example",
            b"Phishing (https://www.bank.example) http://evil.example/login",
            // A sixth: a column that looks like a host before a wrapped site.
            b"Trojan.Win32.Agent <http://bank.example/>",
            // Extra slashes are no path: the space is still in the host.
            b"http:///bank.example .evil.example",
            b"\"http:///bank.example .evil.example\"",
            b"\"http:///bank.example\t@evil.example\"",
            // A seventh, against the session's start: a wrapped page beside
            // a URL, a defanged or Unicode-dotted host beside a wrapped
            // site, a URL in a comment after a bare host.
            b"evil.example/login.php (http://bank.example/login)",
            b"evil.example/login.php <https://www.bank.example/signin>",
            b"\"evil.example/login.php\" (http://bank.example/login)",
            b"2020-01-01 evil.example/p <http://bank.example/login>",
            b"evil.example\t(http://bank.example/login)",
            b"evil[dot]example (http://bank.example)",
            b"evil(dot)com <https://bank.example/>",
            "evil\u{3002}example (http://bank.example)".as_bytes(),
            b"http://bank.example (http://evil.example/login)",
            b"https://www.bank.example (phish: http://evil.example/login)",
            b"http://bank.example 2020-01-01 (http://evil.example/login)",
            b"http://bank.example - http://evil.example/login",
        ] {
            let got = exprs(SourceFormat::Urls, line).unwrap_or_default();
            assert!(
                !got.iter().any(|e| {
                    [
                        "bank.example/",
                        "www.bank.example/",
                        "www.bank/",
                        "www.bank.exam/",
                        "bank.example/login",
                        "www.bank.example/signin",
                    ]
                    .contains(&e.as_str())
                }),
                "{}: {got:?}",
                line.escape_ascii()
            );
        }
    }

    /// An `@` after a space behind a URL with no path made the line read
    /// as one URL whose user name ran to the `@`:
    /// `https://alibaba666.bet spoof@paypal.com` listed `paypal.com/`
    /// host-wide (an e-mail column). Reading the e-mail as a column instead
    /// let `http://www.paypal.com x@evil.example` (which a browser sends to
    /// `evil.example`) list `www.paypal.com/`. Neither host is listed: the
    /// line is refused, counted by that reason.
    #[test]
    fn regression_an_at_sign_after_a_url_with_no_path_refuses_the_line() {
        let listed = [
            "paypal.com/",
            "www.paypal.com/",
            "abuse.example/",
            "cert.example/",
            "registrar.example/",
            "bank.example/",
            "evil.example/",
        ];
        for line in [
            &b"https://alibaba666.bet spoof@paypal.com"[..],
            b"https://evil.example 2020-01-01 phishing@abuse.example",
            b"https://evil.example 2020-01-01 mailto:abuse@cert.example",
            b"https://evil.example reporter:spoof@paypal.com",
            b"evil.example - abuse@registrar.example",
            b"http://www.paypal.com x@evil.example",
            "http://www.paypal.com\u{a0}x@evil.example".as_bytes(),
            "http://www.paypal.com\u{3000}x@evil.example".as_bytes(),
            b"http://bank.example (x)@evil.example/",
            b"http://bank.example - x@evil.example/",
            // Found by a review: the scheme as the build reads it
            // (defanged, doubled, slashes browsers skip).
            b"hxxps[:]//evil[.]example spoof@paypal.com",
            b"hxxps[://]evil[.]example spoof@paypal.com",
            b"https://https://evil.example spoof@paypal.com",
            b"https:/evil.example spoof@paypal.com",
            b"http:\\\\evil.example spoof@paypal.com",
            b"https:///evil.example spoof@paypal.com",
            b"//evil.example spoof@paypal.com",
        ] {
            let shown = line.escape_ascii().to_string();
            assert_eq!(
                exprs(SourceFormat::Urls, line),
                Err(reason::AMBIGUOUS_USER_NAME),
                "{shown}"
            );
            let (out, report) = collect(line, SourceFormat::Urls);
            assert!(out.is_empty(), "{shown}");
            assert_eq!(report.rejected[reason::AMBIGUOUS_USER_NAME], 1, "{shown}");
        }
        // A path before the space: the `@` is in the path either way, and
        // the line is read cut and whole, as before.
        for (line, expected) in [
            (
                &b"http://evil.example/verify.php?email= john@bank.example"[..],
                &[
                    "evil.example/verify.php?email=",
                    "evil.example/verify.php?email=%20john@bank.example",
                ][..],
            ),
            (
                b"http://evil.example/p 2020-01-01 spoof@paypal.com",
                &["evil.example/p", "evil.example/p%202020-01-01%20spoof@paypal.com"],
            ),
        ] {
            let got = exprs(SourceFormat::Urls, line).unwrap();
            assert_eq!(got, expected, "{}", line.escape_ascii());
            assert!(got.iter().all(|e| !listed.contains(&e.as_str())));
        }
        // Brackets make it one URL: as a browser reads it.
        assert_eq!(
            exprs(SourceFormat::Urls, b"<http://www.paypal.com x@evil.example>"),
            Ok(vec!["evil.example/".to_owned()])
        );
    }

    /// A line of fields that open with a quote nothing closes scanned the
    /// rest of the line for each (quadratic: 200,000 `'"a ` took over a
    /// minute); once known unclosed, a quote is not looked for again.
    #[test]
    fn regression_unclosed_quotes_are_read_in_linear_time() {
        let line = "'\"a ".repeat(200_000);
        let started = std::time::Instant::now();
        let _ = read_line(SourceFormat::Urls, line.as_bytes());
        // About 0.1 s in a debug build; quadratic, minutes.
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
    }

    /// A URL in `<…>` or `(…)`, or after a quote nothing closes, is read
    /// without them (they became the host: `<http/evil.example/login>`),
    /// and a date with slashes before a scheme-less URL is a column (it was
    /// read as the IP address `0.0.0.1`).
    #[test]
    fn wrappers_and_slashed_dates_around_a_url_are_removed() {
        for line in [
            &b"<http://evil.example/login>"[..],
            b"(http://evil.example/login)",
            b"\"http://evil.example/login",
            b"'http://evil.example/login",
            b"<http://evil.example/login",
            b"01/02/2020 evil.example/login",
            b"12/31/2020\tevil.example/login",
            // Square brackets, a Markdown code span, typographic quotes: the
            // wrapper became part of the host (`xn--http-996a/…`).
            b"[http://evil.example/login]",
            b"`http://evil.example/login`",
            b"`hxxp://evil[.]example/login`",
            "\u{201c}http://evil.example/login\u{201d}".as_bytes(),
            "\u{2018}http://evil.example/login\u{2019}".as_bytes(),
            "\u{ab}http://evil.example/login\u{bb}".as_bytes(),
            "\u{201e}http://evil.example/login\u{201c}".as_bytes(),
        ] {
            assert_eq!(
                exprs(SourceFormat::Urls, line),
                Ok(vec!["evil.example/login".to_owned()]),
                "{}",
                line.escape_ascii()
            );
        }
        assert_eq!(
            read_line(SourceFormat::Urls, b"<http://evil.example/login>").cleaned,
            [cleaned::WRAPPER]
        );
        // A typographic quote and a column: the URL is read unquoted.
        let quoted = exprs(
            SourceFormat::Urls,
            "\u{201c}http://evil.example/login\u{201d} 2020-01-01".as_bytes(),
        );
        assert!(quoted.unwrap().contains(&"evil.example/login".to_owned()));
        // A Markdown link is not a bracketed URL: not read as one.
        let markdown = exprs(
            SourceFormat::Urls,
            b"[http://evil.example/login](http://evil.example/login)",
        );
        assert!(markdown.unwrap_or_default().iter().all(|e| !e.contains("](")));
        // A bracket that is part of the URL (an IPv6 host) stays.
        assert_eq!(
            exprs(SourceFormat::Urls, b"[http://[2001:db8::1]/x]").unwrap()[0],
            "[2001:db8::1]/x"
        );
        // The closing bracket after a space: the URL as written without it.
        assert_eq!(
            exprs(SourceFormat::Urls, b"(http://evil.example/my file.html)"),
            Ok(vec![
                "evil.example/my".to_owned(),
                "evil.example/my%20file.html".to_owned()
            ])
        );
        // A `)` of the URL's own stays.
        assert_eq!(
            exprs(SourceFormat::Urls, b"(http://w.example/Foo_(bar)"),
            Ok(vec!["w.example/Foo_(bar)".to_owned()])
        );
        assert_eq!(
            exprs(SourceFormat::Urls, b"(http://w.example/Foo_(bar))"),
            Ok(vec!["w.example/Foo_(bar)".to_owned()])
        );
        // Not a wrapper: a scheme-less host in brackets is a column, and a
        // URL whose path ends in `)` keeps it.
        assert_eq!(
            exprs(SourceFormat::Urls, b"http://a.example/p_(x) (a.example)"),
            Ok(vec![
                "a.example/p_(x)".to_owned(),
                "a.example/p_(x)%20(a.example)".to_owned()
            ])
        );
    }

    /// A URL or host without a scheme wrapped whole in brackets
    /// (`<evil.example/login>`, as an e-mail or a Markdown page writes a
    /// link) kept its wrapper: in `<…>` or `[…]` it was refused (a host
    /// holding `<`, an invalid IPv6 address), in `(…)` listed on the host
    /// `(evil.example`, which matches no visit to `evil.example/login`.
    #[test]
    fn regression_a_wrapped_url_without_a_scheme_is_unwrapped() {
        for (line, expected) in [
            (&b"<evil.example/login>"[..], "evil.example/login"),
            (b"(evil.example/login)", "evil.example/login"),
            (b"[evil.example/login]", "evil.example/login"),
            (b"<evil[.]example/login>", "evil.example/login"),
            (b"1\t<evil.example/login>", "evil.example/login"),
            (b"(evil.example)", "evil.example/"),
            (b"<1.2.3.4/login>", "1.2.3.4/login"),
        ] {
            assert_eq!(
                first_expr(SourceFormat::Urls, line),
                Ok(expected.to_owned()),
                "{}",
                line.escape_ascii()
            );
        }
        // An IPv6 address in its own brackets stays one; a host beside the
        // wrapped one keeps it a column.
        assert_eq!(
            first_expr(SourceFormat::Urls, b"[2001:db8::1]"),
            Ok("[2001:db8::1]/".to_owned())
        );
        assert_eq!(
            first_expr(SourceFormat::Urls, b"[::ffff:1.2.3.4]/p"),
            Ok("[::ffff:1.2.3.4]/p".to_owned())
        );
        assert_eq!(
            exprs(SourceFormat::Urls, b"evil.example/login (bank.example/login)"),
            Ok(vec![
                "evil.example/login".to_owned(),
                "evil.example/login%20(bank.example/login)".to_owned()
            ])
        );
    }

    /// A line of many URLs is read in time proportional to its length: each
    /// reading was compared with every earlier one (20,000 URLs on a line
    /// took 44 s in a release build), now looked up in a set (0.17 s). The
    /// bound is generous for a debug build on a loaded machine; the old
    /// code took minutes here.
    #[test]
    fn a_line_of_many_urls_is_read_in_linear_time_and_keeps_each_once() {
        let urls: Vec<String> = (0..20_000)
            .map(|i| format!("http://h{}.example/p", i % 15_000))
            .collect();
        let line = urls.join(" ");
        let started = std::time::Instant::now();
        let readings = read_one(SourceFormat::Urls, line.as_bytes()).unwrap();
        let elapsed = started.elapsed();
        assert_eq!(readings.len(), 15_000, "one reading per distinct URL");
        assert!(elapsed < std::time::Duration::from_secs(20), "{elapsed:?}");
    }

    /// A host of digits and dots short of a dotted quad is not cut before
    /// a number: `http://192.168 1.1/` would list `192.0.0.168/`, an
    /// address the line does not name. A whole address is.
    #[test]
    fn a_partial_address_is_not_cut_before_a_number() {
        for line in [
            &b"http://192.168 1.1/123"[..],
            b"http://10.0 0.1/",
            b"http://192.168.1 5",
        ] {
            let got = exprs(SourceFormat::Urls, line).unwrap_or_default();
            assert!(got.is_empty(), "{}: {got:?}", line.escape_ascii());
        }
        assert_eq!(
            first_expr(SourceFormat::Urls, b"http://1.2.3.4 2020-01-01"),
            Ok("1.2.3.4/".to_owned())
        );
    }

    /// Columns before a wrapped URL: the URL is unwrapped (a third review
    /// found `"Phishing" (http://…)` listed as `(http/…`).
    #[test]
    fn a_wrapped_url_after_leading_columns_is_unwrapped() {
        for line in [
            &b"\"Phishing\" (http://evil.example/login)"[..],
            b"2020-01-01\t<http://evil.example/login>",
            b"1\t<http://evil.example/login>",
            // A sixth review: columns that look like hosts or URLs before
            // a wrapped page, and a wrapped URL before another URL.
            b"1.2.3.4 <http://evil.example/login>",
            b"1.2.3.4\t(http://evil.example/login)",
            b"2024-05-01T12:00:00.000Z <http://evil.example/login>",
            b"2024-05-01T12:00:00.000Z\t<http://evil.example/login>",
            b"N/A <http://evil.example/login>",
        ] {
            assert_eq!(
                exprs(SourceFormat::Urls, line),
                Ok(vec!["evil.example/login".to_owned()]),
                "{}",
                line.escape_ascii()
            );
        }
    }

    /// A wrapped URL first, then another URL.
    #[test]
    fn a_wrapped_url_before_another_url_is_unwrapped() {
        // Beside another URL, a wrapped one stays a column: ambiguous (as
        // before this reading of wrappers), never a wrong block.
        assert_eq!(
            exprs(
                SourceFormat::Urls,
                b"<http://evil.example/login> http://evil2.example/x"
            ),
            Ok(vec!["evil2.example/x".to_owned()])
        );
        // A wrapped site with no other host or URL on the line is the URL.
        for line in [
            &b"1.2.3.4 <http://evil.example/>"[..],
            b"2024-05-01T12:00:00.000Z (http://evil.example)",
        ] {
            assert_eq!(
                exprs(SourceFormat::Urls, line),
                Ok(vec!["evil.example/".to_owned()]),
                "{}",
                line.escape_ascii()
            );
        }
    }

    /// Beside another host or URL a wrapped URL stays a column, and the
    /// line's own URL is read as before: ambiguous lines list nothing of
    /// the wrapped one (`paypal.com (http://evil.example/login)` could name
    /// either; neither is listed host-wide).
    #[test]
    fn a_wrapped_url_beside_another_host_or_url_is_an_annotation() {
        for (line, want) in [
            (
                &b"evil.example/login.php (http://bank.example/login)"[..],
                &["evil.example/login.php"][..],
            ),
            (b"evil.example\t(http://bank.example/login)", &["evil.example/"]),
            (b"paypal.com (http://evil.example/login)", &[]),
        ] {
            let got = exprs(SourceFormat::Urls, line).unwrap_or_default();
            let got: Vec<&str> = got
                .iter()
                .map(String::as_str)
                .filter(|e| !e.contains("%20"))
                .collect();
            assert_eq!(got, want, "{}", line.escape_ascii());
        }
    }
}
