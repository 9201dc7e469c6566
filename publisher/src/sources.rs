//! Reading feed lines into expressions.
//!
//! A feed is untrusted text: every line either becomes one expression
//! string or is counted as rejected by reason; no line can fail the build.
//! Lines are split on LF; a CR before it, a UTF-8 byte-order mark, blank
//! lines and `#` comments are ignored. Lines need not be valid UTF-8 (the
//! canonicalizer escapes raw bytes).

use std::collections::BTreeMap;

use blocksieve_format::canonicalize;

use crate::config::SourceFormat;

/// How many rejected lines a report keeps as examples.
pub const REJECT_SAMPLES: usize = 10;

/// What reading one or more sources produced.
#[derive(Debug, Default, Clone)]
pub struct ParseReport {
    /// Lines read, including comments and blank lines.
    pub lines: u64,
    /// Entries that became an expression.
    pub accepted: u64,
    /// Rejected lines by reason.
    pub rejected: BTreeMap<String, u64>,
    /// The first few rejected lines with their reason.
    pub samples: Vec<(String, String)>,
}

impl ParseReport {
    /// Total rejected lines.
    pub fn rejected_total(&self) -> u64 {
        self.rejected.values().sum()
    }

    fn reject(&mut self, line: &[u8], reason: String) {
        if self.samples.len() < REJECT_SAMPLES {
            let shown: String = String::from_utf8_lossy(line).chars().take(200).collect();
            self.samples.push((shown, reason.clone()));
        }
        *self.rejected.entry(reason).or_default() += 1;
    }
}

/// Names in hosts files that are not threats (the file's own boilerplate).
const HOSTS_BOILERPLATE: &[&str] = &[
    "localhost",
    "localhost.localdomain",
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

/// The expression a URL entry stands for: its most specific expression,
/// exact host + path (+ query when not empty), so it matches exactly the URLs
/// whose expressions include it.
pub fn url_expression(line: &[u8]) -> Result<String, String> {
    let url = canonicalize(line).map_err(|e| e.to_string())?;
    let first = url
        .expressions()
        .next()
        .ok_or_else(|| "no expression".to_owned())?;
    Ok(first.to_string())
}

/// The expression a domain entry stands for: `host/`, matching every URL on
/// the host and its subdomains.
pub fn domain_expression(name: &[u8]) -> Result<String, String> {
    if name
        .iter()
        .any(|&b| matches!(b, b'/' | b'?' | b'@' | b':' | b'\\'))
    {
        return Err("not a domain name".to_owned());
    }
    let url = canonicalize(name).map_err(|e| e.to_string())?;
    Ok(format!("{}/", url.host()))
}

/// Parses a whole source, calling `emit` with each expression string.
pub fn parse_source(
    bytes: &[u8],
    format: SourceFormat,
    report: &mut ParseReport,
    mut emit: impl FnMut(&str),
) {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    for raw in bytes.split(|&b| b == b'\n') {
        report.lines += 1;
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        let line = line.trim_ascii();
        if line.is_empty() || line[0] == b'#' {
            continue;
        }
        match format {
            SourceFormat::Urls => match url_expression(line) {
                Ok(e) => {
                    report.accepted += 1;
                    emit(&e);
                }
                Err(reason) => report.reject(line, reason),
            },
            SourceFormat::Domains => match domain_expression(line) {
                Ok(e) => {
                    report.accepted += 1;
                    emit(&e);
                }
                Err(reason) => report.reject(line, reason),
            },
            SourceFormat::Hosts => {
                // Strip an inline comment, then: address name [name...].
                let content = match line.iter().position(|&b| b == b'#') {
                    Some(i) => &line[..i],
                    None => line,
                };
                let mut fields = content
                    .split(|b| b.is_ascii_whitespace())
                    .filter(|f| !f.is_empty());
                let Some(first) = fields.next() else { continue };
                let names: Vec<&[u8]> = if is_ip_literal(first) {
                    fields.collect()
                } else {
                    // A bare name without an address column.
                    std::iter::once(first).chain(fields).collect()
                };
                if names.is_empty() {
                    report.reject(line, "hosts line has an address but no name".to_owned());
                }
                for name in names {
                    if HOSTS_BOILERPLATE
                        .iter()
                        .any(|b| b.as_bytes().eq_ignore_ascii_case(name))
                    {
                        continue;
                    }
                    match domain_expression(name) {
                        Ok(e) => {
                            report.accepted += 1;
                            emit(&e);
                        }
                        Err(reason) => report.reject(line, reason),
                    }
                }
            }
        }
    }
    // A trailing newline yields one empty "line" that was never there.
    if bytes.ends_with(b"\n") {
        report.lines -= 1;
    }
}

fn is_ip_literal(field: &[u8]) -> bool {
    std::str::from_utf8(field).is_ok_and(|s| s.parse::<std::net::IpAddr>().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(text: &[u8], format: SourceFormat) -> (Vec<String>, ParseReport) {
        let mut report = ParseReport::default();
        let mut out = Vec::new();
        parse_source(text, format, &mut report, |e| out.push(e.to_owned()));
        (out, report)
    }

    #[test]
    fn hosts_lines() {
        let text = b"\xEF\xBB\xBF# header\r\n127.0.0.1 localhost\n0.0.0.0 Evil.Example. other.example # note\r\n\n0.0.0.0\nbare.example\n";
        let (out, report) = collect(text, SourceFormat::Hosts);
        assert_eq!(out, ["evil.example/", "other.example/", "bare.example/"]);
        assert_eq!(report.lines, 6);
        assert_eq!(report.rejected_total(), 1);
    }

    #[test]
    fn url_lines_keep_path_and_query() {
        let text = b"http://a.example/x/y?q=1\nhttps://b.example\nmailto:x@y\n/relative/path\n";
        let (out, report) = collect(text, SourceFormat::Urls);
        assert_eq!(out, ["a.example/x/y?q=1", "b.example/"]);
        assert_eq!(report.rejected_total(), 2);
        assert_eq!(report.samples.len(), 2);
    }

    #[test]
    fn domains() {
        let (out, report) = collect(b"example.com\nfoo.example/path\n", SourceFormat::Domains);
        assert_eq!(out, ["example.com/"]);
        assert_eq!(report.rejected_total(), 1);
    }
}
