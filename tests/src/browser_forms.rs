//! A feed entry as a browser writes it: the no-false-negative check of the
//! URLs users actually visit.
//!
//! The build reads a feed line as written (`HTTP://Evil.example:80/a/../b`,
//! `http://0x5d9eef1d`, a raw `'` or `”` in a query); a browser that visits
//! it holds the URL as its URL parser serialized it
//! (`http://evil.example/b`, `http://93.158.239.29/`, `%27`, `%E2%80%9D`),
//! and that is what the extension hands the agent. The two must
//! canonicalize to a common expression (Safe Browsing v4, "Canonicalization"):
//! [`check`] says whether an expression of the browser's form is one the
//! line publishes.
//!
//! `tests/browser-forms/serialize.mjs` gets the browser's forms from
//! Chromium; `tests/examples/browser_forms.rs` runs both over a whole feed,
//! and the `feeds` tests run [`check`] on `fixtures/browser-forms.jsonl`.

use std::collections::HashSet;

use blocksieve_format::{FullHash, canonicalize, full_hashes};
use blocksieve_publisher::SourceFormat;
use blocksieve_publisher::internal::sources::{EntryOutcome, read_line};
use serde::{Deserialize, Serialize};

/// One feed line and an entry of it as a browser serialized it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BrowserForm {
    /// The source format the line is read in, as in the configuration
    /// (`urls`, `hosts`, …).
    pub format: String,
    /// The feed line as published.
    pub line: String,
    /// One of its entries as the browser's URL parser serialized it
    /// (`new URL(entry).href`, `http://` put before an entry without a
    /// scheme).
    pub href: String,
}

/// The line's format.
///
/// # Errors
///
/// When it names no source format.
pub fn format_of(name: &str) -> Result<SourceFormat, String> {
    serde_json::from_value(serde_json::Value::String(name.to_owned()))
        .map_err(|e| format!("format {name:?}: {e}"))
}

/// Whether a check of `form.href` hits a full hash that `form.line`
/// publishes.
///
/// # Errors
///
/// What the line publishes and what the browser's form checks, when they
/// share no full hash (a false negative for everyone visiting it), or
/// when the agent refuses the browser's form.
pub fn check(form: &BrowserForm) -> Result<(), String> {
    let format = format_of(&form.format)?;
    let mut published: HashSet<FullHash> = HashSet::new();
    let mut expressions = Vec::new();
    for entry in read_line(format, form.line.as_bytes()).entries {
        if let EntryOutcome::Accepted(readings) = entry {
            for reading in readings {
                published.extend(reading.full_hashes);
                expressions.extend(reading.expressions);
            }
        }
    }
    let mut checked = Vec::new();
    full_hashes(&form.href, &mut checked)
        .map_err(|e| format!("{:?}: the agent refuses it: {e}", form.href))?;
    if checked.iter().any(|h| published.contains(h)) {
        return Ok(());
    }
    let agent: Vec<String> = canonicalize(&form.href)
        .map(|c| c.expressions().map(|e| e.to_string()).collect())
        .unwrap_or_default();
    Err(format!(
        "{} line {:?} publishes {expressions:?}; the browser's form {:?} checks {agent:?}",
        form.format, form.line, form.href
    ))
}
