//! The `adblock_hosts` format: adblock network rules that name a host or a
//! URL.

use super::hosts::read_domain;
use super::outcome::reason;
use super::url_entry::{url_entry, url_read};
use super::visit::Visit;

/// What an adblock rule blocks.
enum AdblockRule<'a> {
    /// A host (`||host^`, a bare host).
    Host(&'a [u8]),
    /// A URL (`||host/path^`, `|http://…|`).
    Url(&'a [u8]),
}

/// An adblock network rule of urlhaus-filter's kinds: `||host^`,
/// `||host/path^$options`, `|http://…|`, or a bare host. Rules with
/// wildcards, regular expressions or exceptions (`@@`) cannot be expressed
/// as Safe Browsing expressions, and cosmetic rules block nothing: they
/// are rejected.
fn adblock_rule(line: &[u8]) -> Result<AdblockRule<'_>, &'static str> {
    if line.starts_with(b"@@") {
        return Err(reason::ADBLOCK_EXCEPTION);
    }
    const COSMETIC: [&[u8]; 4] = [b"##", b"#@#", b"#?#", b"#$#"];
    if COSMETIC
        .iter()
        .any(|sep| line.windows(sep.len()).any(|w| w == *sep))
    {
        return Err(reason::ADBLOCK_COSMETIC);
    }
    // Options after the last `$` when they are options (else the `$` is
    // part of a URL: `|http://a.example/p?x=$y|`), then the `|` end anchor,
    // then the `^` separator before it.
    let rule = match memchr::memrchr(b'$', line) {
        Some(i) if are_adblock_options(line.get(i + 1..).unwrap_or_default()) => {
            line.get(..i).unwrap_or_default()
        }
        _ => line,
    };
    let rule = rule.strip_suffix(b"|").unwrap_or(rule);
    let rule = rule.strip_suffix(b"^").unwrap_or(rule);
    let (rule, anchored_host) = match rule.strip_prefix(b"||") {
        Some(r) => (r, true),
        None => (rule.strip_prefix(b"|").unwrap_or(rule), false),
    };
    if rule.is_empty() || rule.contains(&b'*') || rule.starts_with(b"/") {
        return Err(reason::ADBLOCK_NOT_HOST_OR_URL);
    }
    let has_path = rule.contains(&b'/');
    Ok(
        if has_path || !anchored_host && rule.windows(3).any(|w| w == b"://") {
            AdblockRule::Url(rule)
        } else {
            AdblockRule::Host(rule)
        },
    )
}

/// Network-rule option names of Adblock Plus and uBlock Origin (their
/// filter syntax documentation), which may follow a rule's last `$`.
const ADBLOCK_OPTIONS: &[&str] = &[
    "1p",
    "3p",
    "all",
    "badfilter",
    "cname",
    "csp",
    "css",
    "denyallow",
    "doc",
    "document",
    "domain",
    "ehide",
    "elemhide",
    "empty",
    "first-party",
    "font",
    "frame",
    "from",
    "generichide",
    "genericblock",
    "ghide",
    "header",
    "image",
    "important",
    "inline-font",
    "inline-script",
    "ipaddress",
    "match-case",
    "media",
    "method",
    "mp4",
    "object",
    "other",
    "permissions",
    "ping",
    "popunder",
    "popup",
    "redirect",
    "redirect-rule",
    "removeparam",
    "replace",
    "rewrite",
    "script",
    "shide",
    "specifichide",
    "strict1p",
    "strict3p",
    "stylesheet",
    "subdocument",
    "third-party",
    "to",
    "urlskip",
    "uritransform",
    "webrtc",
    "websocket",
    "xhr",
    "xmlhttprequest",
];

/// Whether `text` (after a rule's last `$`) is a list of adblock options:
/// comma-separated known names, each maybe negated (`~`) and with a value
/// (`domain=a.example|b.example`).
fn are_adblock_options(text: &[u8]) -> bool {
    !text.is_empty()
        && text.split(|&b| b == b',').all(|option| {
            let option = option.strip_prefix(b"~").unwrap_or(option);
            let name = option.split(|&b| b == b'=').next().unwrap_or_default();
            ADBLOCK_OPTIONS
                .iter()
                .any(|known| known.as_bytes().eq_ignore_ascii_case(name))
        })
}

pub(super) fn read_adblock(line: &[u8], v: &mut impl Visit) {
    match adblock_rule(line) {
        Ok(AdblockRule::Host(host)) => read_domain(host, line, v),
        Ok(AdblockRule::Url(url)) => match v.canonicalizing(|| url_entry(url)) {
            Ok(entry) => v.accepted(&[url_read(url, entry)]),
            Err(reason) => v.rejected(line, reason),
        },
        Err(reason) => v.rejected(line, reason),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::SourceFormat;
    use crate::sources::reason;
    use crate::sources::tests::{collect, hashes, read_one};

    #[test]
    fn adblock_rules() {
        let text = b"! Title: x\nbad.example\n||evil.example^\n||files.example/a/b.exe^$all\n||*.ads^\n@@||ok.example^\n1.2.3.4\nexample.com##.ad\n";
        let (out, report) = collect(text, SourceFormat::AdblockHosts);
        assert_eq!(
            out,
            hashes(&[
                "bad.example/",
                "evil.example/",
                "files.example/a/b.exe",
                "1.2.3.4/"
            ])
        );
        assert_eq!(report.rejected_total(), 3);
        assert_eq!(report.rejected[reason::ADBLOCK_COSMETIC], 1);
        let readings = read_one(SourceFormat::AdblockHosts, b"||files.example/a/b.exe^$all").unwrap();
        assert_eq!(readings[0].text, b"files.example/a/b.exe");
    }
}
