//! When a source's fresh content is not taken, and its last good content
//! is used instead: its parse collapsed.

use std::collections::BTreeMap;

use crate::sources::{ParseReport, reason};

/// Why fresh content read as `r` is not taken, if it is not: its parse
/// collapsed. The content no longer reads as this format (a changed layout,
/// an error page in another markup): most lines are rejected; or not one
/// entry of it is (a short error body, a JSON error object or a document
/// cut short, a renamed array or column: one rejected document), which no
/// list gives. Content with no entry line at all (an emptied list) is taken
/// as it is; a list or source that merely shrank is the gates' business.
/// Lines rejected for a [`reason::DELIBERATE`] reason were read as what
/// they are (a cosmetic rule, `127.0.0.1 localhost`) and count neither way
/// in the share; content of such lines alone, not one entry accepted, still
/// collapses (a list that suddenly holds only cosmetic or exception rules
/// is another list, and its entries are not dropped on its word).
pub(super) fn refused(r: &ParseReport) -> Option<String> {
    let unread: BTreeMap<String, u64> = r
        .rejected
        .iter()
        .filter(|(why, _)| !reason::DELIBERATE.contains(&why.as_str()))
        .map(|(why, n)| (why.clone(), *n))
        .collect();
    let rejected: u64 = unread.values().sum();
    let entry_lines = r.accepted + rejected;
    if r.accepted == 0 && r.rejected_total() > 0 {
        let all = r.rejected_total();
        return Some(format!(
            "parse collapsed: {all} of {all} entry lines rejected ({})",
            top_reasons(&r.rejected)
        ));
    }
    (entry_lines >= 10 && rejected * 2 > entry_lines).then(|| {
        format!(
            "parse collapsed: {rejected} of {entry_lines} entry lines rejected ({})",
            top_reasons(&unread)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn report(accepted: u64, rejected: &[(&str, u64)]) -> ParseReport {
        ParseReport {
            accepted,
            rejected: rejected.iter().map(|(why, n)| ((*why).to_owned(), *n)).collect(),
            ..ParseReport::default()
        }
    }

    /// An adblock list of 20 host rules, 20 cosmetic and 20 exception
    /// rules was refused as a collapsed parse (40 of 60 lines rejected) on
    /// every build, and its list never took a new entry; so was a hosts
    /// file whose sink address reads as loopback on every line. Such lines
    /// are read as what they are: they count neither way.
    #[test]
    fn regression_lines_left_out_by_design_are_no_collapse() {
        let general = report(
            20,
            &[(reason::ADBLOCK_COSMETIC, 20), (reason::ADBLOCK_EXCEPTION, 20)],
        );
        assert_eq!(refused(&general), None);
        // Such lines alone, nothing accepted: still a collapse.
        assert_eq!(
            refused(&report(0, &[(reason::ADBLOCK_COSMETIC, 5)])).as_deref(),
            Some("parse collapsed: 5 of 5 entry lines rejected (5 × cosmetic (element hiding) rule)")
        );
        assert_eq!(refused(&report(100, &[(reason::LOOPBACK, 101)])), None);
        // Lines not read still collapse it, counted without the others.
        let broken = report(
            5,
            &[(reason::NOT_A_HOST_NAME, 10), (reason::ADBLOCK_COSMETIC, 50)],
        );
        assert_eq!(
            refused(&broken).as_deref(),
            Some("parse collapsed: 10 of 15 entry lines rejected (10 × not a host name)")
        );
        assert!(refused(&report(0, &[(reason::NOT_A_HOST_NAME, 1)])).is_some());
    }
}
