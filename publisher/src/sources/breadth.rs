//! Entries that would block too much: host-wide entries on a public
//! suffix, and entries on a loopback or unspecified address (see the
//! module docs of `sources`).

use blocksieve_format::{CanonicalForm, HostKind};

use super::outcome::reason;

/// Why an entry is refused even though it parses: it would block too much.
/// `host_wide` says whether it publishes `host/` (see the module docs).
pub(super) fn too_broad(host: &[u8], kind: HostKind, host_wide: bool) -> Option<&'static str> {
    match kind {
        HostKind::Ipv4 => (host == b"0.0.0.0" || host.starts_with(b"127.")).then_some(reason::LOOPBACK),
        HostKind::Ipv6 => {
            let address = host
                .strip_prefix(b"[")
                .and_then(|h| h.strip_suffix(b"]"))
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| h.parse::<std::net::Ipv6Addr>().ok());
            address
                .is_some_and(|a| {
                    a.is_loopback()
                        || a.is_unspecified()
                        || a.to_ipv4_mapped()
                            .is_some_and(|v4| v4.is_loopback() || v4.is_unspecified())
                })
                .then_some(reason::LOOPBACK)
        }
        HostKind::Domain if host_wide => public_suffix(host),
        HostKind::Domain => None,
    }
}

/// Why a host-wide entry on `host` would cover a whole registry, if it
/// would: the host has no registrable domain by the Public Suffix List.
fn public_suffix(host: &[u8]) -> Option<&'static str> {
    if psl::domain(host).is_some() {
        return None;
    }
    Some(match psl::suffix(host) {
        Some(s) if s.is_known() && s.typ() == Some(psl::Type::Private) => reason::PUBLIC_SUFFIX_PRIVATE,
        Some(s) if s.is_known() => reason::PUBLIC_SUFFIX_ICANN,
        // Not on the list: only the default rule `*` (the last label is a
        // suffix) leaves no registrable domain, so the host is one label.
        _ if host
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') =>
        {
            reason::SINGLE_LABEL
        }
        _ => reason::NOT_A_HOST_NAME,
    })
}

/// Whether `url` publishes a host-wide expression: path `/`, no query.
pub(super) fn is_host_wide(url: &CanonicalForm<'_>) -> bool {
    url.path() == b"/" && url.query().is_none_or(<[u8]>::is_empty)
}

#[cfg(test)]
mod tests {
    use crate::config::SourceFormat;
    use crate::sources::reason;
    use crate::sources::tests::{collect, exprs};

    // A page URL on a public-suffix host names one page.
    #[test]
    fn page_urls_on_public_suffix_hosts_are_accepted() {
        for (line, expression) in [
            // The examples.
            (
                "https://s3.amazonaws.com/evil-bucket/login.html",
                "s3.amazonaws.com/evil-bucket/login.html",
            ),
            (
                "http://ec2-1-2-3-4.compute-1.amazonaws.com/paypal/login.php",
                "ec2-1-2-3-4.compute-1.amazonaws.com/paypal/login.php",
            ),
            (
                "https://nyc3.digitaloceanspaces.com/evilspace/office365.html",
                "nyc3.digitaloceanspaces.com/evilspace/office365.html",
            ),
            // Real lines of the 2018-2020 union feed (see
            // tests/fixtures/phishing-urls-union-quirks.txt for all of them).
            (
                "http://s3.eu-central-1.amazonaws.com/hadskjwedas/a1.html",
                "s3.eu-central-1.amazonaws.com/hadskjwedas/a1.html",
            ),
            (
                "http://ec2-3-88-191-223.compute-1.amazonaws.com/atendimento",
                "ec2-3-88-191-223.compute-1.amazonaws.com/atendimento",
            ),
            (
                "https://sgp1.digitaloceanspaces.com/9t152xfo/mvxnd2hc2g.html?5bjgsyc2ej=931zm1clyt&tpqd0z8bth=bzdu0l23gb&c75mr6v06x=hkuxmsn99b&email=user@example.invalid",
                "sgp1.digitaloceanspaces.com/9t152xfo/mvxnd2hc2g.html?5bjgsyc2ej=931zm1clyt&tpqd0z8bth=bzdu0l23gb&c75mr6v06x=hkuxmsn99b&email=user@example.invalid",
            ),
            // A query on the root path is one page too.
            (
                "http://s3.amazonaws.com/?bucket=evil",
                "s3.amazonaws.com/?bucket=evil",
            ),
        ] {
            let format = if line.starts_with("||") {
                SourceFormat::AdblockHosts
            } else {
                SourceFormat::Urls
            };
            assert_eq!(
                exprs(format, line.as_bytes()),
                Ok(vec![expression.to_owned()]),
                "{line}"
            );
        }
        // So is an adblock path rule (and what `^` also matches under it).
        assert_eq!(
            exprs(
                SourceFormat::AdblockHosts,
                b"||s3.amazonaws.com/evil-bucket/login.html^$all"
            ),
            Ok(vec![
                "s3.amazonaws.com/evil-bucket/login.html".to_owned(),
                "s3.amazonaws.com/evil-bucket/login.html/".to_owned()
            ])
        );
    }

    // What stays rejected is host-wide, and says
    // which part of the Public Suffix List it is on.
    #[test]
    fn host_wide_entries_on_public_suffixes_are_rejected_by_section() {
        for (format, line, why) in [
            // Real lines: phishing-domains-hosts-2020.txt, urlhaus-filter.txt.
            (SourceFormat::Hosts, "0.0.0.0 com", reason::PUBLIC_SUFFIX_ICANN),
            (SourceFormat::Hosts, "0.0.0.0 IE", reason::PUBLIC_SUFFIX_ICANN),
            (
                SourceFormat::Hosts,
                "0.0.0.0 network.",
                reason::PUBLIC_SUFFIX_ICANN,
            ),
            (
                SourceFormat::Hosts,
                "0.0.0.0 s3.amazonaws.com",
                reason::PUBLIC_SUFFIX_PRIVATE,
            ),
            (
                SourceFormat::Hosts,
                "0.0.0.0 cluster013.hosting.ovh.net",
                reason::PUBLIC_SUFFIX_PRIVATE,
            ),
            (
                SourceFormat::AdblockHosts,
                "ams1.vultrobjects.com",
                reason::PUBLIC_SUFFIX_PRIVATE,
            ),
            (
                SourceFormat::AdblockHosts,
                "||s3.amazonaws.com^",
                reason::PUBLIC_SUFFIX_PRIVATE,
            ),
            (SourceFormat::Domains, "co.uk", reason::PUBLIC_SUFFIX_ICANN),
            (SourceFormat::Domains, "github.io", reason::PUBLIC_SUFFIX_PRIVATE),
            // The wildcard rule `*.compute-1.amazonaws.com` makes this a suffix.
            (
                SourceFormat::Domains,
                "ec2-1-2-3-4.compute-1.amazonaws.com",
                reason::PUBLIC_SUFFIX_PRIVATE,
            ),
            // A URL whose path is `/` (empty query included) is host-wide.
            (
                SourceFormat::Urls,
                "https://s3.amazonaws.com",
                reason::PUBLIC_SUFFIX_PRIVATE,
            ),
            (
                SourceFormat::Urls,
                "https://s3.amazonaws.com//?",
                reason::PUBLIC_SUFFIX_PRIVATE,
            ),
            (SourceFormat::Json, "com", reason::PUBLIC_SUFFIX_ICANN),
        ] {
            assert_eq!(exprs(format, line.as_bytes()), Err(why), "{format:?} {line}");
        }
        assert_eq!(
            exprs(SourceFormat::Domains, b"user.github.io"),
            Ok(vec!["user.github.io/".to_owned()])
        );
        let (out, report) = collect(b"http://0.0.0.0/\nhttp://127.0.0.1/x\n", SourceFormat::Urls);
        assert!(out.is_empty());
        assert_eq!(report.rejected[reason::LOOPBACK], 2);
    }
}
