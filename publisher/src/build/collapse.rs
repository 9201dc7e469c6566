//! When a source's fresh content is not taken, and its last good content
//! is used instead: its parse collapsed.

use std::collections::BTreeMap;

use crate::sources::ParseReport;

/// Why fresh content read as `r` is not taken, if it is not: its parse
/// collapsed. The content no longer reads as this format (a changed layout,
/// an error page in another markup): most lines are rejected; or not one
/// entry of it is (a short error body, a JSON error object or a document
/// cut short, a renamed array or column: one rejected document), which no
/// list gives. Content with no entry line at all (an emptied list) is taken
/// as it is; a list or source that merely shrank is the gates' business.
pub(super) fn refused(r: &ParseReport) -> Option<String> {
    let entry_lines = r.accepted + r.rejected_total();
    ((entry_lines >= 10 && r.rejected_total() * 2 > entry_lines)
        || (r.accepted == 0 && r.rejected_total() > 0))
        .then(|| {
            format!(
                "parse collapsed: {} of {} entry lines rejected ({})",
                r.rejected_total(),
                entry_lines,
                top_reasons(&r.rejected)
            )
        })
}

/// The three most frequent of `rejected`'s reasons with their counts, most
/// frequent first, e.g. `15 × URL has no host (…); 6 × …`: why a collapsed
/// parse was refused, whose own counts are not kept (the build reports
/// the content it used instead).
pub(super) fn top_reasons(rejected: &BTreeMap<String, u64>) -> String {
    let mut by_count: Vec<(&String, &u64)> = rejected.iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
    let shown: Vec<String> = by_count
        .iter()
        .take(3)
        .map(|(reason, count)| format!("{count} × {reason}"))
        .collect();
    let more = by_count.len().saturating_sub(3);
    if more > 0 {
        format!("{}; {more} more reasons", shown.join("; "))
    } else {
        shown.join("; ")
    }
}
