//! What a URL entry stands for: its most specific expression (and that of
//! the line as written, for a URL written with `&amp;`).

use blocksieve_format::{CanonError, CanonicalForm, HostKind, canonicalize, canonicalize_form};

use super::breadth::{is_host_wide, too_broad};
use super::entry::{Entry, Read, UrlEntry, most_specific};
use super::outcome::reason;
use super::scheme::{authority, strip_scheme_artifacts};
use super::visit::Visit;

/// A URL canonicalized, checked to have an expression and not to block too
/// much: borrowed from `line` when the line is canonical as written.
fn url_canonical(line: &[u8]) -> Result<CanonicalForm<'_>, &'static str> {
    url_canonical_as(line, may_be_defanged(line))
}

/// [`url_canonical`], told whether [`may_be_defanged`] holds for `line`
/// (a URL entry asks it once for its two readings).
fn url_canonical_as(line: &[u8], defanged: bool) -> Result<CanonicalForm<'_>, &'static str> {
    if defanged && let Some(refanged) = refang(line) {
        return url_canonical_owned(&refanged);
    }
    let url = canonicalize_form(strip_scheme_artifacts(line)).map_err(url_error)?;
    not_too_broad(url)
}

/// [`url_canonical`] of a line made here (`&amp;` decoded), owned.
fn url_canonical_owned(line: &[u8]) -> Result<CanonicalForm<'static>, &'static str> {
    let refanged = refang(line);
    let line = refanged.as_deref().unwrap_or(line);
    let url = canonicalize(strip_scheme_artifacts(line)).map_err(url_error)?;
    not_too_broad(CanonicalForm::Built(url))
}

fn not_too_broad(url: CanonicalForm<'_>) -> Result<CanonicalForm<'_>, &'static str> {
    // Forbidden host code points (URL Standard, "host parsing") that the
    // Safe Browsing canonicalization keeps: accepted, the entry would be
    // counted as read and match nothing, hiding a misconfigured source
    // from the parse-collapse gate.
    // One pass over the host finds every byte these checks look for.
    let held = host_bytes(url.host());
    if held & ADBLOCK_SYNTAX != 0 {
        return Err(reason::ADBLOCK_SYNTAX_IN_HOST);
    }
    if let Some(reason) = unvisitable_host_holding(url.host(), url.host_kind(), held) {
        return Err(reason);
    }
    if let Some(reason) = too_broad(url.host(), url.host_kind(), is_host_wide(&url)) {
        return Err(reason);
    }
    // Every canonical URL has an expression (the host and path, at least
    // `/`), so none is rejected for lacking one.
    Ok(url)
}

/// The kinds of byte a canonical host is checked for, ORed over the host:
/// one table read a byte, without a branch, where a `match` on the byte
/// and the host's kind, and a `memchr2` before it, cost as much as a third
/// of canonicalizing the host (callgrind, `bench/findings/3-build.md`).
fn host_bytes(host: &[u8]) -> u8 {
    host.iter().fold(0, |held, &b| held | HOST_BYTES[usize::from(b)])
}

/// [`host_bytes`]'s table: `|` and `^` (adblock syntax), `<`, `>` and `%`
/// (forbidden in any host), `[` and `]` (outside an IPv6 address).
const HOST_BYTES: [u8; 256] = {
    let mut table = [0; 256];
    table[b'|' as usize] = ADBLOCK_SYNTAX;
    table[b'^' as usize] = ADBLOCK_SYNTAX;
    table[b'<' as usize] = FORBIDDEN_ALWAYS;
    table[b'>' as usize] = FORBIDDEN_ALWAYS;
    table[b'%' as usize] = FORBIDDEN_ALWAYS;
    table[b'[' as usize] = FORBIDDEN_OUTSIDE_IPV6;
    table[b']' as usize] = FORBIDDEN_OUTSIDE_IPV6;
    table[b',' as usize] = NOT_IN_A_NAME;
    table[b';' as usize] = NOT_IN_A_NAME;
    table
};
const ADBLOCK_SYNTAX: u8 = 1;
const FORBIDDEN_ALWAYS: u8 = 2;
const FORBIDDEN_OUTSIDE_IPV6: u8 = 4;
/// `,` and `;`, which the URL Standard leaves in a host but no domain name
/// holds (a column joined to the host: `evil.example,2020-01-01`).
const NOT_IN_A_NAME: u8 = 8;

/// Why no browser visits the canonical `host` (of kind `kind`), if none
/// does: it holds `<`, `>`, brackets outside an IPv6 address
/// (`evil[.]example`, a defanged form `refang` did not know), or `%`,
/// which the canonical form writes only for an escaped byte no host may
/// hold (white space, a control, `#`, `%`, a byte IDNA refused). Accepted,
/// such an entry would be counted as read and match nothing.
pub(super) fn unvisitable_host(host: &[u8], kind: HostKind) -> Option<&'static str> {
    unvisitable_host_holding(host, kind, host_bytes(host))
}

/// [`unvisitable_host`], given `held`, [`host_bytes`] of `host`.
fn unvisitable_host_holding(host: &[u8], kind: HostKind, held: u8) -> Option<&'static str> {
    if kind == HostKind::Domain && ends_in_a_number(host) {
        return Some(reason::ENDS_IN_A_NUMBER);
    }
    // No domain name holds a comma or semicolon: a column joined to the
    // host, an entry no visit reaches (as a domain entry of it is refused).
    if kind == HostKind::Domain && held & NOT_IN_A_NAME != 0 {
        return Some(reason::NOT_A_HOST_NAME);
    }
    let forbidden = if kind == HostKind::Ipv6 {
        FORBIDDEN_ALWAYS
    } else {
        FORBIDDEN_ALWAYS | FORBIDDEN_OUTSIDE_IPV6
    };
    if held & forbidden == 0 {
        return None;
    }
    // `%80` and above: a non-ASCII character this canonicalizer's IDNA
    // mapping refused (disallowed, against the bidi rule, or newer than its
    // Unicode table, which a browser with a newer table may take).
    let escaped_non_ascii = host
        .windows(3)
        .any(|w| w[0] == b'%' && matches!(w[1], b'8'..=b'9' | b'A'..=b'F'));
    Some(if escaped_non_ascii {
        reason::IDNA_REFUSED
    } else {
        reason::FORBIDDEN_IN_HOST
    })
}

/// The URL Standard's "ends in a number checker" (host parsing): whether
/// the last label of `host` (a trailing dot aside) is all digits or an
/// IPv4 number (`0x` and hex digits). A browser parses such a host as an
/// IPv4 address, and refuses the URL when that fails; a host this
/// canonicalizer read as an address is not a domain, so every domain
/// that ends in a number is one no browser visits (`1.2.3.256`,
/// `evil.example.09`, `a.0x`; not `evil.example.0x1g`, whose last label
/// is no number).
fn ends_in_a_number(host: &[u8]) -> bool {
    let host = host.strip_suffix(b".").unwrap_or(host);
    let last = host.rsplit(|&b| b == b'.').next().unwrap_or_default();
    if last.is_empty() {
        return false;
    }
    if last.iter().all(u8::is_ascii_digit) {
        return true;
    }
    last.strip_prefix(b"0x")
        .or_else(|| last.strip_prefix(b"0X"))
        .is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit))
}

/// What the `&`s of `line` start: `&amp;` (`.0`), and `&#` (`.1`: an
/// HTML numeric character reference, perhaps). Most lines have no `&` at
/// all, which `memchr` finds (vectorized, where `<[u8]>::contains` reads a
/// word at a time); a window compare at every byte cost a quarter of
/// canonicalizing a URL (callgrind, BENCHMARKS.md row 3). A line with one
/// compares at each `&` only: `memmem::find` built a searcher per line,
/// about 1 % of the parse of the 854k feed, most of whose query strings
/// have an `&`.
fn ampersands(line: &[u8]) -> (bool, bool) {
    let mut found = (false, false);
    for at in memchr::memchr_iter(b'&', line) {
        let rest = line.get(at..).unwrap_or_default();
        found.0 |= rest.starts_with(b"&amp;");
        // A named reference, escaped again or not (`&lt;`, `&amp;lt;`).
        let after = rest.get(1 + 4 * amp_run(rest.get(1..).unwrap_or_default())..);
        found.1 |= rest.starts_with(b"&#") || after.is_some_and(|a| named_reference(a).is_some());
    }
    found
}

/// Whether `name` is a bare IPv6 address (no brackets): `2001:db8::1`.
/// One byte compare for most lines (a scheme's letters stop it).
pub(super) fn is_bare_ipv6(name: &[u8]) -> bool {
    name.len() <= 45
        && name
            .iter()
            .all(|&b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
        && name.contains(&b':')
        && std::str::from_utf8(name).is_ok_and(|s| s.parse::<std::net::Ipv6Addr>().is_ok())
}

/// Whether URL text `line` is an e-mail address: no `scheme://`, a user
/// name and no path (`spoof@bank.example`, a phishing sender's address in
/// a URL list). Read as a URL it is the host after the `@`, which would be
/// listed host-wide: the address's domain, not a page the line names.
fn is_email_address(line: &[u8]) -> bool {
    // Most lines have a scheme: nothing else is looked at.
    !has_scheme(line) && {
        let (authority, path) = authority(line);
        !path && authority.contains(&b'@')
    }
}

/// Whether URL text `line` has text joined before a scheme in its
/// authority: its first `/`, `\\`, `?` or `#` starts the `//` of a `://`
/// after text that is no scheme (`2024-05-01,http://…`, `href=http://…`, `{"url":"http://…`).
/// Read as a URL without a scheme, that text would be its host (and
/// `//e1.example/…` its path): an entry no visit matches, counted as read.
/// A defanged scheme (`hxxp[://]…`) is looked at refanged. Most lines
/// are scanned up to their scheme's `:/` only.
fn text_before_scheme(line: &[u8], defanged: bool) -> bool {
    let refanged = defanged.then(|| refang(line)).flatten();
    let text = refanged.as_deref().unwrap_or(line);
    let end = text
        .iter()
        .position(|&b| matches!(b, b'/' | b'\\' | b'?' | b'#'))
        .unwrap_or(text.len());
    let (authority, rest) = text.split_at(end);
    authority.ends_with(b":") && rest.starts_with(b"//") && !has_scheme(text)
}

/// The bare IPv6 address a URL line starts with, when a path or nothing
/// follows it (`2001:db8::1`, `2001:db8::1/login`). One byte compare for
/// most lines (a scheme's letters stop it).
fn bare_ipv6_host(line: &[u8]) -> Option<&[u8]> {
    let len = line
        .iter()
        .take_while(|&&b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
        .count();
    let host = line.get(..len)?;
    (matches!(line.get(len), None | Some(b'/')) && is_bare_ipv6(host)).then_some(host)
}

pub(super) fn url_entry(line: &[u8]) -> Result<UrlEntry<'_>, &'static str> {
    let mut entry = url_readings(line)?;
    // A wildcard first label (`*.evil.example/p`, `http://*.evil.example/`),
    // as blocklists write "every subdomain": the host no visit has, read
    // as the name after it, whose expressions every subdomain's visit
    // checks (as a `domains` line `*.evil.example` is read).
    if entry.first.host().starts_with(b"*.") {
        let first = unwildcarded(&entry.first)?;
        let others = entry.others.iter().filter_map(|o| unwildcarded(o).ok()).collect();
        entry = UrlEntry { first, others };
    }
    // An IP address host: every reading also on its other canonical host
    // (`other_ip_host`), so that `http://[::102:304]/a?x=1&amp;y=2` is
    // listed as `[::1.2.3.4]/a?x=1&y=2` too, and `http://1.2.3.4/login`
    // as `[::ffff:1.2.3.4]/login`.
    if matches!(entry.first.host_kind(), HostKind::Ipv4 | HostKind::Ipv6) {
        let other: Vec<_> = std::iter::once(&entry.first)
            .chain(&entry.others)
            .filter_map(other_ip_reading)
            .collect();
        for reading in other {
            push_new(&entry.first, &mut entry.others, reading);
        }
    }
    Ok(entry)
}

/// `url` with its host's wildcard first label (`*.`) removed, checked as
/// any reading is (`*.com` is too broad).
fn unwildcarded(url: &CanonicalForm<'_>) -> Result<CanonicalForm<'static>, &'static str> {
    let host = url.host().strip_prefix(b"*.").unwrap_or(url.host());
    let rest = url
        .most_specific_expression()
        .get(url.host().len()..)
        .unwrap_or_default();
    url_canonical_owned(&[host, rest].concat())
}

/// [`url_entry`]'s readings but for an IPv6 host's other form.
fn url_readings(line: &[u8]) -> Result<UrlEntry<'_>, &'static str> {
    // A bare IPv6 address (`2001:db8::1`, as indicator lists write one
    // beside URLs) is the host `[…]`; as written, a URL parser reads the
    // host `2001` with a port, and the entry would list another address.
    if let Some(host) = bare_ipv6_host(line) {
        let path = line.get(host.len()..).unwrap_or_default();
        let first = url_canonical_owned(&[&b"["[..], host, b"]", path].concat())?;
        return Ok(UrlEntry {
            first,
            others: Vec::new(),
        });
    }
    let defanged = may_be_defanged(line);
    if text_before_scheme(line, defanged) {
        return Err(reason::TEXT_BEFORE_SCHEME);
    }
    let written = url_canonical_as(line, defanged)?;
    // (A line canonical as written has no user name: only others are
    // looked at.)
    if matches!(written, CanonicalForm::Built(_)) {
        if is_email_address(line) {
            return Err(reason::EMAIL_ADDRESS);
        }
        if written.host_kind() == HostKind::Ipv4 && !has_scheme(line) && is_short_number(line) {
            return Err(reason::NUMBER_NOT_ADDRESS);
        }
    }
    let mut others = Vec::new();
    if defanged {
        others.extend(refanged_path_reading(line, &written));
    }
    let (amp, reference) = ampersands(line);
    let plain = others.len();
    // Most lines have none of these: the rarer readings are not looked for.
    if amp || reference || defanged {
        rarer_readings(line, &written, (amp, reference, defanged), &mut others);
    }
    if !amp {
        return Ok(UrlEntry {
            first: written,
            others,
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
            others,
        });
    };
    readings.reverse();
    let rarer = others.split_off(plain);
    let mut others: Vec<CanonicalForm<'_>> = readings.into_iter().chain([written]).chain(others).collect();
    for r in rarer {
        push_new(&first, &mut others, r);
    }
    Ok(UrlEntry { first, others })
}

/// The readings of a URL line with `&amp;`, `&#` or a defanged form (the
/// three flags: which of them), added to `others` when new: its HTML numeric character
/// references decoded ([`numeric_references_reading`]), and, for a line
/// with two artifacts the readings undo one at a time (a defanged URL with
/// `&amp;`, an embedded-IPv4 host with a defanged path), all of them undone
/// together ([`undone_reading`]): the page a browser visits.
#[inline(never)]
fn rarer_readings(
    line: &[u8],
    written: &CanonicalForm<'_>,
    (amp, reference, defanged): (bool, bool, bool),
    others: &mut Vec<CanonicalForm<'_>>,
) {
    // A reference escaped again (`&amp;#61;`) is one once `&amp;` is decoded.
    if (reference || amp && memchr::memchr(b'#', line).is_some())
        && let Some(r) = numeric_references_reading(line, written)
    {
        push_new(written, others, r);
    }
    let escaped = amp || reference;
    let ipv6 = written.host_kind() == HostKind::Ipv6 && written.host().contains(&b'.');
    if (escaped && (defanged || ipv6) || defanged && ipv6)
        && let Some(r) = undone_reading(line)
        && same_host(&r, written)
    {
        push_new(written, others, r);
    }
}

/// Adds `reading` to `others` unless it reads as `first` or one of them.
fn push_new<'a>(first: &CanonicalForm<'_>, others: &mut Vec<CanonicalForm<'a>>, reading: CanonicalForm<'a>) {
    let e = reading.most_specific_expression();
    if e != first.most_specific_expression() && others.iter().all(|o| o.most_specific_expression() != e) {
        others.push(reading);
    }
}

/// `line` with every artifact a reading of [`url_entry`] undoes undone
/// together: `&amp;` decoded at every level, then HTML numeric character
/// references, every defanged dot refanged (path and query too) and the
/// scheme's; an IPv6 host with an embedded IPv4 address in hexadecimal.
fn undone_reading(line: &[u8]) -> Option<CanonicalForm<'static>> {
    let mut text = decode_amp_levels(line, deepest_amp_run(line));
    if let Some(decoded) = decode_numeric_references(&text) {
        text = decoded;
    }
    if let Some(refanged) = refang(&text) {
        text = refanged;
    }
    let mut whole = Vec::with_capacity(text.len());
    refang_dots(&text, &mut whole, |_| false);
    let url = url_canonical_owned(&whole).ok()?;
    // As browsers send it: the hexadecimal host of a dotted one.
    match other_ip_reading(&url) {
        Some(hex) if url.host_kind() == HostKind::Ipv6 && url.host().contains(&b'.') => Some(hex),
        _ => Some(url),
    }
}

/// For a line holding HTML numeric character references (`&#61;`,
/// `&#x3D;`: a URL copied from a page's source or an e-mail's HTML, as
/// `&amp;` is): the URL with them decoded (after every `&amp;`, so
/// `&amp;#61;` is `=` too), which is the page a browser visits from that
/// link (HTML Standard §13.2.5.80, "numeric character reference end
/// state"), when it reads differently from `written`. As written, the `#`
/// of `?code&#61;1` starts a fragment, and the entry lists `?code&`. A
/// reference to no character (zero, a surrogate, past U+10FFFF) is left
/// as written; `&#` without digits and `;` (`?a=1&#top`) is no reference.
fn numeric_references_reading(line: &[u8], written: &CanonicalForm<'_>) -> Option<CanonicalForm<'static>> {
    // (Its caller looks for `&#`, or `&amp;` and a `#`, first.)
    let decoded = match deepest_amp_run(line) {
        0 => decode_numeric_references(line)?,
        levels => decode_numeric_references(&decode_amp_levels(line, levels))?,
    };
    let url = url_canonical_owned(&decoded).ok()?;
    (same_host(&url, written) && url.most_specific_expression() != written.most_specific_expression())
        .then_some(url)
}

/// Whether `reading` is on the host `written` names (or on its other
/// form, [`other_ip_host`]). A reading that decodes an artifact is listed
/// only then: decoded, `user&#64;bank.example` is a user name and the host
/// `bank.example`, which the line, whose host is `user&`, does not name.
fn same_host(reading: &CanonicalForm<'_>, written: &CanonicalForm<'_>) -> bool {
    reading.host() == written.host()
        || other_ip_host(written.host()).is_some_and(|other| reading.host() == other.as_bytes())
}

/// `line` with every well-formed numeric character reference (`&#` then
/// decimal digits, or `x` and hex digits, then `;`) replaced by its
/// character in UTF-8; `None` when it holds none.
fn decode_numeric_references(line: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(line.len());
    let mut rest = line;
    let mut decoded = false;
    while let Some(at) = memchr::memchr(b'&', rest) {
        let (head, tail) = rest.split_at(at);
        out.extend_from_slice(head);
        match numeric_reference(tail) {
            Some((c, len)) => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                rest = tail.get(len..).unwrap_or_default();
                decoded = true;
            }
            None => {
                out.push(b'&');
                rest = tail.get(1..).unwrap_or_default();
            }
        }
    }
    out.extend_from_slice(rest);
    decoded.then_some(out)
}

/// The character of the numeric character reference `text` starts with,
/// and its length: `&#61;` is `=`, 5 bytes. At most 8 digits. Also a named
/// one of [`named_reference`]: `&lt;` is `<`, 4 bytes.
fn numeric_reference(text: &[u8]) -> Option<(char, usize)> {
    if let Some(named) = text.strip_prefix(b"&").and_then(named_reference) {
        return Some(named);
    }
    let body = text.strip_prefix(b"&#")?;
    let (digits, radix, skip) = match body.first() {
        Some(b'x' | b'X') => (body.get(1..)?, 16, 3),
        _ => (body, 10, 2),
    };
    let len = digits.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    let number = digits.get(..len).filter(|d| (1..=8).contains(&d.len()))?;
    if digits.get(len) != Some(&b';') {
        return None;
    }
    let value = u32::from_str_radix(std::str::from_utf8(number).ok()?, radix).ok()?;
    let c = windows_1252(value).or_else(|| char::from_u32(value).filter(|&c| c != '\0'))?;
    Some((c, skip + len + 1))
}

/// The named character references, besides `&amp;`, that HTML escaping
/// writes in a URL (`&lt;`, `&gt;`, `&quot;`, `&apos;`, `&nbsp;`): the
/// character `text` (after its `&`) names, and the reference's length with
/// its `&`.
fn named_reference(text: &[u8]) -> Option<(char, usize)> {
    const NAMED: [(&[u8], char); 5] = [
        (b"lt;", '<'),
        (b"gt;", '>'),
        (b"quot;", '"'),
        (b"apos;", '\''),
        (b"nbsp;", '\u{a0}'),
    ];
    NAMED
        .iter()
        .find(|(name, _)| text.starts_with(name))
        .map(|&(name, c)| (c, name.len() + 1))
}

/// The character HTML makes of a numeric reference to 0x80–0x9F (C1
/// controls): the Windows-1252 one of that byte (HTML Standard,
/// "numeric character reference end state"; `&#150;` is `–`); `None`
/// for any other value, and for the five bytes Windows-1252 leaves
/// undefined (kept as the control).
fn windows_1252(value: u32) -> Option<char> {
    const C1: [char; 32] = [
        '\u{20AC}', '\u{81}', '\u{201A}', '\u{192}', '\u{201E}', '\u{2026}', '\u{2020}', '\u{2021}',
        '\u{2C6}', '\u{2030}', '\u{160}', '\u{2039}', '\u{152}', '\u{8D}', '\u{17D}', '\u{8F}', '\u{90}',
        '\u{2018}', '\u{2019}', '\u{201C}', '\u{201D}', '\u{2022}', '\u{2013}', '\u{2014}', '\u{2DC}',
        '\u{2122}', '\u{161}', '\u{203A}', '\u{153}', '\u{9D}', '\u{17E}', '\u{178}',
    ];
    let index = usize::try_from(value.checked_sub(0x80)?).ok()?;
    C1.get(index).copied()
}

/// For a defanged URL ([`refang`]) whose path or query holds defanged dots
/// too (`hxxps[:]//evil[.]example/login[.]php`, a feed that defangs every
/// dot): the URL with those refanged as well, which is the page a browser
/// visits, when it reads differently from `written` (the line refanged in
/// its scheme and host only: a path may hold `[.]`, and that reading is
/// kept). A page on the host the line names either way.
fn refanged_path_reading(line: &[u8], written: &CanonicalForm<'_>) -> Option<CanonicalForm<'static>> {
    let refanged = refang(line)?;
    let mut whole = Vec::with_capacity(refanged.len());
    if !refang_dots(&refanged, &mut whole, |_| false).1 {
        return None;
    }
    let url = url_canonical_owned(&whole).ok()?;
    (url.most_specific_expression() != written.most_specific_expression()).then_some(url)
}

/// The other canonical host an agent may compute for the IPv6 address in
/// `host`, when it differs: the Safe Browsing canonical form keeps an
/// embedded IPv4 address as written (RFC 5952 §5, and this project's
/// conformance vectors), so one address has two canonical hosts,
/// `[64:ff9b::1.2.3.4]` and `[64:ff9b::102:304]`. A browser serializes
/// every IPv6 address in hexadecimal (URL Standard, "IPv6 serializer"),
/// which is the other host of one written dotted; a caller handing the
/// agent a URL as written may use the dotted one, the other host of one
/// written in hexadecimal (`[::102:304]`, `[2001:db8::1]` as
/// `[2001:db8::0.0.0.1]`). `None` for every other host, and for an
/// IPv4-mapped address (`::ffff:1.2.3.4`), dotted either way.
fn other_ipv6_host(host: &[u8]) -> Option<String> {
    let inner = host.strip_prefix(b"[")?.strip_suffix(b"]")?;
    let addr: std::net::Ipv6Addr = std::str::from_utf8(inner).ok()?.parse().ok()?;
    if let Some(v4) = addr.to_ipv4_mapped() {
        return Some(v4.to_string());
    }
    let [a, b, c, d, e, f, g, h] = addr.segments();
    let other = if host.contains(&b'.') {
        format!("[{a:x}:{b:x}:{c:x}:{d:x}:{e:x}:{f:x}:{g:x}:{h:x}]")
    } else {
        let [w, x, y, z] = addr.octets()[12..] else {
            return None;
        };
        format!("[{a:x}:{b:x}:{c:x}:{d:x}:{e:x}:{f:x}:{w}.{x}.{y}.{z}]")
    };
    let url = canonicalize(other.as_bytes()).ok()?;
    (url.host().as_bytes() != host).then(|| url.host().to_owned())
}

/// The other canonical host an agent may compute for the IP address host
/// `host`, when it differs: for an IPv6 address, [`other_ipv6_host`]; for
/// an IPv4 address, the IPv4-mapped IPv6 address (`[::ffff:1.2.3.4]`, RFC
/// 4291 §2.5.5.2), which the Safe Browsing canonicalization keeps as a host
/// of its own but which a browser connects to as the IPv4 address it holds
/// (Chromium loads `http://[::ffff:127.0.0.1]:8080/` from a server on
/// `127.0.0.1`): a page listed on its IPv4 address was answered safe when
/// visited so. An IPv4-mapped host's other is the IPv4 address. `None` for
/// every other host.
pub(super) fn other_ip_host(host: &[u8]) -> Option<String> {
    if host.first() == Some(&b'[') {
        return other_ipv6_host(host);
    }
    let v4: std::net::Ipv4Addr = std::str::from_utf8(host).ok()?.parse().ok()?;
    Some(format!("[::ffff:{v4}]"))
}

/// [`other_ip_host`]'s reading of a URL entry: the same URL on the other
/// canonical host of its IP address.
fn other_ip_reading(url: &CanonicalForm<'_>) -> Option<CanonicalForm<'static>> {
    if !matches!(url.host_kind(), HostKind::Ipv4 | HostKind::Ipv6) {
        return None;
    }
    let host = other_ip_host(url.host())?;
    let rest = url.most_specific_expression().get(url.host().len()..)?;
    url_canonical_owned(&[host.as_bytes(), rest].concat()).ok()
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

/// Whether the host `text` starts with (up to a `/`, `\`, `?`, `#` or `:`) is
/// a number of fewer than four dotted parts, decimal or `0x` hexadecimal
/// (`1234`, `1.5`, `10` of `10:00`, `0x7f000001`): an IPv4 address to a
/// URL parser, but written so without a scheme it is a count, a version
/// or a time in the wrong column far more often than an address
/// ([`reason::NUMBER_NOT_ADDRESS`]).
pub(super) fn is_short_number(text: &[u8]) -> bool {
    let end = text
        .iter()
        .position(|b| matches!(b, b'/' | b'\\' | b'?' | b'#' | b':'))
        .unwrap_or(text.len());
    ipv4_number_parts(text.get(..end).unwrap_or_default()).is_some_and(|parts| parts < 4)
}

/// How many dotted parts `host` has when every one is a number, decimal
/// or `0x` hexadecimal, as the URL Standard's IPv4 parser (and
/// `inet_aton`) reads them (`127.1`, `0x7f000001`, `127.000.000.001`); a
/// trailing dot aside. `None` for anything else.
pub(super) fn ipv4_number_parts(host: &[u8]) -> Option<usize> {
    let host = host.strip_suffix(b".").unwrap_or(host);
    let number = |part: &[u8]| match part.strip_prefix(b"0x").or_else(|| part.strip_prefix(b"0X")) {
        Some(hex) => hex.iter().all(u8::is_ascii_hexdigit),
        None => !part.is_empty() && part.iter().all(u8::is_ascii_digit),
    };
    (!host.is_empty() && host.split(|&b| b == b'.').all(number)).then(|| host.split(|&b| b == b'.').count())
}

/// Whether `text` starts with a URL scheme and `://` (`http://`,
/// `hxxp://` too: any scheme, RFC 3986 §3.1).
pub(super) fn has_scheme(text: &[u8]) -> bool {
    let Some(colon) = memchr::memchr(b':', text) else {
        return false;
    };
    let (scheme, rest) = text.split_at(colon);
    rest.starts_with(b"://")
        && scheme.first().is_some_and(u8::is_ascii_alphabetic)
        && scheme
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

/// The ideographic and fullwidth dots IDNA maps to `.` (UTS #46): a host
/// written with them is a dotted name.
pub(super) const UNICODE_DOTS: [&[u8]; 3] = [
    "\u{3002}".as_bytes(),
    "\u{ff0e}".as_bytes(),
    "\u{ff61}".as_bytes(),
];

/// How defanged URLs write a dot (lower case; compared ignoring case).
pub(super) const DEFANGED_DOTS: [&[u8]; 6] = [b"[.]", b"(.)", b"{.}", b"[dot]", b"(dot)", b"{dot}"];

/// Whether `line` holds a character every defanged form [`refang`] reads
/// has (`[`, `(` or `{`): most lines hold none, and are read once for it.
fn may_be_defanged(line: &[u8]) -> bool {
    memchr::memchr3(b'[', b'(', b'{', line).is_some()
}

/// A defanged URL made visitable again, when `line` is one: `[.]`, `(.)`,
/// `{.}`, `[dot]`, `(dot)` and `{dot}` in the host become `.`, `[:]`
/// or `[://]` after the scheme become `:` or `://` (`hxxp[:]//evil[.]example/`;
/// the `hxxp` scheme itself changes no expression), and `[:]` in the
/// authority `:` (`evil[.]example[:]8080`). Threat-intelligence
/// feeds write URLs so, to keep them from being clicked; as written, the
/// host holds brackets no browser accepts, and the entry would match
/// nothing. Only the scheme and host are touched: a path or query keeps
/// its brackets. `None` for every other line (one `memchr` for most).
pub(super) fn refang(line: &[u8]) -> Option<Vec<u8>> {
    if !may_be_defanged(line) {
        return None;
    }
    const SEPARATORS: [(&[u8], &[u8]); 2] = [(b"[://]", b"://"), (b"[:]", b":")];
    let mut out = Vec::with_capacity(line.len());
    let mut rest = line;
    // The scheme, when the line has one (letters, then a separator), and
    // the slashes before the host.
    let mut changed = false;
    let letters = rest
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
        .count();
    let after = rest.get(letters..).unwrap_or_default();
    let separator = SEPARATORS.iter().find(|(from, _)| after.starts_with(from));
    if letters > 0
        && let Some((from, to)) = separator
    {
        out.extend_from_slice(rest.get(..letters).unwrap_or_default());
        out.extend_from_slice(to);
        rest = after.get(from.len()..).unwrap_or_default();
        changed = true;
    } else if letters > 0 && after.starts_with(b"://") {
        out.extend_from_slice(rest.get(..letters + 3).unwrap_or_default());
        rest = after.get(3..).unwrap_or_default();
    } else if letters > 0 && matches!(after, [b':', b'/' | b'\\', ..]) {
        // Fewer slashes, or backslashes (`hxxp:/evil[.]example/`).
        out.extend_from_slice(rest.get(..letters + 1).unwrap_or_default());
        rest = after.get(1..).unwrap_or_default();
    }
    let slashes = rest.iter().take_while(|&&b| b == b'/' || b == b'\\').count();
    out.extend_from_slice(rest.get(..slashes).unwrap_or_default());
    rest = rest.get(slashes..).unwrap_or_default();
    // The authority: its dots, and a `[:]` before a port (or in userinfo),
    // which no IPv6 address holds.
    let authority = rest
        .iter()
        .position(|&b| matches!(b, b'/' | b'\\' | b'?' | b'#'))
        .unwrap_or(rest.len());
    let (mut authority, tail) = rest.split_at(authority);
    let mut dots = false;
    loop {
        let colon = memchr::memmem::find(authority, b"[:]");
        let part = authority
            .get(..colon.unwrap_or(authority.len()))
            .unwrap_or_default();
        dots |= refang_dots(part, &mut out, |_| false).1;
        let Some(at) = colon else { break };
        out.push(b':');
        changed = true;
        authority = authority.get(at + 3..).unwrap_or_default();
    }
    out.extend_from_slice(tail);
    (changed || dots).then_some(out)
}

/// Copies `bytes` to `out` up to the first byte `stop` takes (or the end),
/// each of [`DEFANGED_DOTS`] as `.`: what is left of `bytes`, and whether a
/// dot was refanged.
pub(super) fn refang_dots<'a>(
    mut bytes: &'a [u8],
    out: &mut Vec<u8>,
    stop: impl Fn(u8) -> bool,
) -> (&'a [u8], bool) {
    let mut changed = false;
    while let Some(&b) = bytes.first() {
        if stop(b) {
            break;
        }
        let dot = DEFANGED_DOTS
            .iter()
            .find(|d| bytes.get(..d.len()).is_some_and(|r| r.eq_ignore_ascii_case(d)));
        match dot {
            Some(d) => {
                out.push(b'.');
                bytes = bytes.get(d.len()..).unwrap_or_default();
                changed = true;
            }
            None => {
                out.push(b);
                bytes = bytes.get(1..).unwrap_or_default();
            }
        }
    }
    (bytes, changed)
}

/// A URL entry with one reading.
pub(super) fn read_url(text: &[u8], v: &mut impl Visit) {
    match v.canonicalizing(|| url_entry(text)) {
        Ok(entry) => v.accepted(&[url_read(text, entry)]),
        Err(reason) => v.rejected(text, reason),
    }
}

/// The reading of URL `text` (its text shown without the scheme artifacts
/// [`strip_scheme_artifacts`] removes, made only when a reading is shown).
pub(super) fn url_read<'a>(text: &'a [u8], entry: UrlEntry<'a>) -> Read<'a> {
    Read {
        text,
        entry: Entry::Url(entry),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::SourceFormat;
    use crate::sources::reason;
    use crate::sources::tests::{collect, exprs, first_expr, hashes, read_one};

    /// The expressions an agent checks for a visit to `url`.
    fn expressions(url: &str) -> Vec<String> {
        blocksieve_format::canonicalize(url)
            .unwrap()
            .expressions()
            .map(|e| e.as_str().to_owned())
            .collect()
    }

    #[test]
    fn an_amp_entity_is_found_at_any_ampersand_and_only_whole() {
        let amp = |line: &[u8]| super::ampersands(line).0;
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

    /// A column joined to a URL before its scheme (`2024-05-01,http://…`,
    /// `href=http://…`, `phish;http://…`, a JSON line `{"url":"http://…"}`:
    /// a comma-separated export or a JSON document read as `urls`, a feed
    /// whose layout changed) was read as a URL without a scheme whose host
    /// is that text (`2024-05-01,http`, path `/e1.example/login`): accepted,
    /// counted as read and matching no visit. Every URL of such a feed was
    /// dropped with nothing rejected for the collapse gate to see, and as
    /// many entries as before for the shrink gate.
    #[test]
    fn regression_text_joined_before_a_scheme_is_no_host() {
        let lines: [&[u8]; 5] = [
            b"2024-05-01,http://e1.example/login",
            b"href=http://e2.example/login",
            b"phish;http://e3.example/login",
            br#"{"url":"http://e4.example/login"}"#,
            b"7,https://e5.example/login,online",
        ];
        for line in lines {
            let (out, report) = collect(line, SourceFormat::Urls);
            assert_eq!(
                (out.len(), report.accepted, report.rejected_total()),
                (0, 0, 1),
                "{}: {report:?}",
                line.escape_ascii()
            );
            assert_eq!(
                report.rejected.keys().next().map(String::as_str),
                Some(reason::TEXT_BEFORE_SCHEME),
                "{}",
                line.escape_ascii()
            );
        }
        // The same text after the authority is a URL's own: read as before.
        for (line, expected) in [
            (
                &b"evil.example/go?u=http://e6.example/x"[..],
                "evil.example/go?u=http://e6.example/x",
            ),
            (
                b"http://evil.example/a,http://e7.example/x",
                "evil.example/a,http:/e7.example/x",
            ),
            (b"hxxp[://]evil[.]example/p", "evil.example/p"),
            (b"http://https://e8.example/p", "e8.example/p"),
        ] {
            assert_eq!(
                exprs(SourceFormat::Urls, line).unwrap(),
                [expected],
                "{}",
                line.escape_ascii()
            );
        }
    }

    /// A column joined to a URL's host by a comma or a semicolon
    /// (`evil.example,2020-01-01`: a `host,date` export read as `urls`)
    /// was listed host-wide on the host `evil.example,2020-01-01`, which no
    /// domain name is (a `domains` line of it is refused as not a host
    /// name): accepted, counted as read and matching no visit, so a feed
    /// of such rows published none of its hosts, unseen by the gates.
    #[test]
    fn regression_a_column_joined_to_a_host_is_no_host() {
        for line in [
            &b"evil.example,2020-01-01"[..],
            b"http://evil.example,2020-01-01",
            b"evil.example;phishing",
            b"evil.example,2020-01-01/login",
        ] {
            let (out, report) = collect(line, SourceFormat::Urls);
            assert_eq!(
                (out.len(), report.accepted, report.rejected_total()),
                (0, 0, 1),
                "{}: {report:?}",
                line.escape_ascii()
            );
        }
        // In a path or query, commas and semicolons are a URL's own.
        assert_eq!(
            exprs(SourceFormat::Urls, b"http://evil.example/a,b;c?d=1,2").unwrap(),
            ["evil.example/a,b;c?d=1,2"]
        );
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

    /// A URL copied from HTML with a numeric character reference
    /// (`?code&#61;…`, a line of the union feed) listed only `?code&`
    /// (the `#` read as a fragment), which the page a browser visits from
    /// that link (`?code=…`) does not match: the decoded URL is listed too.
    #[test]
    fn regression_numeric_character_references_are_also_read_decoded() {
        let e = |line: &[u8]| exprs(SourceFormat::Urls, line).unwrap();
        assert_eq!(
            e(b"http://by0556.customervoice360.com/uc/project_manager/2ad5/?code&#61;5b5e67b873d063c3"),
            [
                "by0556.customervoice360.com/uc/project_manager/2ad5/?code&",
                "by0556.customervoice360.com/uc/project_manager/2ad5/?code=5b5e67b873d063c3",
            ]
        );
        assert_eq!(
            e(b"http://a.example/?x=1&#038;y=2&#x3D;3&#X2b;"),
            ["a.example/?x=1&", "a.example/?x=1&y=2=3+"]
        );
        // Escaped again (`&amp;#61;`): `&amp;` decoded first.
        assert_eq!(
            e(b"http://b.example/?x&amp;#61;1"),
            ["b.example/?x&", "b.example/?x&amp;", "b.example/?x=1"]
        );
        // A character past ASCII, as a browser sends it; 0x80-0x9F as
        // Windows-1252 (HTML).
        assert_eq!(e(b"http://c.example/&#233;"), ["c.example/&", "c.example/%C3%A9"]);
        assert_eq!(
            e(b"http://c.example/a&#150;b"),
            ["c.example/a&", "c.example/a%E2%80%93b"]
        );
        assert_eq!(
            e(b"http://c.example/a&#x81;b"),
            ["c.example/a&", "c.example/a%C2%81b"]
        );
        // A reference that would move the host (`&#64;` is `@`): not read.
        assert_eq!(
            e(b"http://cassia.martins&#64;bank.example/"),
            ["cassia.martins&/"]
        );
        assert_eq!(e(b"cassia.martins&#64;bank.example"), ["cassia.martins&/"]);
        // No reference: `&#` without digits and `;`, zero, a surrogate,
        // past U+10FFFF, more than 8 digits.
        for line in [
            &b"https://d.example/v.php?s=1&#no-back-button=1"[..],
            b"http://d.example/?a&#61",
            b"http://d.example/?a&#0;",
            b"http://d.example/?a&#xD800;",
            b"http://d.example/?a&#x110000;",
            b"http://d.example/?a&#000000061;",
        ] {
            assert_eq!(e(line).len(), 1, "{}", line.escape_ascii());
        }
    }

    /// A wildcard first label in a URL's host (`*.evil.example/p`) was
    /// listed as the host `*.evil.example`, which no visit has.
    #[test]
    fn regression_a_wildcard_label_in_a_url_host_lists_the_name_after_it() {
        for (line, expected) in [
            (&b"*.evil.example/p"[..], "evil.example/p"),
            (b"http://*.evil.example/", "evil.example/"),
            (
                b"https://*.evil.example:8443/dl/x.exe?a=1",
                "evil.example/dl/x.exe?a=1",
            ),
            (b"*.evil.example", "evil.example/"),
            (b"hxxp://*.evil[.]example/p", "evil.example/p"),
        ] {
            let published = exprs(SourceFormat::Urls, line).unwrap();
            assert_eq!(published[0], expected, "{}", line.escape_ascii());
            assert!(
                expressions(&format!("http://a.b.{expected}")).contains(&expected.to_owned()),
                "{expected}"
            );
        }
        assert_eq!(
            exprs(SourceFormat::Urls, b"*.com"),
            Err(reason::PUBLIC_SUFFIX_ICANN)
        );
    }

    /// A defanged colon before a port (`evil[.]example[:]8080`) was left
    /// as written: the host held brackets, and the line was refused.
    #[test]
    fn regression_a_defanged_colon_in_the_authority_is_refanged() {
        for (line, expected) in [
            (&b"hxxp://evil[.]example[:]8080/p"[..], "evil.example/p"),
            (b"hxxp[:]//evil[.]example[:]8080/p?q=[:]", "evil.example/p?q=[:]"),
            (b"evil[.]example[:]443/login", "evil.example/login"),
            (b"http://u[:]pw@evil[.]example/p", "evil.example/p"),
        ] {
            assert_eq!(
                first_expr(SourceFormat::Urls, line),
                Ok(expected.to_owned()),
                "{}",
                line.escape_ascii()
            );
        }
        // An IPv6 address keeps its brackets.
        assert_eq!(
            exprs(SourceFormat::Urls, b"http://[::1]:8080/p"),
            Err(reason::LOOPBACK)
        );
    }

    /// A URL copied from HTML with a named character reference other than
    /// `&amp;` (`&lt;`, `&gt;`, `&quot;`, `&nbsp;`: 245 lines of the shared
    /// URL feeds, `…/1.html?&lt;?php%20echo…?&gt;`, `http://bit.do/fGyww&nbsp;`)
    /// listed only the line as written, which the page a browser visits
    /// from that link (`?%3C?php…?%3E`, `/fGyww%C2%A0`) does not match.
    #[test]
    fn regression_named_character_references_are_also_read_decoded() {
        let visits = [
            (
                &b"https://x.example/1.html?&lt;?php%20echo%20$n;%20?&gt;"[..],
                "https://x.example/1.html?%3C?php%20echo%20$n;%20?%3E",
            ),
            (b"http://bit.do/fGyww&nbsp;", "http://bit.do/fGyww%C2%A0"),
            (
                b"https://y.example/cancel/.dXNl=&quot;",
                "https://y.example/cancel/.dXNl=%22",
            ),
            (b"http://z.example/?a=1&amp;lt;2", "http://z.example/?a=1%3C2"),
            (
                b"http://z.example/?a=&apos;1&apos;",
                "http://z.example/?a=%271%27",
            ),
        ];
        for (line, visit) in visits {
            let published = exprs(SourceFormat::Urls, line).unwrap();
            assert!(
                expressions(visit).iter().any(|e| published.contains(e)),
                "{}: {published:?}",
                line.escape_ascii()
            );
        }
    }

    /// A line with two artifacts that readings undo one at a time (a
    /// defanged URL with `&amp;`, an embedded-IPv4 host with `&amp;` or a
    /// defanged path) listed no reading with both undone, which is the
    /// page a browser visits: it is listed too.
    #[test]
    fn regression_two_artifacts_are_also_undone_together() {
        let e = |line: &[u8]| exprs(SourceFormat::Urls, line).unwrap();
        let cases: [(&[u8], &str); 4] = [
            (
                b"hxxp://evil[.]com/login[.]php?x=1&amp;y=2",
                "evil.com/login.php?x=1&y=2",
            ),
            (
                b"http://[64:ff9b::1.2.3.4]/a?x=1&amp;y=2",
                "[64:ff9b::102:304]/a?x=1&y=2",
            ),
            (b"hxxp://[64:ff9b::1.2.3.4]/a[.]php", "[64:ff9b::102:304]/a.php"),
            (b"hxxp://evil[.]com/a[.]php?code&#61;1", "evil.com/a.php?code=1"),
        ];
        for (line, visited) in cases {
            let listed = e(line);
            assert!(
                listed.iter().any(|l| l == visited),
                "{}: {listed:?}",
                line.escape_ascii()
            );
            let mut distinct = listed.clone();
            distinct.sort();
            distinct.dedup();
            assert_eq!(distinct.len(), listed.len(), "{listed:?}");
        }
    }

    /// An e-mail address on a URL line (`spoof@paypal.com`, or beside a
    /// column: `1.2.3.4 spoof@paypal.com`) was read as a URL whose host is
    /// the address's domain: `paypal.com/` listed host-wide. Refused.
    #[test]
    fn regression_an_email_address_is_not_a_url() {
        for line in [
            &b"spoof@paypal.com"[..],
            b"1.2.3.4 spoof@paypal.com",
            b"2020-01-01\tspoof@paypal.com",
        ] {
            assert_eq!(
                exprs(SourceFormat::Urls, line),
                Err(reason::EMAIL_ADDRESS),
                "{}",
                line.escape_ascii()
            );
        }
        assert_eq!(
            exprs(SourceFormat::Csv, b"spoof@paypal.com"),
            Err(reason::EMAIL_ADDRESS)
        );
        // A user name with a scheme, or before a path, is a URL's.
        assert_eq!(
            exprs(SourceFormat::Urls, b"http://spoof@evil.example").unwrap(),
            ["evil.example/"]
        );
        assert_eq!(
            exprs(SourceFormat::Urls, b"paypal.com@evil.example/login").unwrap(),
            ["evil.example/login"]
        );
    }

    /// A bare IPv6 address in a `urls` line (`2001:db8::1`) listed the
    /// IPv4 address `0.0.7.209` (the host `2001` with a port); it is the
    /// host `[2001:db8::1]`, as the other formats read it.
    #[test]
    fn regression_a_bare_ipv6_address_is_that_host() {
        for format in [SourceFormat::Urls, SourceFormat::Csv] {
            assert_eq!(
                exprs(format, b"2001:db8::1").unwrap(),
                ["[2001:db8::1]/", "[2001:db8::0.0.0.1]/"]
            );
            assert_eq!(
                exprs(format, b"64:ff9b::1.2.3.4").unwrap(),
                ["[64:ff9b::1.2.3.4]/", "[64:ff9b::102:304]/"]
            );
        }
        assert_eq!(
            exprs(SourceFormat::Urls, b"2a01:4f8:c2c:1234::1").unwrap()[0],
            "[2a01:4f8:c2c:1234::1]/"
        );
        // With a path.
        assert_eq!(
            exprs(SourceFormat::Urls, b"2001:db8::1/login").unwrap()[0],
            "[2001:db8::1]/login"
        );
        // Not an address: read as before.
        assert_eq!(
            exprs(SourceFormat::Urls, b"a.example:8080").unwrap(),
            ["a.example/"]
        );
    }

    /// A defanged URL (`hxxp://evil[.]example/`) was accepted as the
    /// expression `evil[.]example/`, which no visit matches; it is read as
    /// the URL it stands for. Brackets elsewhere stay.
    #[test]
    fn defanged_urls_are_read_as_the_urls_they_stand_for() {
        for (line, expression) in [
            (&b"hxxp://evil[.]example/login.php"[..], "evil.example/login.php"),
            (b"hXXps[://]evil(dot)example/", "evil.example/"),
            (b"hxxp[:]//evil{.}example[.]com/a", "evil.example.com/a"),
            (b"http://evil.example/p[.]html", "evil.example/p[.]html"),
        ] {
            assert_eq!(
                exprs(SourceFormat::Urls, line),
                Ok(vec![expression.to_owned()]),
                "{}",
                line.escape_ascii()
            );
        }
        // Dots defanged in the path too (a feed that defangs every dot):
        // also the page a browser visits; the path as written is kept.
        for (line, expressions) in [
            (
                &b"http://evil[DOT]example/a?x=[.]"[..],
                ["evil.example/a?x=[.]", "evil.example/a?x=."],
            ),
            (
                b"evil[.]example/p[.]html",
                ["evil.example/p[.]html", "evil.example/p.html"],
            ),
            (
                b"hxxps[:]//evil[.]example/login(dot)php",
                ["evil.example/login(dot)php", "evil.example/login.php"],
            ),
        ] {
            assert_eq!(
                exprs(SourceFormat::Urls, line),
                Ok(expressions.map(str::to_owned).to_vec()),
                "{}",
                line.escape_ascii()
            );
        }
        // With `&amp;`, every reading is refanged.
        assert_eq!(
            exprs(SourceFormat::Urls, b"hxxp://evil[.]example/p?a=1&amp;b=2"),
            Ok(vec![
                "evil.example/p?a=1&b=2".to_owned(),
                "evil.example/p?a=1&amp;b=2".to_owned()
            ])
        );
    }

    /// A host holding a character no browser accepts in a host is refused
    /// with that reason (it was accepted, matching nothing and counted as
    /// read, which hides a misread source from the parse-collapse gate).
    #[test]
    fn a_host_no_browser_accepts_is_refused_with_a_true_reason() {
        for line in [
            &b"http://evil[x]example/"[..],
            b"http://evil<b>.example/p",
            b"http://evil%20.example/p",
            b"http://a.example%2523/p",
            b"http:///evil<b>.example/p",
        ] {
            assert_eq!(
                exprs(SourceFormat::Urls, line),
                Err(reason::FORBIDDEN_IN_HOST),
                "{}",
                line.escape_ascii()
            );
        }
        // A domain whose last label is a number: browsers parse it as an
        // IPv4 address and refuse the URL (a hosts line that lost its
        // line end, `zzzoolight.co.za0.0.0.0`, is one in a real feed).
        for line in [
            &b"http://zzzoolight.co.za0.0.0.0/"[..],
            b"http://1.2.3.256/x",
            b"http://999.1.1.1/",
            b"evil.example.09/login",
            b"http://evil.example.0x/",
            b"http://evil.example.0XFF./",
        ] {
            assert_eq!(
                exprs(SourceFormat::Urls, line),
                Err(reason::ENDS_IN_A_NUMBER),
                "{}",
                line.escape_ascii()
            );
        }
        // Addresses in any form a browser reads, and labels that only
        // look numeric, are hosts.
        for (line, expression) in [
            (&b"http://0x5d.184.216.34/p"[..], "93.184.216.34/p"),
            (b"http://1572395042/p", "93.184.216.34/p"),
            (b"http://evil.example.0x1g/", "evil.example.0x1g/"),
            (b"http://evil.123a/", "evil.123a/"),
            (b"http://123.evil.example/", "123.evil.example/"),
        ] {
            assert_eq!(
                first_expr(SourceFormat::Urls, line),
                Ok(expression.to_owned()),
                "{}",
                line.escape_ascii()
            );
        }
        // IPv6 brackets, escapes a browser decodes, and an IDN are hosts.
        for (line, expression) in [
            (&b"http://[2001:db8::1]/p"[..], "[2001:db8::1]/p"),
            (b"http://ev%69l.example/p", "evil.example/p"),
            (b"http://fa\xc3\x9f.de/p", "xn--fa-hia.de/p"),
        ] {
            assert_eq!(exprs(SourceFormat::Urls, line).unwrap()[0], expression);
        }
    }

    /// `[64:ff9b::1.2.3.4]` is kept so by the Safe Browsing canonical form,
    /// but a browser visits `[64:ff9b::102:304]`, which an agent checks as
    /// written: both are listed (the hexadecimal one was missing: a false
    /// negative). An IPv4-mapped address (`::ffff:1.2.3.4`) canonicalizes to
    /// the same text either way, and needs no second reading.
    #[test]
    fn an_ipv6_host_with_an_embedded_ipv4_address_is_also_listed_as_browsers_send_it() {
        for (line, written, visited) in [
            (
                "http://[64:ff9b::1.2.3.4]/login",
                "[64:ff9b::1.2.3.4]/login",
                "http://[64:ff9b::102:304]/login",
            ),
            (
                "http://[::192.9.5.5]/ipng",
                "[::192.9.5.5]/ipng",
                "http://[::c009:505]/ipng",
            ),
        ] {
            let got = exprs(SourceFormat::Urls, line.as_bytes()).unwrap();
            assert_eq!(got[0], written);
            let agent = expressions(visited);
            assert!(agent.contains(&got[1]), "{line}: {got:?} against {agent:?}");
        }
        // An IPv4-mapped address: dotted either way, and also the IPv4
        // address it holds.
        assert_eq!(
            exprs(SourceFormat::Urls, b"http://[::ffff:1.2.3.4]/p"),
            Ok(vec!["[::ffff:1.2.3.4]/p".to_owned(), "1.2.3.4/p".to_owned()])
        );
        let agent = expressions("http://[::ffff:102:304]/p");
        assert!(agent.contains(&"[::ffff:1.2.3.4]/p".to_owned()), "{agent:?}");
        for format in [SourceFormat::Domains, SourceFormat::Hosts] {
            let line: &[u8] = if format == SourceFormat::Hosts {
                b"0.0.0.0 64:ff9b::1.2.3.4"
            } else {
                b"64:ff9b::1.2.3.4"
            };
            assert_eq!(
                exprs(format, line),
                Ok(vec![
                    "[64:ff9b::1.2.3.4]/".to_owned(),
                    "[64:ff9b::102:304]/".to_owned()
                ]),
                "{format:?}"
            );
        }
    }

    /// The other direction: an entry in hexadecimal (`[::102:304]`, as
    /// browsers write it and feeds recorded from them list it) was listed
    /// only so, but an agent handed the same page written dotted
    /// (`http://[::1.2.3.4]/login`, by a caller that passes URLs as written)
    /// keeps the dotted host, and answered safe: both hosts are listed.
    #[test]
    fn regression_an_ipv6_host_in_hexadecimal_is_also_listed_dotted() {
        for (line, dotted) in [
            ("http://[::102:304]/login", "http://[::1.2.3.4]/login"),
            ("http://[64:ff9b::102:304]/x", "http://[64:ff9b::1.2.3.4]/x"),
            ("http://[2001:db8::1]/", "http://[2001:db8::0.0.0.1]/"),
            // Every reading, not the one as written alone.
            ("http://[::102:304]/a?x=1&amp;y=2", "http://[::1.2.3.4]/a?x=1&y=2"),
            ("http://[::102:304]/a?x&#61;1", "http://[::1.2.3.4]/a?x=1"),
        ] {
            let listed = exprs(SourceFormat::Urls, line.as_bytes()).unwrap();
            for visited in [line, dotted] {
                assert!(
                    expressions(visited).iter().any(|e| listed.contains(e)),
                    "{visited}: {listed:?}"
                );
            }
        }
        for format in [SourceFormat::Domains, SourceFormat::Hosts] {
            let line: &[u8] = if format == SourceFormat::Hosts {
                b"0.0.0.0 64:ff9b::102:304"
            } else {
                b"64:ff9b::102:304"
            };
            assert_eq!(
                exprs(format, line).unwrap(),
                ["[64:ff9b::102:304]/", "[64:ff9b::1.2.3.4]/"],
                "{format:?}"
            );
        }
    }

    /// A browser connects to an IPv4-mapped IPv6 address as the IPv4
    /// address it holds (Chromium loads `http://[::ffff:127.0.0.1]:8080/`
    /// from a server on `127.0.0.1`) and sends it as `[::ffff:7f00:1]`,
    /// which an agent canonicalizes to the host `[::ffff:127.0.0.1]`, not
    /// `127.0.0.1`: a page listed on its IPv4 address was answered safe
    /// when visited so. An IPv4 host is also listed IPv4-mapped.
    #[test]
    fn regression_an_ipv4_host_is_also_listed_ipv4_mapped() {
        for (line, visited) in [
            ("http://93.184.216.34/login", "http://[::ffff:5db8:d822]/login"),
            (
                "93.184.216.34/a?x=1&amp;y=2",
                "http://[::ffff:5db8:d822]/a?x=1&y=2",
            ),
            ("http://1572395042/p", "http://[::ffff:93.184.216.34]/p"),
        ] {
            let listed = exprs(SourceFormat::Urls, line.as_bytes()).unwrap();
            let checked = expressions(visited);
            assert!(
                checked.iter().any(|e| listed.contains(e)),
                "{visited}: {checked:?} against {listed:?}"
            );
        }
        for (format, line) in [
            (SourceFormat::Domains, &b"93.184.216.34"[..]),
            (SourceFormat::Hosts, b"0.0.0.0 93.184.216.34"),
            (SourceFormat::AdblockHosts, b"||93.184.216.34^"),
        ] {
            assert_eq!(
                exprs(format, line).unwrap(),
                ["93.184.216.34/", "[::ffff:93.184.216.34]/"],
                "{format:?}"
            );
        }
    }

    /// `http:///user:pw@evil.example/` keeps its user name a user name (it
    /// was read as the scheme `user`, refused with an untrue reason), and a
    /// host the IDNA mapping refuses (here the bidi rule: Latin and Arabic
    /// letters in one label, which Chromium refuses too) says so rather
    /// than that no browser accepts it.
    #[test]
    fn extra_slashes_keep_a_user_name_and_an_idna_refusal_says_so() {
        assert_eq!(
            exprs(SourceFormat::Urls, b"http:///user:pw@evil.example/p"),
            Ok(vec!["evil.example/p".to_owned()])
        );
        assert_eq!(
            exprs(SourceFormat::Urls, "http://a\u{870}b.example/".as_bytes()),
            Err(reason::IDNA_REFUSED)
        );
    }
}
