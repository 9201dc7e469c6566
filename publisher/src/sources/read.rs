//! The one code path a build and [`read_line`](super::read_line) share: a
//! line is cleaned, its entries read, and what is found goes to a visitor
//! ([`Visit`]).

use crate::config::SourceFormat;

use super::adblock::read_adblock;
use super::clean::{Cleaned, clean_entry, trim_line};
use super::hosts::{read_domain, read_hosts};
use super::sha256::read_sha256;
use super::url_entry::read_url;
use super::urls::{clean_url_line, read_url_line};
use super::visit::Visit;

/// Steps 1 to 5 of the module docs; `None` for a line with no entry.
fn clean_line(format: SourceFormat, raw: &[u8]) -> Option<Cleaned<'_>> {
    let (text, cuts) = trim_line(format, raw)?;
    if format == SourceFormat::Urls {
        return clean_url_line(text, cuts);
    }
    clean_entry(format, text, cuts)
}

/// Reads one line (or CSV value, or JSON string) into `v`; false when it
/// holds no entry.
pub(super) fn read_line_with(format: SourceFormat, raw: &[u8], v: &mut impl Visit) -> bool {
    let Some(line) = clean_line(format, raw) else {
        return false;
    };
    for kind in line.cuts.kinds() {
        v.cleaned(kind);
    }
    if let Some(reason) = line.refused {
        v.rejected(line.text, reason);
        return true;
    }
    match format {
        SourceFormat::Urls => read_url_line(&line, v),
        // (A wildcard value, `*.evil.example`, is read as the name after
        // `*.` by `url_entry`, as a `domains` line's.)
        SourceFormat::Csv => read_url(line.text, v),
        SourceFormat::Domains | SourceFormat::Json => read_domain(line.text, line.text, v),
        SourceFormat::Hosts => read_hosts(line.text, v),
        SourceFormat::AdblockHosts => read_adblock(line.text, v),
        SourceFormat::Sha256 => read_sha256(line.text, v),
    }
    true
}
