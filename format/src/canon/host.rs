//! Step 7: the canonical host — dots, case, Punycode (UTS #46), and IPv4
//! and IPv6 addresses in their canonical forms.

use std::borrow::Cow;
use std::net::Ipv6Addr;

use super::escape::{Unescape, escape_into, hex_value, push_escaped, unescape_fully};
use super::url::{CanonError, HostKind};

/// Bytes that must not come out of UTS #46 processing of a non-ASCII host:
/// they delimit URL parts or start escapes, so a host holding them would not
/// parse back to itself. For example U+FF0F FULLWIDTH SOLIDUS maps to `/`,
/// and U+00AD SOFT HYPHEN, which UTS #46 deletes, can join `%` and two hex
/// digits into a new escape. This is the structural subset of the WHATWG URL
/// Standard's "forbidden domain code points" (which also lists `<>^|`, bytes
/// that ASCII hosts keep here, like the Go client's `W!eird<>Ho$^.com`).
const IDNA_DENY: idna::AsciiDenyList = idna::AsciiDenyList::new(false, "%#/:?@[\\]");

/// Writes the canonical, escaped host of `authority` into `out` (steps 6
/// and 7). Userinfo and port are cut on the delimiters as written; with
/// [`Unescape::PerComponent`] the host is unescaped only after that, so an
/// escaped `%40` or `%3A` cannot move where the host starts or ends, and one
/// that unescapes to a delimiter is refused as browsers refuse it.
pub(super) fn canonical_host(
    authority: &[u8],
    unescape: Unescape,
    out: &mut Vec<u8>,
) -> Result<HostKind, CanonError> {
    let start = out.len();
    // Drop userinfo.
    let host_port = match authority.iter().rposition(|&b| b == b'@') {
        Some(i) => &authority[i + 1..],
        None => authority,
    };
    if host_port.first() == Some(&b'[') {
        let close = host_port
            .iter()
            .position(|&b| b == b']')
            .ok_or(CanonError::InvalidIpv6)?;
        let inner: Cow<'_, [u8]> = match unescape {
            Unescape::No => Cow::Borrowed(&host_port[1..close]),
            Unescape::PerComponent => Cow::Owned(unescape_fully(&host_port[1..close])),
        };
        out.extend_from_slice(canonical_ipv6(&inner)?.as_bytes());
        return Ok(HostKind::Ipv6);
    }
    // Drop the port: the host ends at the first ':' (WHATWG host parser).
    let host = match host_port.iter().position(|&b| b == b':') {
        Some(i) => &host_port[..i],
        None => host_port,
    };
    let host: Cow<'_, [u8]> = match unescape {
        Unescape::No => Cow::Borrowed(host),
        Unescape::PerComponent => {
            let host = unescape_fully(host);
            if let Some(&byte) = host
                .iter()
                .find(|&&b| matches!(b, b'/' | b'\\' | b'?' | b'@' | b':'))
            {
                return Err(CanonError::DelimiterInHost { byte });
            }
            Cow::Owned(host)
        }
    };
    if host.is_ascii() {
        // The common case, in one pass straight into the output.
        push_ascii_host(&host, out);
    } else {
        let mut name = normalize_dots(&host);
        if let Ok(s) = std::str::from_utf8(&name) {
            if let Ok(ascii) = idna::domain_to_ascii_cow(s.as_bytes(), IDNA_DENY) {
                name = normalize_dots(ascii.as_bytes());
            } else if let Some(decoded) = escapes_made_by_idna(&name) {
                name = normalize_dots(&decoded);
            }
        }
        name.make_ascii_lowercase();
        escape_into(&name, out);
    }
    let written = &out[start..];
    if written.is_empty() {
        return Err(CanonError::EmptyHost);
    }
    if written[0] == b'[' {
        // Only leading dots stripped away can put '[' first (".[::1]"); the
        // canonical URL would then parse as an IPv6 literal.
        return Err(CanonError::InvalidIpv6);
    }
    Ok(ipv4_or_domain(start, out))
}

/// The host Chromium visits for a non-ASCII `name` (already unescaped)
/// whose UTS #46 output holds escapes it did not: U+FF05 FULLWIDTH PERCENT
/// SIGN maps to `%`, and Chromium's host canonicalizer unescapes the IDNA
/// output again, so `％65vil.com` (or `%EF%BC%8565vil.com`) is visited as
/// `evil.com`. Read so here, or the feed entry written the first way lists
/// a host no browser holds while the browser's `evil.com` is checked. `None`
/// (keep the bytes, as before) when `name` holds a `%` of its own (an
/// invalid escape: Chromium refuses the host), or when the result is not
/// an ASCII host free of URL delimiters and `%` (Chromium refuses those too;
/// the output then stays a fixed point).
fn escapes_made_by_idna(name: &[u8]) -> Option<Vec<u8>> {
    const IDNA_DENY_BUT_PERCENT: idna::AsciiDenyList = idna::AsciiDenyList::new(false, "#/:?@[\\]");
    if name.contains(&b'%') {
        return None;
    }
    let ascii = idna::domain_to_ascii_cow(name, IDNA_DENY_BUT_PERCENT).ok()?;
    if !ascii.contains('%') {
        return None;
    }
    let decoded = unescape_fully(ascii.as_bytes());
    let forbidden =
        |b: &u8| !b.is_ascii() || matches!(b, b'%' | b'#' | b'/' | b':' | b'?' | b'@' | b'[' | b'\\' | b']');
    (!decoded.iter().any(forbidden)).then_some(decoded)
}

/// Rewrites the host written at `out[start..]` as dotted decimal when it is
/// an IPv4 address in any form. An escaped byte is never part of an address,
/// so parsing the escaped text is the same as parsing the bytes.
pub(super) fn ipv4_or_domain(start: usize, out: &mut Vec<u8>) -> HostKind {
    let Some(ip) = parse_ipv4(&out[start..]) else {
        return HostKind::Domain;
    };
    out.truncate(start);
    push_ipv4(ip, out);
    HostKind::Ipv4
}

/// Whether `host`, an IPv4 address, is written in canonical dotted decimal:
/// four parts of at most three digits, none with a leading zero.
pub(super) fn is_dotted_decimal(host: &[u8]) -> bool {
    let mut parts = 0;
    for part in host.split(|&b| b == b'.') {
        parts += 1;
        let canonical = match part {
            [b'0'] => true,
            [b'1'..=b'9', rest @ ..] => rest.len() <= 2 && rest.iter().all(u8::is_ascii_digit),
            _ => false,
        };
        if !canonical {
            return false;
        }
    }
    parts == 4
}

/// Writes `ip` in dotted decimal.
pub(super) fn push_ipv4(ip: u32, out: &mut Vec<u8>) {
    for (i, octet) in ip.to_be_bytes().into_iter().enumerate() {
        if i > 0 {
            out.push(b'.');
        }
        push_decimal(octet, out);
    }
}

/// Step 7 for an ASCII host: strips leading and trailing dots, collapses
/// runs of dots, lowercases and escapes, appending to `out`.
fn push_ascii_host(host: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    let mut pending_dot = false;
    for &b in host {
        if b == b'.' {
            pending_dot = out.len() > start;
            continue;
        }
        if pending_dot {
            out.push(b'.');
            pending_dot = false;
        }
        push_escaped(b.to_ascii_lowercase(), out);
    }
}

fn push_decimal(n: u8, out: &mut Vec<u8>) {
    if n >= 100 {
        out.push(b'0' + n / 100);
    }
    if n >= 10 {
        out.push(b'0' + n / 10 % 10);
    }
    out.push(b'0' + n % 10);
}

/// Maps ideographic full stops to `.`, strips leading/trailing dots and
/// collapses runs of dots.
fn normalize_dots(host: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(host.len());
    let mut i = 0;
    let mut pending_dot = false;
    while i < host.len() {
        let (is_dot, width) = match &host[i..] {
            [b'.', ..] => (true, 1),
            // U+3002 IDEOGRAPHIC FULL STOP, U+FF0E FULLWIDTH FULL STOP,
            // U+FF61 HALFWIDTH IDEOGRAPHIC FULL STOP (UTS #46 maps all to '.').
            [0xE3, 0x80, 0x82, ..] | [0xEF, 0xBC, 0x8E, ..] | [0xEF, 0xBD, 0xA1, ..] => (true, 3),
            _ => (false, 1),
        };
        if is_dot {
            pending_dot = !out.is_empty();
        } else {
            if pending_dot {
                out.push(b'.');
                pending_dot = false;
            }
            out.push(host[i]);
        }
        i += width;
    }
    out
}

/// The WHATWG IPv4 parser: 1–4 dot-separated numbers, each decimal, octal
/// (leading `0`) or hex (`0x`); the last one fills the remaining bytes.
/// Returns `None` when the host is not an IPv4 address.
pub(super) fn parse_ipv4(host: &[u8]) -> Option<u32> {
    // Cheap rejection of the common case, a name: an address holds only
    // digits, dots and the hex digits and 'x' of 0x-numbers.
    if !host
        .iter()
        .all(|&b| b.is_ascii_hexdigit() || b == b'.' || b == b'x' || b == b'X')
    {
        return None;
    }
    let mut parts = [0u64; 4];
    let mut count = 0;
    for part in host.split(|&b| b == b'.') {
        if count == 4 {
            return None;
        }
        parts[count] = parse_ipv4_number(part)?;
        count += 1;
    }
    let (&last, init) = parts[..count].split_last()?;
    let last_bits = 8 * (5 - count as u32);
    if last >= 1u64 << last_bits {
        return None;
    }
    let mut addr: u64 = last;
    for (i, &p) in init.iter().enumerate() {
        if p > 255 {
            return None;
        }
        addr |= p << (8 * (3 - i));
    }
    u32::try_from(addr).ok()
}

fn parse_ipv4_number(part: &[u8]) -> Option<u64> {
    if part.is_empty() {
        return None;
    }
    let (digits, radix) = if let Some(hex) = part.strip_prefix(b"0x").or_else(|| part.strip_prefix(b"0X")) {
        (hex, 16)
    } else if part.len() > 1 && part[0] == b'0' {
        (&part[1..], 8)
    } else {
        (part, 10)
    };
    if digits.is_empty() {
        // "0x" alone is zero in the WHATWG parser.
        return Some(0);
    }
    let mut value: u64 = 0;
    for &b in digits {
        let d = u64::from(hex_value(b)?);
        if d >= radix {
            return None;
        }
        value = value.checked_mul(radix)?.checked_add(d)?;
        if value > u64::from(u32::MAX) {
            return None;
        }
    }
    Some(value)
}

fn canonical_ipv6(inner: &[u8]) -> Result<String, CanonError> {
    let text = std::str::from_utf8(inner).map_err(|_| CanonError::InvalidIpv6)?;
    // Zone identifiers ("%eth0", already unescaped) are not part of the address.
    let text = text.split('%').next().unwrap_or(text);
    let rewritten: String;
    let (text, addr) = match text.parse::<Ipv6Addr>() {
        Ok(addr) => (text, addr),
        Err(_) => {
            rewritten = with_browser_ipv4_tail(text).ok_or(CanonError::InvalidIpv6)?;
            let addr = rewritten.parse().map_err(|_| CanonError::InvalidIpv6)?;
            (rewritten.as_str(), addr)
        }
    };
    let mut out = String::with_capacity(inner.len() + 2);
    out.push('[');
    if text.contains('.') {
        // Written with an embedded IPv4 address: keep the dotted quad (RFC 5952
        // section 5 recommends mixed notation for such addresses).
        let seg = addr.segments();
        let [a, b, c, d] = addr.octets()[12..16] else {
            return Err(CanonError::InvalidIpv6);
        };
        out.push_str(&rfc5952_head(&seg[..6]));
        out.push_str(&format!("{a}.{b}.{c}.{d}"));
    } else {
        out.push_str(&addr.to_string());
    }
    out.push(']');
    Ok(out)
}

/// `text`, an IPv6 literal ending in an IPv4 address that Chromium reads
/// but RFC 4291 text does not (parts with leading zeros, octal with a
/// leading `0`, hex with `0x`: Chromium's IPv4 number parser, four parts,
/// each at most 255), with that address in dotted decimal; `None` for any
/// other text. `[::ffff:0x7f.0.0.1]` is a URL Chromium visits, at
/// 127.0.0.1: refused here, a feed entry written so was dropped.
fn with_browser_ipv4_tail(text: &str) -> Option<String> {
    let (head, tail) = text.rsplit_once(':')?;
    let mut octets = [0u8; 4];
    let mut count = 0;
    for part in tail.split('.') {
        let slot = octets.get_mut(count)?;
        *slot = u8::try_from(parse_ipv4_number(part.as_bytes())?).ok()?;
        count += 1;
    }
    let [a, b, c, d] = octets;
    (count == 4).then(|| format!("{head}:{a}.{b}.{c}.{d}"))
}

/// RFC 5952 text of the six 16-bit groups before an embedded IPv4 address,
/// ending in `:` (or `::` when the zero run reaches the end).
fn rfc5952_head(groups: &[u16]) -> String {
    // Longest run of at least two zero groups, first one on ties.
    let (mut best_start, mut best_len) = (0, 0);
    let mut i = 0;
    while i < groups.len() {
        if groups[i] == 0 {
            let start = i;
            while i < groups.len() && groups[i] == 0 {
                i += 1;
            }
            if i - start > best_len {
                (best_start, best_len) = (start, i - start);
            }
        } else {
            i += 1;
        }
    }
    let hex = |g: &[u16]| g.iter().map(|x| format!("{x:x}")).collect::<Vec<_>>().join(":");
    if best_len >= 2 {
        let head = hex(&groups[..best_start]);
        let tail = hex(&groups[best_start + best_len..]);
        if tail.is_empty() {
            format!("{head}::")
        } else {
            format!("{head}::{tail}:")
        }
    } else {
        format!("{}:", hex(groups))
    }
}

#[cfg(test)]
mod tests {
    use crate::canon::tests::{assert_fixed_point, canon};
    use crate::{CanonError, canonicalize};

    #[test]
    fn ipv4_forms() {
        assert_eq!(canon("http://3279880203/blah"), "http://195.127.0.11/blah");
        assert_eq!(canon("http://0x12.0x43.0x44.0x01"), "http://18.67.68.1/");
        assert_eq!(canon("http://10.1/"), "http://10.0.0.1/");
        assert_eq!(canon("http://012.1.1.1/"), "http://10.1.1.1/");
        assert_eq!(canon("http://256.1.1.1/"), "http://256.1.1.1/");
        assert_eq!(
            canon("http://24.174.232.35.bc.googleusercontent.com/"),
            "http://24.174.232.35.bc.googleusercontent.com/"
        );
    }

    #[test]
    fn ipv6_forms() {
        assert_eq!(
            canon("http://[FEDC:BA98:7654:3210:FEDC:BA98:7654:3210]:80/index.html"),
            "http://[fedc:ba98:7654:3210:fedc:ba98:7654:3210]/index.html"
        );
        assert_eq!(canon("http://[::192.9.5.5]/ipng"), "http://[::192.9.5.5]/ipng");
        assert_eq!(canon("http://[::ffff:1.2.3.4]/"), "http://[::ffff:1.2.3.4]/");
        assert_eq!(canon("http://[2001:0db8:0:0:0:0:0:1]/"), "http://[2001:db8::1]/");
        assert_eq!(canonicalize("http://[zz]/"), Err(CanonError::InvalidIpv6));
    }

    #[test]
    fn idn() {
        assert_eq!(
            canon("http://www.\u{fc}mlat.com/"),
            "http://www.xn--mlat-zra.com/"
        );
        assert_eq!(canon("http://example\u{3002}com/"), "http://example.com/");
        assert_eq!(canon("http://ex\u{ad}ample.com/"), "http://example.com/");
    }

    #[test]
    fn regression_host_ends_at_first_colon() {
        // Was "http://:/" and "http://a:b/": the port was cut at the last ':'.
        assert_eq!(canonicalize("http://::/"), Err(CanonError::EmptyHost));
        assert_fixed_point("http://a:b:c/x", "http://a/x");
        assert_fixed_point("http://a.com:80:90/", "http://a.com/");
    }

    #[test]
    fn regression_idna_output_with_url_delimiters() {
        // Punycode keeps ASCII: "%中文00" became "xn--%00-…", whose "%00"
        // decoded on the next pass.
        assert_fixed_point("http://%\u{4e2d}\u{6587}00/", "http://%25%E4%B8%AD%E6%96%8700/");
        // U+FF0F FULLWIDTH SOLIDUS maps to '/', which would split the host.
        assert_fixed_point("http://a\u{ff0f}b.com/", "http://a%EF%BC%8Fb.com/");
        // U+00AD SOFT HYPHEN is deleted, which would join "%" and "41".
        assert_fixed_point("http://a%\u{ad}41.com/", "http://a%25%C2%AD41.com/");
        // A plain IDN host is unaffected.
        assert_fixed_point("http://\u{fc}.com/", "http://xn--tda.com/");
    }

    /// U+FF05 FULLWIDTH PERCENT SIGN maps to `%` under UTS #46, and
    /// Chromium decodes the escape that makes (its host canonicalizer
    /// unescapes the IDNA output again): `http://％65vil.com/` is visited
    /// as `http://evil.com/`. Each raw form (as a feed writes it) must
    /// canonicalize as Chromium's `new URL(raw).href` (second column) does.
    #[test]
    fn fullwidth_percent_in_the_host_reads_as_chromium_visits_it() {
        for (raw, chromium) in [
            ("http://\u{ff05}65vil.com/path", "http://evil.com/path"),
            ("http://evil\u{ff05}2ecom/path", "http://evil.com/path"),
            ("http://E\u{ff05}56IL.COM/path", "http://evil.com/path"),
            ("http://e\u{ff05}76il.com/x/path", "http://evil.com/x/path"),
            (
                "http://\u{ff05}\u{ff14}\u{ff15}vil.com/path",
                "http://evil.com/path",
            ),
            ("http://%EF%BC%8565vil.com/path", "http://evil.com/path"),
            ("http://a\u{ff05}6%41/path", "http://aj/path"),
            ("\u{ff05}65vil.com/path", "http://evil.com/path"),
        ] {
            assert_eq!(canon(raw), canon(chromium), "{raw}");
            assert_fixed_point(raw, &canon(chromium));
        }
    }

    /// Chromium reads the IPv4 address at the end of an IPv6 literal with
    /// its IPv4 number parser: leading zeros (octal) and `0x` parts are
    /// accepted, so `http://[::ffff:0x7f.0.0.1]/` is visited (over IPv4, at
    /// 127.0.0.1) as `http://[::ffff:7f00:1]/`. Each raw form (as a feed
    /// writes it) must canonicalize as Chromium's `new URL(raw).href`
    /// (second column) does, not be refused.
    #[test]
    fn ipv6_with_an_embedded_ipv4_in_other_forms_reads_as_chromium_visits_it() {
        for (raw, chromium) in [
            ("http://[::ffff:1.2.3.04]/phish", "http://[::ffff:102:304]/phish"),
            (
                "http://[::ffff:01.02.03.04]/phish",
                "http://[::ffff:102:304]/phish",
            ),
            (
                "http://[::ffff:001.002.003.004]/phish",
                "http://[::ffff:102:304]/phish",
            ),
            ("http://[::ffff:1.2.3.010]/phish", "http://[::ffff:102:308]/phish"),
            ("http://[::ffff:0x7f.0.0.1]/phish", "http://[::ffff:7f00:1]/phish"),
            ("http://[::127.0.0.01]/x", "http://[::7f00:1]/x"),
            (
                "http://[1:2:3:4:5:6:1.2.3.010]/x",
                "http://[1:2:3:4:5:6:102:308]/x",
            ),
        ] {
            assert_eq!(
                canonicalize(raw).map(|u| u.host_kind()),
                Ok(crate::HostKind::Ipv6),
                "{raw}"
            );
            let other_form = canonicalize(raw).unwrap().to_string();
            // Listed either way, the browser's form must be among its readings;
            // the publisher adds the other notation of the same address.
            let same_address = |a: &str, b: &str| {
                let addr = |u: &str| {
                    let u = canonicalize(u).unwrap();
                    u.host()
                        .trim_matches(|c| c == '[' || c == ']')
                        .parse::<std::net::Ipv6Addr>()
                        .unwrap()
                };
                addr(a) == addr(b)
            };
            assert!(
                same_address(&other_form, chromium),
                "{raw}: {other_form} vs {chromium}"
            );
            assert_fixed_point(raw, &other_form);
        }
        // Chromium refuses these too.
        for raw in [
            "http://[::ffff:1.2.3.08]/",
            "http://[::ffff:127.1]/",
            "http://[::ffff:1.2.3.256]/",
        ] {
            assert_eq!(canonicalize(raw), Err(CanonError::InvalidIpv6), "{raw}");
        }
    }

    #[test]
    fn regression_bracket_after_leading_dots() {
        // Was "http://[/": stripping the dot put '[' first.
        assert_eq!(canonicalize("http://.[::1]/"), Err(CanonError::InvalidIpv6));
        assert_fixed_point("http://a[b/", "http://a[b/");
    }

    /// A host that unescapes to a URL delimiter has no page behind it:
    /// browsers refuse it (WHATWG forbidden domain code points).
    #[test]
    fn escaped_delimiters_in_the_host_are_refused() {
        for (url, byte) in [
            ("http://evil.com%40good.com/", b'@'),
            ("http://a.com%2Fb/", b'/'),
            ("http://a.com%5Cb/", b'\\'),
            ("http://a.com%3Fb/", b'?'),
            ("http://a.com%3A80/", b':'),
            ("a.com%2Fb", b'/'),
        ] {
            assert_eq!(
                canonicalize(url),
                Err(CanonError::DelimiterInHost { byte }),
                "{url}"
            );
        }
        assert_eq!(
            canonicalize("http://a.com%2Fb/").unwrap_err().to_string(),
            "host holds '/' once unescaped, a URL delimiter browsers reject in a host"
        );
    }
}
