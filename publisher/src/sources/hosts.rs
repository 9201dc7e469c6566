//! What a host or domain name stands for (`host/`), and the `hosts`
//! format's lines: an address and names, or bare names.

use blocksieve_format::{CanonError, HostKind, canonicalize};

use super::breadth::too_broad;
use super::entry::{Entry, Read};
use super::outcome::reason;
use super::url_entry::{
    UNICODE_DOTS, ipv4_number_parts, is_bare_ipv6, is_short_number, other_ip_host, refang_dots,
    unvisitable_host,
};
use super::visit::Visit;
use super::white::{split_white, unquote};

/// Names in hosts files that are not threats (the file's own boilerplate).
const HOSTS_BOILERPLATE: &[&str] = &[
    "localhost",
    "localhost.localdomain",
    // Fedora's and RHEL's default /etc/hosts.
    "localhost4",
    "localhost4.localdomain4",
    "localhost6",
    "localhost6.localdomain6",
    "local",
    "broadcasthost",
    "ip6-localhost",
    "ip6-loopback",
    "ip6-localnet",
    "ip6-mcastprefix",
    "ip6-allnodes",
    "ip6-allrouters",
    "ip6-allhosts",
    "0.0.0.0",
];

/// The reason for a domain entry that does not canonicalize.
fn domain_error(e: CanonError) -> &'static str {
    match e {
        CanonError::Empty | CanonError::EmptyHost => reason::EMPTY_HOST_NAME,
        CanonError::TooLong { .. } => reason::TOO_LONG,
        _ => reason::NOT_A_HOST_NAME,
    }
}

/// The expression a domain entry stands for: `host/`. A leading `*.` is
/// removed first; no other line cleaning is done (see [`read_line`](super::read_line)).
///
/// # Errors
///
/// The reason, one of [`reason`], when the name is not a host name or
/// would block too much.
pub fn domain_expression(name: &[u8]) -> Result<String, String> {
    Ok(domain_entry(strip_wildcard(name), false)?)
}

/// `*.name` → `name`.
fn strip_wildcard(name: &[u8]) -> &[u8] {
    name.strip_prefix(b"*.").unwrap_or(name)
}

/// `host/` of a domain entry (its `*.` already removed). `marked`: the
/// syntax marks `name` a host (an adblock `||host^`), so a number
/// (`3232235777`) is the address it reads as, not a value from the wrong
/// column ([`reason::NUMBER_NOT_ADDRESS`]).
fn domain_entry(name: &[u8], marked: bool) -> Result<String, &'static str> {
    if name.is_empty() {
        return Err(reason::EMPTY_HOST_NAME);
    }
    // A defanged name (`evil[.]example`, `evil(dot)example`: indicator
    // lists write names so, to keep them from being clicked) is the name
    // it stands for, as a `urls` line's host is (`refang`).
    let mut refanged = Vec::new();
    let name = refanged_name(name, &mut refanged);
    // A bare IPv6 address (`2001:db8::1`) is read as the host `[…]`, not as
    // a host `2001` with a port.
    let bracketed;
    let name = if is_bare_ipv6(name) {
        bracketed = [&b"["[..], name, b"]"].concat();
        &bracketed[..]
    } else {
        name
    };
    if !is_host_name_like(name) {
        return Err(reason::NOT_A_HOST_NAME);
    }
    let url = canonicalize(name).map_err(domain_error)?;
    if !marked && url.host_kind() == HostKind::Ipv4 && is_short_number(name) {
        return Err(reason::NUMBER_NOT_ADDRESS);
    }
    if let Some(reason) = unvisitable_host(url.host().as_bytes(), url.host_kind()) {
        return Err(reason);
    }
    if let Some(reason) = too_broad(url.host().as_bytes(), url.host_kind(), true) {
        return Err(reason);
    }
    Ok(format!("{}/", url.host()))
}

/// `name` with its defanged dots refanged (`evil[.]example`), in `buf`
/// when any was; else `name` itself.
fn refanged_name<'a>(name: &'a [u8], buf: &'a mut Vec<u8>) -> &'a [u8] {
    if memchr::memchr3(b'[', b'(', b'{', name).is_none() {
        return name;
    }
    let (_, changed) = refang_dots(name, buf, |_| false);
    if changed { &buf[..] } else { name }
}

/// Whether a hosts-line field ends the line's names (the rest is a comment
/// the file did not mark with `#`): a single word (no `.` and no `:`), or
/// no host name. A field written with a defanged dot or an ideographic or
/// fullwidth one (which IDNA maps to `.`) is a name when it reads as one
/// (`evil[.]example`, `evil。example`), and the names after it are read; a
/// comment's word that holds one (`仿冒网站。`, `(.)`) still ends them.
fn ends_names(name: &[u8]) -> bool {
    if (name.contains(&b'.') || name.contains(&b':')) && is_host_name_like(strip_wildcard(name)) {
        return false;
    }
    let mut buf = Vec::new();
    let refanged = refanged_name(name, &mut buf) != name;
    let other_dot = UNICODE_DOTS
        .iter()
        .any(|d| name.windows(d.len()).any(|w| w == *d));
    !(refanged || other_dot) || domain_entry(strip_wildcard(name), false).is_err()
}

/// Whether a domain entry can be a host name, as browsers take one: a
/// bracketed IPv6 address, or letters, digits, `-`, `_`, `.`, `%`-escapes
/// and non-ASCII (internationalized) characters other than white space,
/// with an optional `:port`. The invisible U+FEFF, U+200B and U+2060
/// (which copying from a web page leaves behind) are not white space here:
/// the IDNA mapping removes them (UTS #46 "ignored"), so a browser given
/// `evil\u{200b}.example` visits `evil.example`, as a URL line with it
/// lists.
/// Anything else — `, ; | ^ " ' [ ] ! { } < > = & + $ ~` and the like —
/// is a column, rule syntax or a mistake, not a host (RFC 1123 §2.1, and
/// the forbidden host code points of the WHATWG URL Standard).
fn is_host_name_like(name: &[u8]) -> bool {
    // `host:port`, `[v6]:port`: the port is digits.
    let (host, port) = match memchr::memrchr(b':', name) {
        Some(colon) if !name.starts_with(b"[") || name.get(colon.saturating_sub(1)) == Some(&b']') => {
            let (host, port) = name.split_at(colon);
            (host, Some(port.get(1..).unwrap_or_default()))
        }
        _ => (name, None),
    };
    if port.is_some_and(|p| p.is_empty() || !p.iter().all(u8::is_ascii_digit)) {
        return false;
    }
    if let Some(inner) = host.strip_prefix(b"[") {
        let inner = inner.strip_suffix(b"]").unwrap_or(b"");
        return std::str::from_utf8(inner).is_ok_and(|s| s.parse::<std::net::Ipv6Addr>().is_ok());
    }
    host.utf8_chunks().all(|chunk| {
        // Bytes that are not UTF-8 are the canonicalizer's to escape.
        chunk.valid().chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(c, '-' | '_' | '.' | '%')
                || !c.is_ascii() && !c.is_whitespace() && !c.is_control()
        })
    })
}

/// A domain entry `name`; `shown` is what a rejection sample shows.
pub(super) fn read_domain(name: &[u8], shown: &[u8], v: &mut impl Visit) {
    read_domain_marked(name, shown, false, v);
}

/// [`read_domain`] of a name the syntax marks a host (`marked`, see
/// [`domain_entry`]).
pub(super) fn read_domain_marked(name: &[u8], shown: &[u8], marked: bool, v: &mut impl Visit) {
    let name = strip_wildcard(name);
    match v.canonicalizing(|| domain_entry(name, marked)) {
        Ok(e) => {
            let read = |e| Read {
                text: name,
                entry: Entry::Expression(e),
            };
            // An IP address: also as its other canonical host
            // (`other_ip_host`).
            match e
                .strip_suffix('/')
                .and_then(|host| other_ip_host(host.as_bytes()))
            {
                Some(other) => v.accepted(&[read(e), read(format!("{other}/"))]),
                None => v.accepted(&[read(e)]),
            }
        }
        Err(reason) => v.rejected(shown, reason),
    }
}

/// A hosts line: `address name [name…]`, or bare names. A field that
/// cannot be a host name (`//`, `;`, `!`, `(…)`) or a single word ends the
/// names, refused: what follows is a comment the file did not mark with
/// `#` (`// targets paypal.com`, `; from example.org`, a category column),
/// and the names in it are not the line's.
pub(super) fn read_hosts(text: &[u8], v: &mut impl Visit) {
    let mut fields = split_white(text);
    let Some(first) = fields.next() else { return };
    // A bare name without an address column is a name too.
    let address = is_ip_literal(first);
    let mut named = false;
    for name in std::iter::once(first).filter(|_| !address).chain(fields) {
        named = true;
        let name = unquote(name).unwrap_or(name);
        if HOSTS_BOILERPLATE
            .iter()
            .any(|b| b.as_bytes().eq_ignore_ascii_case(name))
        {
            continue;
        }
        read_domain(name, name, v);
        if ends_names(name) {
            break;
        }
    }
    if !named {
        v.rejected(text, reason::HOSTS_NO_NAME);
    }
}

/// Whether a hosts-file field is an address: IPv4, also in the forms
/// `inet_aton` and the URL Standard read (`0`, the compact sink of some
/// lists, `127.1`, `0x7f000001`, `127.000.000.001`: up to four numbers),
/// or IPv6 with an optional zone (`fe80::1%lo0`, the macOS default hosts
/// file).
pub(super) fn is_ip_literal(field: &[u8]) -> bool {
    if ipv4_number_parts(field).is_some_and(|parts| parts <= 4) {
        return true;
    }
    let address = match memchr::memchr(b'%', field) {
        Some(zone) if field.contains(&b':') => field.get(..zone).unwrap_or_default(),
        _ => field,
    };
    std::str::from_utf8(address).is_ok_and(|s| s.parse::<std::net::IpAddr>().is_ok())
}

#[cfg(test)]
mod tests {
    use crate::config::SourceFormat;
    use crate::sources::tests::{collect, hashes, read_one};
    use crate::sources::{cleaned, reason};

    /// A domain entry of more than five labels blocks its own host only
    /// (an agent reads host suffixes from a URL's last five labels): listed,
    /// and counted so that the build says so. Real names of urlhaus-filter.
    #[test]
    fn a_domain_entry_deeper_than_agents_look_is_counted() {
        let text = b"login.new.test.application.hacsp.com\nmsoftdatastore.z22.web.core.windows.net\na.b.c.evil.example\n1.2.3.4\n";
        for format in [SourceFormat::Domains, SourceFormat::AdblockHosts] {
            let (out, report) = collect(text, format);
            // (The address also as IPv4-mapped: five.)
            assert_eq!(out.len(), 5, "{format:?} {report:?}");
            assert_eq!(report.host_wide_too_deep, 2, "{format:?} {report:?}");
        }
    }

    /// A defanged name (`evil[.]example`) was refused as `not a host
    /// name` in every domain format, where a `urls` line reads it as the
    /// host it stands for: it is that host, in each of them (a `json`
    /// item is read by the same code).
    #[test]
    fn regression_a_defanged_name_is_the_host_it_stands_for() {
        let cases: [(SourceFormat, &[u8]); 4] = [
            (SourceFormat::Domains, b"evil[.]example"),
            (SourceFormat::Domains, b"sub(dot)evil{.}example"),
            (SourceFormat::Hosts, b"0.0.0.0 evil[.]example"),
            (SourceFormat::AdblockHosts, b"||evil[dot]example^"),
        ];
        for (format, line) in cases {
            let (out, report) = collect(line, format);
            assert_eq!(report.rejected_total(), 0, "{format:?} {}", line.escape_ascii());
            let expected = if line.starts_with(b"sub") {
                "sub.evil.example/"
            } else {
                "evil.example/"
            };
            assert_eq!(out, hashes(&[expected]), "{format:?} {}", line.escape_ascii());
        }
        // Brackets that are no defanged dot stay what they were.
        assert_eq!(
            read_one(SourceFormat::Domains, b"evil[x]example").unwrap_err(),
            reason::NOT_A_HOST_NAME
        );
    }

    /// A hosts line's names after a defanged name (`evil[.]example`) or
    /// one written with an ideographic dot (`evil。example`) were dropped
    /// and counted nowhere: such a name ended the names as if it were a
    /// comment's word, though it was read as a host.
    #[test]
    fn regression_names_after_a_defanged_name_are_read() {
        for line in [
            &b"0.0.0.0 evil[.]example other.example"[..],
            "0.0.0.0 evil\u{3002}example other.example".as_bytes(),
            b"0.0.0.0 evil(dot)example other.example",
        ] {
            let (out, report) = collect(line, SourceFormat::Hosts);
            assert_eq!(report.rejected_total(), 0, "{}", line.escape_ascii());
            assert_eq!(
                out,
                hashes(&["evil.example/", "other.example/"]),
                "{}",
                line.escape_ascii()
            );
        }
        // A comment's word holding such a dot still ends the names.
        for line in [
            "0.0.0.0 evil.example \u{4eff}\u{5192}\u{7f51}\u{7ad9}\u{3002} paypal.com".as_bytes(),
            b"0.0.0.0 evil.example (.) paypal.com",
            b"0.0.0.0 evil.example [dot] paypal.com",
            b"0.0.0.0 evil.example (dot)com paypal.com",
        ] {
            let (out, _) = collect(line, SourceFormat::Hosts);
            assert_eq!(out, hashes(&["evil.example/"]), "{}", line.escape_ascii());
        }
        // A word still ends the names.
        let (out, _) = collect(
            b"0.0.0.0 evil.example phishing other.example",
            SourceFormat::Hosts,
        );
        assert_eq!(out, hashes(&["evil.example/"]));
    }

    /// A hosts line whose address is written as `inet_aton` reads it
    /// (`0`, the compact sink, `0x7f000001`, `127.1`) lost its names: the
    /// address was read as a name, refused as a loopback or a word, and
    /// what followed dropped or counted as a second rejection.
    #[test]
    fn regression_an_address_in_any_ipv4_form_is_the_address_column() {
        for line in [
            &b"0 evil.example"[..],
            b"0x7f000001 evil.example",
            b"127.1 evil.example",
            b"127.000.000.001 evil.example",
            b"0.0.0.0 evil.example",
        ] {
            let (out, report) = collect(line, SourceFormat::Hosts);
            assert_eq!(out, hashes(&["evil.example/"]), "{}", line.escape_ascii());
            assert_eq!(report.rejected_total(), 0, "{}", line.escape_ascii());
        }
    }

    #[test]
    fn hosts_lines() {
        let text = b"\xEF\xBB\xBF# header\r\n127.0.0.1 localhost\n0.0.0.0 Evil.Example. other.example # note\r\n\n0.0.0.0\nbare.example\n";
        let (out, report) = collect(text, SourceFormat::Hosts);
        assert_eq!(out, hashes(&["evil.example/", "other.example/", "bare.example/"]));
        assert_eq!(report.lines, 6);
        assert_eq!(report.rejected_total(), 1);
        assert_eq!(report.rejected[reason::HOSTS_NO_NAME], 1);
        assert_eq!(report.cleaned[cleaned::COMMENT], 1);
    }

    /// Comments not marked with `#` after the names (or as the whole line)
    /// named hosts the line does not list: `0.0.0.0 evil.example //
    /// targets paypal.com` listed `paypal.com/`, `; Provided by
    /// malwaredomainlist.com` the provider's site. A field that cannot be a
    /// host name, or a single word, now ends the names (refused, so the
    /// report shows it).
    #[test]
    fn a_field_that_is_no_host_name_ends_the_names() {
        let text = b"0.0.0.0 evil.example  // targets paypal.com
; Provided by malwaredomainlist.com
! Maintained by example.org
0.0.0.0 evil2.example\tphishing\tpaypal.com
0.0.0.0 a.example (bank.example) b.example
127.0.0.1 c.example localhost d.example
127.0.0.1   localhost localhost.localdomain localhost4 localhost4.localdomain4
::1         localhost localhost.localdomain localhost6 localhost6.localdomain6
0.0.0.0 *.e.example f.example
";
        let (out, report) = collect(text, SourceFormat::Hosts);
        assert_eq!(
            out,
            hashes(&[
                "evil.example/",
                "evil2.example/",
                "a.example/",
                "c.example/",
                "d.example/",
                "e.example/",
                "f.example/"
            ])
        );
        assert_eq!(report.rejected_total(), 5, "{report:?}");
    }

    /// Domain entries no browser can visit (an escaped space, control or
    /// `#` in the host, a character the IDNA mapping refuses) were
    /// accepted, matching nothing and counted as read; they are refused
    /// with the reasons a URL entry gets.
    #[test]
    fn a_domain_no_browser_visits_is_refused_with_a_true_reason() {
        for (name, why) in [
            (&b"evil%20example.com"[..], reason::FORBIDDEN_IN_HOST),
            (b"evil%00.example", reason::FORBIDDEN_IN_HOST),
            (b"paypal.com%23.evil.example", reason::FORBIDDEN_IN_HOST),
            ("paypal.com\u{ff20}evil.example".as_bytes(), reason::IDNA_REFUSED),
            (b"zzzoolight.co.za0.0.0.0", reason::ENDS_IN_A_NUMBER),
        ] {
            for format in [SourceFormat::Domains, SourceFormat::Hosts] {
                let (out, report) = collect(name, format);
                assert!(out.is_empty(), "{format:?} {}", name.escape_ascii());
                assert_eq!(report.rejected.get(why), Some(&1), "{format:?} {report:?}");
            }
        }
    }

    /// A domain entry holding an invisible character IDNA ignores (U+200B,
    /// U+FEFF, U+2060, left by copying from a web page) names the host a
    /// browser visits for it, as a URL line does; it was refused as `not a
    /// host name`, leaving that host unlisted. White space in a domain
    /// entry is still no host (in a hosts line it separates names).
    #[test]
    fn regression_a_domain_with_an_invisible_character_lists_what_browsers_visit() {
        for (format, address) in [(SourceFormat::Domains, ""), (SourceFormat::Hosts, "0.0.0.0 ")] {
            let text = ["evil\u{200b}.example", "a\u{feff}b.example", "c.ex\u{2060}ample"]
                .map(|name| format!("{address}{name}\n"))
                .concat();
            let (out, report) = collect(text.as_bytes(), format);
            assert_eq!(
                out,
                hashes(&["evil.example/", "ab.example/", "c.example/"]),
                "{format:?} {report:?}"
            );
        }
        let (out, report) = collect(
            "bank.example\u{2003}x.example\n".as_bytes(),
            SourceFormat::Domains,
        );
        assert!(out.is_empty() && report.rejected_total() == 1, "{report:?}");
    }

    #[test]
    fn domains_and_wildcards() {
        let text = b"example.com\n*.wild.example\nfoo.example/path\nEXAMPLE.ORG.\n\xc3\xbcmlat.example\n";
        let (out, report) = collect(text, SourceFormat::Domains);
        assert_eq!(
            out,
            hashes(&[
                "example.com/",
                "wild.example/",
                "example.org/",
                "xn--mlat-zra.example/"
            ])
        );
        assert_eq!(report.rejected[reason::NOT_A_HOST_NAME], 1);
        let readings = read_one(SourceFormat::Domains, b"*.wild.example").unwrap();
        assert_eq!(readings[0].text, b"wild.example");
    }
}
