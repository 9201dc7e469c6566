//! The `adblock_hosts` format: adblock network rules that name a host or a
//! URL.

use super::entry::Entry;
use super::hosts::{is_ip_literal, read_domain_marked, read_hosts};
use super::outcome::reason;
use super::url_entry::{url_entry, url_read};
use super::visit::{Visit, directory_too_deep};

/// What an adblock rule blocks.
enum AdblockRule<'a> {
    /// A host (`||host^`, a bare host).
    Host(&'a [u8]),
    /// A URL (`||host/path^`, `|http://…|`), whether it ended in the `^`
    /// separator, and whether in the `|` end anchor.
    Url(&'a [u8], Separator, End),
}

/// Whether a URL rule ended in `|`, which anchors it at the URL's end:
/// without it a rule matches every URL that starts with it (`||a.example/p`
/// blocks `a.example/p/x.exe` and `a.example/pq`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    Anchored,
    Open,
}

/// Whether a URL rule ended in `^`, which matches a separator (any byte
/// but a letter, digit, `_`, `-`, `.` or `%`) or the end of the URL:
/// `||a.example/p^` blocks `a.example/p`, `a.example/p?q` and everything
/// under `a.example/p/`, where an expression of `a.example/p` alone
/// matches only the first two (Safe Browsing's path prefixes end in `/`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Separator {
    Yes,
    No,
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
    // Every cosmetic, scriptlet and snippet separator of Adblock Plus,
    // uBlock Origin and AdGuard (`#` then an optional `@` exception, then
    // `?`, `$`, `$?` or `%`, then `#`). One not known here would be read
    // as a URL whose `#` starts a fragment: `example.com#%#//scriptlet(…)`
    // or `example.com#@?#a[href="/x"]` would list all of `example.com/`.
    const COSMETIC: [&[u8]; 10] = [
        b"##", b"#@#", b"#?#", b"#@?#", b"#$#", b"#@$#", b"#$?#", b"#@$?#", b"#%#", b"#@%#",
    ];
    if COSMETIC
        .iter()
        .any(|sep| line.windows(sep.len()).any(|w| w == *sep))
        || is_html_filtering_rule(line)
    {
        return Err(reason::ADBLOCK_COSMETIC);
    }
    // Options after the last `$` when they are options (else the `$` is
    // part of a URL: `|http://a.example/p?x=$y|`), then the `|` end anchor,
    // then the `^` separator before it.
    let rule = match memchr::memrchr(b'$', line) {
        Some(i) if are_adblock_options(line.get(i + 1..).unwrap_or_default()) => {
            if has_non_blocking_option(line.get(i + 1..).unwrap_or_default()) {
                return Err(reason::ADBLOCK_NOT_A_BLOCK);
            }
            if blocks_no_visit(line.get(i + 1..).unwrap_or_default()) {
                return Err(reason::ADBLOCK_NOT_A_VISIT);
            }
            line.get(..i).unwrap_or_default()
        }
        // Options that are not all known: a host rule's (`||host^`, no
        // path), which is no host name with a `$` in it, or a URL rule's
        // when at least one of them is known (`$all,object-subrequest`);
        // else the `$` may be the URL's (`||a.example/pay?sum=$5`).
        Some(i)
            if looks_like_options(line.get(i + 1..).unwrap_or_default())
                && (line.starts_with(b"||") && !line.get(..i).unwrap_or_default().contains(&b'/')
                    || has_known_option(line.get(i + 1..).unwrap_or_default())) =>
        {
            return Err(reason::ADBLOCK_UNKNOWN_OPTION);
        }
        _ => line,
    };
    // A trailing `*` matches what the rule's open end already matches
    // (Adblock Plus: "a wildcard at the end is the same as none"):
    // `||a.example^*` is `||a.example^`, `||a.example/p*` is
    // `||a.example/p`. Any other `*` is a wildcard, refused below.
    let rule = strip_trailing_wildcards(rule);
    let (rule, end) = match rule.strip_suffix(b"|") {
        Some(r) => (r, End::Anchored),
        None => (rule, End::Open),
    };
    let (rule, separator) = match rule.strip_suffix(b"^") {
        Some(r) => (r, Separator::Yes),
        None => (rule, Separator::No),
    };
    let (rule, anchored_host) = match rule.strip_prefix(b"||") {
        // `||*.a.example^`, every subdomain of `a.example`: listed
        // host-wide, as a `domains` list's `*.a.example` is (the name
        // itself too, which a host-wide expression cannot leave out).
        Some(r) => (r.strip_prefix(b"*.").unwrap_or(r), true),
        // `://a.example/p`, `://a.example^`: a URL of any scheme whose
        // host starts with the rule's (the `^` or `/` ends it), so that
        // host's page, or the host: read as `||` reads it (with no text
        // before `://` there is no scheme; kept, it was refused as one).
        None if rule.starts_with(b"://") => (rule.get(3..).unwrap_or_default(), true),
        // A bare `*.a.example` (or `|*.a.example`) matches every
        // subdomain too: the same.
        None => {
            let r = rule.strip_prefix(b"|").unwrap_or(rule);
            (r.strip_prefix(b"*.").unwrap_or(r), false)
        }
    };
    if rule.is_empty() || rule.contains(&b'*') || rule.starts_with(b"/") {
        return Err(reason::ADBLOCK_NOT_HOST_OR_URL);
    }
    let has_path = rule.contains(&b'/');
    Ok(
        if has_path || !anchored_host && rule.windows(3).any(|w| w == b"://") {
            AdblockRule::Url(rule, separator, end)
        } else {
            AdblockRule::Host(rule)
        },
    )
}

/// Whether `line` is an AdGuard HTML filtering rule (`example.org$$script[…]`,
/// `$@$` its exception): the sites it applies on (names, commas, `~`;
/// none for every site), then `$$` or `$@$`. It removes page content; it
/// blocks no site. A `$$` after a `/` or an anchor is a URL's
/// (`||evil.example/%24$$/login.php`).
fn is_html_filtering_rule(line: &[u8]) -> bool {
    let at = line
        .windows(2)
        .position(|w| w == b"$$")
        .into_iter()
        .chain(line.windows(3).position(|w| w == b"$@$"))
        .min();
    at.and_then(|at| line.get(..at)).is_some_and(|sites| {
        sites
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b',' | b'~' | b'*'))
    })
}

/// `rule` without the `*`s it ends in (when something is left before them).
fn strip_trailing_wildcards(rule: &[u8]) -> &[u8] {
    let stars = rule.iter().rev().take_while(|&&b| b == b'*').count();
    match rule.get(..rule.len() - stars) {
        Some(kept) if !kept.is_empty() && kept != b"||" && kept != b"|" => kept,
        _ => rule,
    }
}

/// Network-rule option names of Adblock Plus, uBlock Origin and AdGuard
/// (their filter syntax documentation), which may follow a rule's last
/// `$`. A rule with any of them is read as the host or URL it names (the
/// conditions cannot be expressions; Safe Browsing lists the page), unless
/// one is in [`NON_BLOCKING_OPTIONS`] or they make it block no visit to
/// the page ([`blocks_no_visit`]). AdGuard DNS's
/// `client`, `ctag`, `dnstype` and `dnsrewrite` are left out: they narrow
/// a rule to some clients or record types, or rewrite the answer, and such
/// a host rule is refused ([`reason::ADBLOCK_UNKNOWN_OPTION`]).
const ADBLOCK_OPTIONS: &[&str] = &[
    "_",
    "1p",
    "3p",
    "all",
    "badfilter",
    "beacon",
    "cname",
    "cookie",
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
    "object-subrequest",
    "other",
    "permissions",
    "ping",
    "popunder",
    "popup",
    "reason",
    "redirect",
    "redirect-rule",
    "removeheader",
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
    "webbundle",
    "webrtc",
    "websocket",
    "xhr",
    "xmlhttprequest",
];

/// Options that make a rule something other than a block of what it names:
/// it cancels another rule (`badfilter`), modifies requests or responses
/// (`removeparam`, `csp` and its shorthands `inline-script` and
/// `inline-font`, `replace`, `uritransform`, `urlskip`, `permissions`),
/// redirects only what another rule blocks
/// (`redirect-rule`), or turns off element hiding or generic rules on a
/// page (`elemhide`, `generichide`, `specifichide`, `genericblock` and
/// their short names). Listing its host would block a site the list does
/// not block (`||bank.example^$badfilter`).
const NON_BLOCKING_OPTIONS: &[&str] = &[
    "badfilter",
    "cookie",
    "csp",
    "ehide",
    "elemhide",
    "genericblock",
    "generichide",
    "ghide",
    "inline-font",
    "inline-script",
    "permissions",
    "redirect-rule",
    "removeheader",
    "removeparam",
    "replace",
    "shide",
    "specifichide",
    "uritransform",
    "urlskip",
];

/// The options of `text` (after a rule's last `$`, split at `,`): each as
/// whether it is negated (`~`), its name, and its value after `=`.
fn options(text: &[u8]) -> impl Iterator<Item = (bool, &[u8], Option<&[u8]>)> {
    text.split(|&b| b == b',').map(|option| {
        let (negated, option) = match option.strip_prefix(b"~") {
            Some(rest) => (true, rest),
            None => (false, option),
        };
        match memchr::memchr(b'=', option) {
            Some(i) => (negated, option.get(..i).unwrap_or_default(), option.get(i + 1..)),
            None => (negated, option, None),
        }
    })
}

/// Whether option `name` is one of `list`.
fn named(list: &[&str], name: &[u8]) -> bool {
    list.iter()
        .any(|known| known.as_bytes().eq_ignore_ascii_case(name))
}

/// Whether options `text` (known ones) hold one of [`NON_BLOCKING_OPTIONS`]
/// not negated, or `~badfilter` (adblockers refuse or ignore such a rule).
/// Another one negated keeps the block: `$all,~inline-font,~inline-script`
/// (malware lists' form) blocks everything but those two.
fn has_non_blocking_option(text: &[u8]) -> bool {
    options(text).any(|(negated, name, _)| {
        named(NON_BLOCKING_OPTIONS, name) && (!negated || name.eq_ignore_ascii_case(b"badfilter"))
    })
}

/// Whether options `text` name at least one of [`ADBLOCK_OPTIONS`].
fn has_known_option(text: &[u8]) -> bool {
    options(text).any(|(_, name, _)| named(ADBLOCK_OPTIONS, name))
}

/// Request types that are a visit to a page: a page loaded in a tab or
/// window (`document`, its short name `doc`, `popup`, `popunder`), or all
/// of them (`all`).
const VISIT_TYPES: &[&str] = &["all", "doc", "document", "popunder", "popup"];

/// Request types a page makes for its resources and frames: a rule of
/// these alone blocks them, never a visit to the page it names.
const RESOURCE_TYPES: &[&str] = &[
    "beacon",
    "css",
    "font",
    "frame",
    "image",
    "media",
    "mp4",
    "object",
    "object-subrequest",
    "other",
    "ping",
    "script",
    "stylesheet",
    "subdocument",
    "webbundle",
    "webrtc",
    "websocket",
    "xhr",
    "xmlhttprequest",
];

/// Whether a rule with options `text` (known, blocking ones) blocks no
/// visit to the host or URL it names, only some requests pages make
/// (Adblock Plus, uBlock Origin and AdGuard filter syntax): it names
/// request types and none is a page's ([`VISIT_TYPES`]); it excludes pages
/// (`~document`, `~doc`); it holds for requests from some sites only
/// (`domain=` or `from=` with a site not negated:
/// `||cdn.example^$script,domain=evil.example` blocks the CDN's scripts on
/// one site's pages), or from another site than the page's
/// (`third-party`, `3p`, `strict3p`, `~first-party`, `~1p`, `~strict1p`),
/// which a visit is not; it holds for methods other than `GET`
/// (`method=post`), or when a response has a header (`header=`) or the
/// host some address (`ipaddress=`). Listing its host would block a site the list
/// does not block for a visit. Negated types (`~script`) and sites
/// (`domain=~a.example`) leave a block of every visit.
fn blocks_no_visit(text: &[u8]) -> bool {
    let mut resource = false;
    let mut visit = false;
    for (negated, name, value) in options(text) {
        if named(VISIT_TYPES, name) {
            if negated && named(&["doc", "document"], name) {
                return true;
            }
            visit |= !negated;
        } else if named(RESOURCE_TYPES, name) {
            resource |= !negated;
        } else {
            let other_site = named(&["3p", "strict3p", "third-party"], name) && !negated
                || named(&["1p", "first-party", "strict1p"], name) && negated;
            let some_sites = named(&["domain", "from"], name)
                && value.is_some_and(|sites| sites.split(|&b| b == b'|').any(|site| !site.starts_with(b"~")));
            // A visit is a `GET`: `method=post` (or `~get`) blocks none.
            let not_get = named(&["method"], name)
                && value.is_some_and(|methods| {
                    let methods = || methods.split(|&b| b == b'|');
                    methods().any(|m| m.eq_ignore_ascii_case(b"~get"))
                        || methods().any(|m| !m.starts_with(b"~"))
                            && !methods().any(|m| m.eq_ignore_ascii_case(b"get"))
                });
            // Only when a response has a header, or the host resolves to
            // some address: no block of every visit.
            let conditional = named(&["header", "ipaddress"], name) && !negated;
            if other_site || some_sites || not_get || conditional {
                return true;
            }
        }
    }
    resource && !visit
}

/// Whether `text` (after a rule's last `$`) has the shape of adblock
/// options, known or not: comma-separated names of letters, digits, `_`
/// and `-`, each maybe negated and with a value.
fn looks_like_options(text: &[u8]) -> bool {
    !text.is_empty()
        && options(text).all(|(_, name, _)| {
            !name.is_empty()
                && name
                    .iter()
                    .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
        })
}

/// Whether `text` (after a rule's last `$`) is a list of adblock options:
/// comma-separated known names, each maybe negated (`~`) and with a value
/// (`domain=a.example|b.example`).
fn are_adblock_options(text: &[u8]) -> bool {
    !text.is_empty() && options(text).all(|(_, name, _)| named(ADBLOCK_OPTIONS, name))
}

pub(super) fn read_adblock(line: &[u8], v: &mut impl Visit) {
    if let Some(names) = hosts_line(line) {
        return read_hosts(names, v);
    }
    match adblock_rule(line) {
        // `||3232235777^` is a host: a number there is no stray column.
        Ok(AdblockRule::Host(host)) => read_domain_marked(host, line, line.starts_with(b"||"), v),
        Ok(AdblockRule::Url(url, separator, end)) => {
            // `||a.example/p^` also stands for the directory `a.example/p/`:
            // a second reading of the same entry; so does `||a.example/p`,
            // a prefix of every URL under it (`a.example/pq`, also blocked,
            // has no Safe Browsing expression). Not for a rule anchored at
            // the end without `^` (`|http://a.example/p|`: that URL only),
            // a path that already ends in `/`, nor one with a query (its
            // `^` can only match the query's own separators or its end).
            let under = (separator == Separator::Yes || end == End::Open) && !url.contains(&b'?');
            let directory = (under && !url.ends_with(b"/")).then(|| [url, b"/"].concat());
            let read = v.canonicalizing(|| {
                let entry = url_entry(url)?;
                let under = directory.as_deref().map(|d| url_entry(d).map(|e| url_read(d, e)));
                Ok((url_read(url, entry), under.transpose()?))
            });
            let (read, under_read) = match read {
                Ok(readings) => readings,
                Err(reason) => return v.rejected(line, reason),
            };
            // The directory the rule stands for: its second reading, or
            // the rule itself when it ends in `/`.
            let deep = under
                && matches!(&under_read.as_ref().unwrap_or(&read).entry,
                    Entry::Url(u) if directory_too_deep(u.first.most_specific_expression()));
            match under_read {
                None => v.accepted(&[read]),
                Some(under) => v.accepted(&[read, under]),
            }
            if deep {
                v.directory_too_deep();
            }
        }
        Err(reason) => v.rejected(line, reason),
    }
}

/// A hosts-file line in an adblock list (`0.0.0.0 evil.example`, as
/// uBlock Origin and AdGuard read it in any filter list): an address, then
/// white space, then names, up to a `#` after white space (a comment, as
/// in a hosts file). No adblock rule starts so.
fn hosts_line(line: &[u8]) -> Option<&[u8]> {
    let address = line.iter().position(|b| b.is_ascii_whitespace())?;
    if !is_ip_literal(line.get(..address)?) {
        return None;
    }
    let comment = line
        .windows(2)
        .position(|w| w[0].is_ascii_whitespace() && w[1] == b'#')
        .unwrap_or(line.len());
    line.get(..comment)
}

#[cfg(test)]
mod tests {
    use blocksieve_format::FullHash;

    /// A hosts-file line in an adblock list (uBlock Origin and AdGuard read
    /// `0.0.0.0 evil.example` in any filter list) was refused as `not a
    /// host name`: its names were not listed.
    #[test]
    fn regression_a_hosts_file_line_lists_its_names() {
        use crate::sources::{EntryOutcome, read_line};
        for (line, expected) in [
            (&b"0.0.0.0 evil.example"[..], &["evil.example/"][..]),
            (
                b"127.0.0.1\tevil.example other.example # ads",
                &["evil.example/", "other.example/"],
            ),
            (b":: evil.example", &["evil.example/"]),
        ] {
            let published: Vec<String> = read_line(SourceFormat::AdblockHosts, line)
                .entries
                .into_iter()
                .flat_map(|e| match e {
                    EntryOutcome::Accepted(readings) => {
                        readings.into_iter().flat_map(|r| r.expressions).collect()
                    }
                    EntryOutcome::Rejected { reason, .. } => vec![reason.to_owned()],
                })
                .collect();
            assert_eq!(published, expected, "{}", line.escape_ascii());
        }
        // A host rule stays one.
        assert_eq!(
            crate::sources::tests::first_expr(SourceFormat::AdblockHosts, b"||1.2.3.4^"),
            Ok("1.2.3.4/".to_owned())
        );
    }

    use crate::config::SourceFormat;
    use crate::sources::reason;
    use crate::sources::tests::{collect, hashes, read_one};

    /// A rule that starts with `://` (any scheme, then the host) was
    /// refused as text joined before a scheme, a reason untrue of it, and
    /// the page or host it names was not listed.
    #[test]
    fn regression_a_rule_of_any_scheme_lists_its_page_or_host() {
        for (rule, expected) in [
            (
                &b"://evil.example/login.php"[..],
                &["evil.example/login.php", "evil.example/login.php/"][..],
            ),
            (
                b"://evil.example/login^$all",
                &["evil.example/login", "evil.example/login/"],
            ),
            (b"://evil.example^", &["evil.example/"]),
            (b"://evil.example/", &["evil.example/"]),
        ] {
            let (out, report) = collect(rule, SourceFormat::AdblockHosts);
            assert_eq!(report.rejected_total(), 0, "{} {report:?}", rule.escape_ascii());
            assert_eq!(out, hashes(expected), "{}", rule.escape_ascii());
        }
        // Nothing after it names no host.
        assert_eq!(
            read_one(SourceFormat::AdblockHosts, b":///x").unwrap_err(),
            reason::ADBLOCK_NOT_HOST_OR_URL
        );
    }

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
                "files.example/a/b.exe/",
                "1.2.3.4/",
                "[::ffff:1.2.3.4]/"
            ])
        );
        assert_eq!(report.rejected_total(), 3);
        assert_eq!(report.rejected[reason::ADBLOCK_COSMETIC], 1);
        let readings = read_one(SourceFormat::AdblockHosts, b"||files.example/a/b.exe^$all").unwrap();
        assert_eq!(readings[0].text, b"files.example/a/b.exe");
    }

    /// `^` matches `/`: `||github.com/a/b^` (997 of urlhaus-filter's 6,054
    /// path rules end in a segment without a dot) blocks every URL under
    /// `github.com/a/b/`, which Safe Browsing matches by the path prefix
    /// `github.com/a/b/`.
    #[test]
    fn a_url_rule_ending_in_the_separator_also_stands_for_its_directory() {
        let readings = read_one(SourceFormat::AdblockHosts, b"||github.com/a/b^$all").unwrap();
        let exprs: Vec<_> = readings.iter().flat_map(|r| r.expressions.clone()).collect();
        assert_eq!(exprs, ["github.com/a/b", "github.com/a/b/"]);
        assert_eq!(readings[1].text, b"github.com/a/b/");
        // Anchored at the end without `^`, with a query, or already a
        // directory: one reading.
        for (rule, expression) in [
            (&b"||files.example/a/b?x=1^"[..], "files.example/a/b?x=1"),
            (b"||files.example/a/^", "files.example/a/"),
            (b"|http://files.example/a/b|", "files.example/a/b"),
        ] {
            let readings = read_one(SourceFormat::AdblockHosts, rule).unwrap();
            let exprs: Vec<_> = readings.iter().flat_map(|r| r.expressions.clone()).collect();
            assert_eq!(exprs, [expression], "{}", rule.escape_ascii());
        }
        // One entry accepted, two expressions.
        let (out, report) = collect(b"||paste.example/d/x/0^$all\n", SourceFormat::AdblockHosts);
        assert_eq!(out, hashes(&["paste.example/d/x/0", "paste.example/d/x/0/"]));
        assert_eq!(report.accepted, 1);
    }

    /// An agent checks a path's first four directory prefixes (`/` to
    /// `/a/b/c/`): a rule standing for a deeper directory is listed and
    /// counted, since the pages under it are not covered. Not a rule
    /// anchored at the end or with a query, which stands for no directory,
    /// nor one whose directory an agent checks.
    #[test]
    fn a_rule_for_a_directory_deeper_than_agents_check_is_counted() {
        let text = b"||evil.example/a/b/c/d^$all\n||evil.example/a/b/c/d/^\n||evil.example/a/b/c/d/e.exe\n||evil.example/a/b/c^\n||evil.example/a/b/c/\n|http://evil.example/a/b/c/d|\n||evil.example/a/b/c/d?x^\n||evil.example/a/b/../c/d^\n";
        let (out, report) = collect(text, SourceFormat::AdblockHosts);
        assert_eq!(report.accepted, 8, "{report:?}");
        assert_eq!(report.directory_too_deep, 3, "{report:?}");
        assert!(out.contains(&FullHash::of(b"evil.example/a/b/c/d/")));
        // `/a/b/c/d/` is not among what an agent checks for a page under it.
        let page = blocksieve_format::canonicalize("http://evil.example/a/b/c/d/x.html").unwrap();
        let checked: Vec<_> = page.expressions().map(|e| e.to_string()).collect();
        assert!(checked.contains(&"evil.example/a/b/c/".to_owned()));
        assert!(
            !checked.contains(&"evil.example/a/b/c/d/".to_owned()),
            "{checked:?}"
        );
    }

    /// `||host/path` (no `^`, no end `|`) is a prefix of every URL under the
    /// path, which an adblocker blocks: listed as `host/path` alone it
    /// missed `host/path/x.exe`.
    #[test]
    fn a_url_rule_open_at_the_end_also_stands_for_its_directory() {
        for rule in [
            &b"||evil.example/path"[..],
            b"|http://evil.example/path",
            b"||evil.example/path$all",
        ] {
            let readings = read_one(SourceFormat::AdblockHosts, rule).unwrap();
            let exprs: Vec<_> = readings.iter().flat_map(|r| r.expressions.clone()).collect();
            assert_eq!(
                exprs,
                ["evil.example/path", "evil.example/path/"],
                "{}",
                rule.escape_ascii()
            );
        }
    }

    /// Options of uBlock Origin (`_`, `doc`, `reason=`) and AdGuard DNS
    /// (`dnstype=`) keep a host rule; options that narrow it to some clients
    /// or that this reader does not know refuse it by that reason, not as
    /// "not a host name".
    #[test]
    fn host_rules_with_other_options_are_read_or_refused_by_their_option() {
        for rule in [
            &b"||evil.example^$_"[..],
            b"||evil.example^$doc",
            b"||evil.example^$reason=phishing",
        ] {
            let readings = read_one(SourceFormat::AdblockHosts, rule).unwrap();
            assert_eq!(
                readings[0].expressions,
                ["evil.example/"],
                "{}",
                rule.escape_ascii()
            );
        }
        for rule in [
            &b"||evil.example^$dnstype=A"[..],
            b"||bank.example^$dnstype=HTTPS",
            b"||bank.example^$dnstype=~A|~AAAA",
            b"||evil.example^$client=192.168.0.1",
            b"||evil.example^$important,ctag=device_pc",
            b"||evil.example^$dnsrewrite=NOERROR;A;1.2.3.4",
            b"||evil.example^$no-such-option",
            b"||evil.example$no-such-option",
        ] {
            assert_eq!(
                read_one(SourceFormat::AdblockHosts, rule).map(|_| ()),
                Err(reason::ADBLOCK_UNKNOWN_OPTION),
                "{}",
                rule.escape_ascii()
            );
        }
        // A `$` inside a URL rule is still the URL's.
        let readings = read_one(SourceFormat::AdblockHosts, b"|http://a.example/p?x=$y|").unwrap();
        assert_eq!(readings[0].expressions, ["a.example/p?x=$y"]);
    }

    /// A rule that cancels another (`$badfilter`), modifies requests or
    /// responses, or turns off hiding blocks nothing: listing its host would
    /// block a site the list does not (found by a reviewer:
    /// `||bank.example^$badfilter` was listed as `bank.example/`).
    #[test]
    fn rules_that_do_not_block_are_refused() {
        for rule in [
            &b"||bank.example^$badfilter"[..],
            b"||bank.example^$removeparam=utm_source",
            b"||bank.example^$csp=script-src 'none'",
            b"||bank.example^$all,badfilter",
            b"||bank.example/p^$redirect-rule=noop.js",
            b"||bank.example^$generichide",
            b"||bank.example^$inline-script",
            b"||bank.example^$inline-font",
        ] {
            assert_eq!(
                read_one(SourceFormat::AdblockHosts, rule).map(|_| ()),
                Err(reason::ADBLOCK_NOT_A_BLOCK),
                "{}",
                rule.escape_ascii()
            );
        }
        assert_eq!(
            read_one(
                SourceFormat::AdblockHosts,
                b"||bank.example^$third-party,~badfilter"
            )
            .map(|_| ()),
            Err(reason::ADBLOCK_NOT_A_BLOCK)
        );
    }

    /// A rule for some requests pages make only (their scripts or images,
    /// requests on some sites, requests from another site) was listed
    /// host-wide: `||ajax.googleapis.com^$script,domain=evil.example` listed
    /// all of Google's CDN, which the rule blocks on one site's pages.
    /// Such rules are refused; a page type, negated types or sites, and
    /// first-party keep the block of a visit. A URL rule with an unknown
    /// option beside known ones is refused, not read with its options as
    /// its path; AdGuard's HTML filtering rules are cosmetic.
    #[test]
    fn regression_a_rule_for_some_requests_only_is_no_block_of_a_visit() {
        refused_as(
            reason::ADBLOCK_NOT_A_VISIT,
            &[
                b"||ajax.googleapis.com^$script,domain=evil.example",
                b"||youtube.com^$domain=kids.example",
                b"||bank.example^$popup,domain=phish.example",
                b"||www.google-analytics.com^$third-party",
                b"||cdn.example^$3p",
                b"||cdn.example^$~1p",
                b"||bank.example^$~document",
                b"||bank.example^$all,~doc",
                b"||tracker.example^$image,beacon,ping",
                b"||evil.example/x.js$script",
                b"||a.example^$from=b.example|~c.example",
                // Other conditions no visit meets.
                b"||evil.example^$method=post",
                b"||evil.example^$method=~get",
                b"||evil.example^$header=x-a",
                b"||evil.example^$ipaddress=1.2.3.4",
            ],
        );
        read_as(&[
            (b"||evil.example^$document", "evil.example/"),
            (b"||evil.example^$script,doc", "evil.example/"),
            (b"||evil.example^$popup", "evil.example/"),
            (b"||evil.example^$~script,~image", "evil.example/"),
            (b"||evil.example^$domain=~good.example", "evil.example/"),
            (b"||evil.example^$1p", "evil.example/"),
            (b"||evil.example^$~third-party,important", "evil.example/"),
            (b"||evil.example/dl/x.exe$all", "evil.example/dl/x.exe"),
            // Negated modifiers keep the block.
            (
                b"||evil.example^$all,~inline-font,~inline-script",
                "evil.example/",
            ),
            (b"||evil.example^$all,~csp", "evil.example/"),
            (b"||evil.example^$doc,method=get|post", "evil.example/"),
            (b"||evil.example^$method=~post", "evil.example/"),
            // A `$$` in a URL is the URL's (77 union-feed phishing URLs
            // hold one).
            (
                b"||chenglu123.com/&%5e%25$$%25/login.php$all",
                "chenglu123.com/&^%25$$%25/login.php",
            ),
            (
                b"|http://evil.example/pay.php?amt=$$5|",
                "evil.example/pay.php?amt=$$5",
            ),
            (b"||evil.example/a/$@$/b^", "evil.example/a/$@$/b"),
            // A `$` in a URL stays the URL's when what follows names no
            // option.
            (b"||evil.example/pay?sum=$5", "evil.example/pay?sum=$5"),
        ]);
        refused_as(
            reason::ADBLOCK_UNKNOWN_OPTION,
            &[
                b"||evil.example/dl/mal.exe$all,object-subrequest2",
                b"||evil.example/dl/mal.exe$doc,webbundlex",
            ],
        );
        refused_as(
            reason::ADBLOCK_NOT_A_BLOCK,
            &[
                b"||evil.example/p$cookie",
                b"||evil.example/p$removeheader=refresh",
            ],
        );
        refused_as(
            reason::ADBLOCK_COSMETIC,
            &[
                b"example.org$$script[data-x]",
                b"example.org$@$script[data-x]",
                b"a.example,~b.example$$div",
                b"$$script[tag-content=\"x\"]",
            ],
        );
    }

    /// Asserts that each of `rules` is refused for `why`.
    fn refused_as(why: &str, rules: &[&[u8]]) {
        for rule in rules {
            assert_eq!(
                read_one(SourceFormat::AdblockHosts, rule).map(|_| ()),
                Err(why),
                "{}",
                rule.escape_ascii()
            );
        }
    }

    /// Asserts that each rule's first reading is its expression.
    fn read_as(rules: &[(&[u8], &str)]) {
        for (rule, first) in rules {
            let readings = read_one(SourceFormat::AdblockHosts, rule).unwrap();
            assert_eq!(readings[0].expressions, [*first], "{}", rule.escape_ascii());
        }
    }

    /// A trailing `*` is the same as none in adblock syntax: such rules
    /// were refused as wildcards, their host or URL left unlisted. A `*`
    /// anywhere else still is a wildcard. The syntax header line is a
    /// comment, not a rule refused as `not a host name`.
    #[test]
    fn regression_a_trailing_wildcard_is_read_as_the_rule_without_it() {
        let text = b"[Adblock Plus 2.0]\n[uBlock Origin]\n||evil.example^*\n||files.example/a*\n||b.example/p/**\n||*\n||c*.example^\n||d.example/*/x\n||*.wild.example^\n";
        let (out, report) = collect(text, SourceFormat::AdblockHosts);
        assert_eq!(
            out,
            hashes(&[
                "evil.example/",
                "files.example/a",
                "files.example/a/",
                "b.example/p/",
                "wild.example/",
            ]),
            "{report:?}"
        );
        assert_eq!(report.rejected[reason::ADBLOCK_NOT_HOST_OR_URL], 3, "{report:?}");
        assert_eq!(report.rejected_total(), 3, "{report:?}");
        // Only the syntax's own names make a header: a URL list's bracketed
        // URL stays an entry.
        let (out, _) = collect(
            b"[ http://evil.example/x ]\n[url] http://evil.example/y\n",
            SourceFormat::Urls,
        );
        for listed in hashes(&["evil.example/x", "evil.example/y"]) {
            assert!(out.contains(&listed), "{out:?}");
        }
    }

    /// A bare `*.a.example` rule (no `||`), every subdomain of `a.example`
    /// as `||*.a.example^` is, was refused as "not a host or URL", where
    /// `||*.a.example^` and a `domains` list's `*.a.example` list
    /// `a.example/`: every subdomain an ad-blocker blocks for it was left
    /// unlisted. A `*` anywhere else is still a wildcard.
    #[test]
    fn regression_a_bare_wildcard_subdomain_rule_lists_its_domain() {
        for rule in [
            &b"*.evil.example"[..],
            b"*.evil.example^",
            b"*.evil.example^$doc",
            b"|*.evil.example^",
        ] {
            assert_eq!(
                read_one(SourceFormat::AdblockHosts, rule).map(|r| r[0].expressions.clone()),
                Ok(vec!["evil.example/".to_owned()]),
                "{}",
                rule.escape_ascii()
            );
        }
        assert_eq!(
            read_one(SourceFormat::AdblockHosts, b"*.evil.example/dl/x.exe^")
                .map(|r| r[0].expressions.clone()),
            Ok(vec!["evil.example/dl/x.exe".to_owned()])
        );
        for rule in [&b"*evil.example^"[..], b"*.*.evil.example^", b"a.*.example^"] {
            assert_eq!(
                read_one(SourceFormat::AdblockHosts, rule).map(|_| ()),
                Err(reason::ADBLOCK_NOT_HOST_OR_URL),
                "{}",
                rule.escape_ascii()
            );
        }
    }

    /// A rule with a cosmetic or scriptlet separator of AdGuard (`#%#`,
    /// `#@%#`, `#@?#`, `#$?#`, `#@$?#`, `#@$#`) was read as a URL whose
    /// `#` starts a fragment: with a `/` after it, the rule listed its whole
    /// site (`example.com#%#//scriptlet(…)` as `example.com/`); without
    /// one it was refused as not a host name. Both are cosmetic rules.
    #[test]
    fn regression_adguard_cosmetic_and_scriptlet_rules_list_no_site() {
        for rule in [
            &b"example.com#%#//scriptlet('abort-on-property-read', 'alert')"[..],
            b"example.com#@%#//scriptlet('set-constant', 'x', 'y')",
            b"example.com#%#window.x=1",
            b"example.com#@?#div:has(a[href=\"/x\"])",
            b"example.com#$?#body { background: url(/x.png) }",
            b"example.com#@$?#body { background: url(/x.png) }",
            b"example.com#@$#body { background: url(/x.png) }",
        ] {
            assert_eq!(
                read_one(SourceFormat::AdblockHosts, rule).map(|_| ()),
                Err(reason::ADBLOCK_COSMETIC),
                "{}",
                rule.escape_ascii()
            );
        }
        // A `#` in a URL rule's path is still read as before.
        let readings = read_one(SourceFormat::AdblockHosts, b"||evil.example/p#x^").unwrap();
        assert_eq!(readings[0].expressions, ["evil.example/p"]);
    }
}
