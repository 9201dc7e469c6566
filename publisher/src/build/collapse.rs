//! When a source's fresh content is not taken, and its last good content
//! is used instead: its parse collapsed, or it gave far fewer entries than
//! the last good content.

use std::collections::BTreeMap;

use crate::sources::ParseReport;

/// Why fresh content read as `r` is not taken, if it is not:
///
/// - its parse collapsed: the content no longer reads as this format (a
///   changed layout, an error page in another markup): most lines are
///   rejected; or not one entry of it is (a short error body, a JSON error
///   object or a document cut short, a renamed array or column: one
///   rejected document), which no list gives;
/// - it gave fewer than `min_accepted` entries, a shrink past `max_shrink`
///   against the last good content ([`LastGood::requiring`](super::LastGood::requiring)).
///
/// Content with no entry line at all (an emptied list) is taken when no
/// floor is set (a source without last good content, or `--force`).
pub(super) fn refused(r: &ParseReport, min_accepted: u64) -> Option<String> {
    let entry_lines = r.accepted + r.rejected_total();
    if (entry_lines >= 10 && r.rejected_total() * 2 > entry_lines)
        || (r.accepted == 0 && r.rejected_total() > 0)
    {
        return Some(format!(
            "parse collapsed: {} of {} entry lines rejected ({})",
            r.rejected_total(),
            entry_lines,
            top_reasons(&r.rejected)
        ));
    }
    (r.accepted < min_accepted).then(|| {
        format!(
            "shrank: {} entries, fewer than the {min_accepted} that max_shrink allows against its last good content (a feed emptied or cut short? --force takes it)",
            r.accepted
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
