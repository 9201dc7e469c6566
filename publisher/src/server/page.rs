//! The status page, `GET /` ([`super::STATUS_PAGE`]): HTML for operators, one request, no script, no
//! external asset. Every value is escaped ([`escape`]); the one `<style>`
//! element is allowed by its hash in [`CONTENT_SECURITY_POLICY`], so the
//! page needs neither `'unsafe-inline'` nor anything else.

use std::fmt::Write as _;
use std::sync::{Arc, LazyLock};

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use sha2::Digest as _;

use crate::build;
use crate::config::Role;
use crate::state::{AppState, ListSlot};
use crate::status::health::{self, Health, HealthInput, duration};

mod chart;

/// The page's style sheet, allowed by its hash.
const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;background:#fff}\
h1{font-size:1.4em;margin:0 0 .3em}h2{font-size:1.15em;margin:1.6em 0 .3em}\
table{border-collapse:collapse;margin:.4em 0}th,td{padding:.2em .6em;border-bottom:1px solid #ddd;text-align:right;white-space:nowrap}\
th{background:#f4f4f4}td.l,th.l{text-align:left}td.w{white-space:normal;max-width:40em;overflow-wrap:anywhere}\
li.red::marker{color:#c62828}li.amber::marker{color:#b86e00}ul.r{list-style:square}\
.s{display:inline-block;min-width:4.5em;padding:.1em .5em;border-radius:.3em;font-weight:600;text-align:center;color:#fff}\
.s.green{background:#1a7f37}.s.amber{background:#b86e00}.s.red{background:#c62828}\
ul.r{margin:.2em 0;padding-left:1.2em}.muted{color:#666}\
figure{display:inline-block;margin:.3em 1em .3em 0}figcaption{font-size:.85em;color:#444}\
section{content-visibility:auto;contain-intrinsic-size:auto 480px}\
svg{display:block;border:1px solid #e3e3e3;background:#fafafa}svg path{fill:none;stroke:#1f5fa8;stroke-width:1.2}";

/// The `Content-Security-Policy` of the page: nothing may load or run but
/// its own style sheet, allowed by hash.
pub static CONTENT_SECURITY_POLICY: LazyLock<String> = LazyLock::new(|| {
    let hash = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(STYLE.as_bytes()));
    format!(
        "default-src 'none'; style-src 'sha256-{hash}'; img-src 'none'; base-uri 'none'; \
         form-action 'none'; frame-ancestors 'none'"
    )
});

/// `GET /`.
pub async fn page(State(state): State<Arc<AppState>>) -> Response {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // Rendered off the serving thread: it takes the lists' locks (the
    // history, the charts), which a build recording its line holds while it
    // writes the history file, and 10 ms of a worker for 100 lists.
    let Ok(html) = tokio::task::spawn_blocking(move || render(&state, now)).await else {
        return axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY.as_str()),
            (header::CACHE_CONTROL, "no-store"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        html,
    )
        .into_response()
}

/// `s` with `&`, `<`, `>`, `"` and `'` escaped, for HTML text and quoted
/// attribute values.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The page over `state` at `now` (Unix seconds).
pub fn render(state: &AppState, now: u64) -> String {
    let mut out = String::with_capacity(16 * 1024 + state.lists.len() * 8 * 1024);
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\"><title>blocksieve status</title>\
         <style>{STYLE}</style></head><body><h1>blocksieve publisher</h1>\
         <p class=\"muted\">Role <b>{}</b>, {} lists, as of {}. {}</p>",
        state.role.name(),
        state.lists.len(),
        utc(now),
        role_note(state.role),
    );
    let healths: Vec<_> = state.lists.iter().map(|l| health_of(l, now)).collect();
    summary(&mut out, state, &healths, now);
    for (slot, h) in state.lists.iter().zip(&healths) {
        list_section(&mut out, slot, h, now, state.role);
    }
    out.push_str("</body></html>\n");
    out
}

fn role_note(role: Role) -> &'static str {
    match role {
        Role::All => "It fetches, builds, stores and serves every list.",
        Role::Builder => {
            "It fetches, builds and stores every list; replicas serve them (this port serves only this page, /healthz, /readyz and /metrics)."
        }
        Role::Replica => {
            "It builds nothing: it serves what the builders publish to the store, so builds, sources and history are on the builders' status pages; the state here is the served snapshots' freshness."
        }
    }
}

fn badge(state: health::State) -> String {
    format!("<span class=\"s {0}\">{0}</span>", state.name())
}

/// The tables of every list, one row each: what is served, then the
/// sizing advice (in a section of its own: with many lists it is below the
/// fold, and like the lists' sections it is laid out only when scrolled to).
fn summary(out: &mut String, state: &AppState, healths: &[health::Health], now: u64) {
    out.push_str(
        "<table><tr><th class=\"l\">list</th><th class=\"l\">state</th><th>version</th><th>fresh / interval</th>\
         <th>entries</th><th>unique prefixes</th><th>snapshot bytes</th><th class=\"l\">filter</th><th>bits/key</th>\
         <th>FPR theory</th><th>FPR measured</th><th>prefix bits</th><th>anonymity set</th></tr>",
    );
    let mut advice = String::new();
    for (slot, h) in state.lists.iter().zip(healths) {
        let name = escape(&slot.name);
        let _ = write!(
            out,
            "<tr><td class=\"l\"><a href=\"#list-{name}\">{name}</a></td><td class=\"l\">{}</td>",
            badge(h.state)
        );
        let Some(p) = slot.current.load_full() else {
            out.push_str(&"<td>–</td>".repeat(11));
            out.push_str("</tr>");
            continue;
        };
        let hd = &p.header;
        let interval = slot
            .watch
            .profile
            .build_interval
            .map_or("–".to_owned(), |i| duration(i.as_secs()));
        let age = slot.fresh_at().map_or("–".to_owned(), |f| {
            format!("{} ago", duration(now.saturating_sub(f)))
        });
        let bytes = p.snapshot.len() as u64;
        let bits_per_key = if hd.entry_count == 0 {
            0.0
        } else {
            bytes as f64 * 8.0 / hd.entry_count as f64
        };
        let anonymity = hd.full_hash_count as f64 / 2f64.powi(i32::from(hd.request_prefix_bits));
        let min = slot.watch.profile.min_anonymity;
        let anonymity = if anonymity < min as f64 {
            format!(
                "<span title=\"fewer listed full hashes a request prefix than min_anonymity ({min}): a list under 256 × that many cannot reach it even at 8 bits, the shortest prefix\">{anonymity:.1} (under {min})</span>"
            )
        } else {
            format!("{anonymity:.1}")
        };
        let _ = write!(
            out,
            "<td>{}</td><td>{age} / {interval}</td><td>{}</td><td>{}</td><td>{bytes}</td><td class=\"l\">{}</td>\
             <td>{bits_per_key:.2}</td><td>{:.3e}</td><td>{:.3e}</td><td>{}</td><td>{anonymity}</td></tr>",
            hd.version,
            hd.full_hash_count,
            hd.entry_count,
            escape(&hd.filter_kind.to_string()),
            hd.theoretical_fpr,
            hd.measured_fpr,
            hd.request_prefix_bits,
        );
        let a = slot
            .watch
            .profile
            .advice(hd.theoretical_fpr, hd.entry_count, hd.key_bits);
        let (capacity, fill) = match a.capacity {
            None => ("unbounded".to_owned(), "–".to_owned()),
            Some(0) => (
                "0: the filter answers yes to every key".to_owned(),
                "–".to_owned(),
            ),
            Some(c) => (c.to_string(), format!("{:.1}%", a.fill_ratio * 100.0)),
        };
        let _ = write!(
            advice,
            "<tr><td class=\"l\">{name}</td><td>{:.3e}</td><td>{:.3}</td><td>{:.3}</td><td>{}</td><td>{capacity}</td><td>{fill}</td></tr>",
            a.false_hits_per_check,
            a.requests_per_1000,
            a.requests_per_second,
            slot.watch.profile.target_per_1000,
        );
    }
    out.push_str("</table>");
    let fleet = state
        .lists
        .first()
        .map_or(0.0, |l| l.watch.profile.fleet_checks_per_second);
    let _ = write!(
        out,
        "<section><h2>Sizing advice</h2><p class=\"muted\">Per URL check of an unlisted URL (a check probes 4.607 expressions \
         on average), at the filter&#39;s theoretical rate; requests per second for a fleet making {fleet} URL checks a \
         second (<code>fleet_checks_per_second</code>); capacity: the unique prefixes at which the filter would exceed \
         the list&#39;s target full-hash requests per 1,000 checks (for a filter named in the configuration that \
         exceeds it at any size, at which chance 32-bit prefix collisions double its false hits).</p>\
         <table><tr><th class=\"l\">list</th><th>false hits / check</th><th>full-hash req. / 1,000 checks</th>\
         <th>full-hash req. / s</th><th>target / 1,000</th><th>capacity (unique prefixes)</th><th>fill</th></tr>{advice}</table></section>"
    );
}

/// `unix` seconds as `YYYY-MM-DD HH:MM:SS UTC` (the proleptic Gregorian
/// calendar: H. Hinnant, "chrono-Compatible Low-Level Date Algorithms",
/// `civil_from_days`).
fn utc(unix: u64) -> String {
    let days = (unix / 86_400) as i64;
    let secs = unix % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// One list's section: its state with every reason, its sources, its history.
fn list_section(out: &mut String, slot: &ListSlot, h: &health::Health, now: u64, role: Role) {
    let name = escape(&slot.name);
    let _ = write!(
        out,
        "<section><h2 id=\"list-{name}\">{name} {}</h2>",
        badge(h.state)
    );
    if h.reasons.is_empty() {
        out.push_str("<p class=\"muted\">Fresh, within its bounds.</p>");
    } else {
        out.push_str("<ul class=\"r\">");
        for (state, reason) in &h.reasons {
            let _ = write!(out, "<li class=\"{}\">{}</li>", state.name(), escape(reason));
        }
        out.push_str("</ul>");
    }
    let profile = &slot.watch.profile;
    let _ = write!(
        out,
        "<p class=\"muted\">Schedule <code>{}</code>; FPR bound {}× theory beyond chance; target {} full-hash requests per 1,000 checks.</p>",
        escape(&profile.schedule),
        profile.max_fpr_ratio,
        profile.target_per_1000
    );
    if let Ok(Some(store)) = slot.store_status.lock().map(|s| s.clone()) {
        let _ = write!(
            out,
            "<p>Store: {}, last reached {}, generation {}.{}{}</p>",
            if store.reachable {
                "reachable"
            } else {
                "unreachable"
            },
            store.last_checked_at.map_or("never".to_owned(), |t| format!(
                "{} ago",
                duration(now.saturating_sub(t))
            )),
            store.generation.map_or("–".to_owned(), |g| g.to_string()),
            store
                .last_error
                .as_deref()
                .map_or(String::new(), |e| format!(" Last error: {}", escape(e))),
            store
                .refused
                .as_deref()
                .map_or(String::new(), |e| format!(" Not loaded: {}", escape(e))),
        );
    }
    sources(out, slot, now);
    if role != Role::Replica {
        charts(out, slot);
    }
    out.push_str("</section>");
}

fn sources(out: &mut String, slot: &ListSlot, now: u64) {
    let views = slot.watch.sources.lock().map(|s| s.clone()).unwrap_or_default();
    if views.is_empty() {
        return;
    }
    let last_good_at = last_good_fetched_at(slot);
    out.push_str(
        "<table><tr><th class=\"l\">source</th><th class=\"l\">role</th><th>last fetch</th><th class=\"l\">status</th>\
         <th>bytes</th><th class=\"l\">ETag</th><th class=\"l\">Last-Modified</th><th class=\"l\">last good used</th></tr>",
    );
    for s in &views {
        let status = match &s.error {
            Some(e) => format!("{}: {}", s.fetch, e),
            None => s.fetch.to_owned(),
        };
        let _ = write!(
            out,
            "<tr><td class=\"l w\">{}</td><td class=\"l\">{}</td><td>{} ago</td><td class=\"l w\">{}</td><td>{}</td>\
             <td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
            escape(&s.label),
            s.role,
            duration(now.saturating_sub(s.fetched_at)),
            escape(&status),
            s.bytes.map_or("–".to_owned(), |b| b.to_string()),
            escape(s.validators.etag.as_deref().unwrap_or("–")),
            escape(s.validators.last_modified.as_deref().unwrap_or("–")),
            last_good(s, &last_good_at, now),
        );
    }
    out.push_str("</table>");
}

/// When the content each source read from its last good copy was fetched,
/// as the last build reported it: how old what it lists is.
fn last_good_fetched_at(slot: &ListSlot) -> Vec<(String, Option<u64>)> {
    match slot.last_build.lock() {
        Ok(build) => (build.iter())
            .flat_map(|b| b.sources.iter().chain(&b.allow.sources))
            .filter(|s| s.state == "last_good")
            .map(|s| (s.source.clone(), s.content_fetched_at))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The "last good used" cell of source `s`: `no`, or `yes` with how old
/// the content read is (`fetched 3 h 5 min ago`) when the build said.
fn last_good(s: &crate::status::SourceView, fetched_at: &[(String, Option<u64>)], now: u64) -> String {
    if !s.on_last_good {
        return "no".to_owned();
    }
    match fetched_at.iter().find(|(label, _)| *label == s.label) {
        Some((_, Some(at))) => format!("yes, content as of {} ago", duration(now.saturating_sub(*at))),
        _ => "yes".to_owned(),
    }
}

fn charts(out: &mut String, slot: &ListSlot) {
    out.push_str(&slot.watch.charts(draw_charts));
}

/// The charts of history `h`: entries, measured FPR, build time and
/// snapshot bytes.
fn draw_charts(h: &std::collections::VecDeque<blocksieve_format::api::BuildRecord>) -> String {
    let mut out = String::with_capacity(4 * 2600);
    {
        if h.is_empty() {
            out.push_str("<p class=\"muted\">No builds recorded yet.</p>");
            return out;
        }
        // Builds that got as far as a filter.
        let built: Vec<_> = h.iter().filter(|r| !r.filter_kind.is_empty()).collect();
        let series = |f: &dyn Fn(&blocksieve_format::api::BuildRecord) -> f64| -> Vec<(u64, f64)> {
            built.iter().map(|r| (r.finished_at, f(r))).collect()
        };
        let last = h.back().map(|r| escape(&r.outcome)).unwrap_or_default();
        let _ = write!(
            out,
            "<div><p class=\"muted\">Last {} builds (latest: {last}).</p>",
            h.len()
        );
        let entries = series(&|r| r.entries as f64);
        let fpr = series(&|r| r.measured_fpr);
        let took = h
            .iter()
            .map(|r| (r.finished_at, r.duration_ms as f64 / 1000.0))
            .collect::<Vec<_>>();
        let bytes = series(&|r| r.snapshot_bytes as f64);
        let tail = |s: &[(u64, f64)], f: &dyn Fn(f64) -> String| s.last().map_or("–".to_owned(), |p| f(p.1));
        out.push_str(&chart::svg(
            "entries",
            &tail(&entries, &|v| format!("{v:.0}")),
            &entries,
        ));
        out.push_str(&chart::svg(
            "measured FPR",
            &tail(&fpr, &|v| format!("{v:.3e}")),
            &fpr,
        ));
        out.push_str(&chart::svg(
            "build time (s)",
            &tail(&took, &|v| format!("{v:.2}")),
            &took,
        ));
        out.push_str(&chart::svg(
            "snapshot bytes",
            &tail(&bytes, &|v| format!("{v:.0}")),
            &bytes,
        ));
        out.push_str("</div>");
    }
    out
}

/// The health of list `slot` at `now` (Unix seconds): [`health::health`] of what it serves and its watch holds.
pub fn health_of(slot: &ListSlot, now: u64) -> Health {
    let served = slot.current.load_full();
    let profile = &slot.watch.profile;
    let refusal = slot.watch.refusal.lock().ok().and_then(|r| r.clone());
    // Each named with how old its content is, when the last build said.
    let fetched_at = last_good_fetched_at(slot);
    let on_last_good: Vec<String> = (slot.watch.on_last_good.lock())
        .map(|g| g.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|label| match fetched_at.iter().find(|(l, _)| *l == label) {
            Some((_, Some(at))) => {
                format!(
                    "{label} (content as of {} ago)",
                    duration(now.saturating_sub(*at))
                )
            }
            _ => label,
        })
        .collect();
    // The served snapshot's rates: what agents probe. (A build the canary
    // gate refused serves nothing; its refusal is the amber reason.)
    let (measured, theoretical) = match &served {
        Some(p) => (Some(p.header.measured_fpr), Some(p.header.theoretical_fpr)),
        None => (None, None),
    };
    let fill = served.as_ref().map_or(0.0, |p| {
        let capacity = build::capacity(
            p.header.theoretical_fpr,
            p.header.key_bits,
            profile.target_per_1000,
        );
        build::fill_ratio(p.header.entry_count, capacity)
    });
    let fill_history = slot.watch.fill_history();
    let failed = slot.watch.with_history(|h| {
        let failed = health::FailedBuilds::among(
            h.iter()
                .map(|r| (r.finished_at, r.outcome.as_str(), r.error.as_deref())),
            now,
        );
        (
            failed.count,
            failed.latest.map(|(at, e)| (at, e.to_owned())),
            failed.recovered_at,
        )
    });
    let not_loaded = (slot.store_status.lock().ok()).and_then(|s| s.as_ref().and_then(|s| s.refused.clone()));
    // While the store's last check failed: when one last reached it.
    let store_reached_at = (slot.store_status.lock().ok())
        .and_then(|s| s.as_ref().filter(|s| !s.reachable).map(|s| s.last_checked_at));
    health::health(
        &HealthInput {
            not_loaded: not_loaded.as_deref(),
            store_reached_at,
            served: served.is_some(),
            fresh_at: slot.fresh_at(),
            overdue_at: slot.fresh_at().and_then(|at| profile.overdue_at(at)),
            measured_fpr: measured,
            fpr_bound: theoretical.map(|t| crate::build::fpr_gate_bound(t, profile.max_fpr_ratio)),
            refusal: refusal.as_deref(),
            on_last_good: &on_last_good,
            failed: health::FailedBuilds {
                count: failed.0,
                latest: failed.1.as_ref().map(|(at, e)| (*at, e.as_str())),
                recovered_at: failed.2,
            },
            fill_ratio: fill,
            fill_history: &fill_history,
            request_bucket: served.as_ref().map(|p| {
                let bits = p.header.request_prefix_bits;
                let expected = p.hashes.len() as f64 / 2f64.powi(i32::from(bits));
                (bits, expected, profile.max_bucket_entries)
            }),
        },
        now,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_special_character_is_escaped() {
        assert_eq!(
            escape(r#"<script>alert("x&y's")</script>"#),
            "&lt;script&gt;alert(&quot;x&amp;y&#39;s&quot;)&lt;/script&gt;"
        );
    }

    #[test]
    fn dates_are_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(1_800_000_000), "2027-01-15 08:00:00 UTC");
        assert_eq!(utc(4_102_444_799), "2099-12-31 23:59:59 UTC");
    }

    #[test]
    fn a_source_on_last_good_says_how_old_its_content_is() {
        use crate::fetch::Fetched;
        let mut view = crate::status::SourceView::of(
            "https://feed.example/a.txt".to_owned(),
            "block",
            &Fetched::Failed("HTTP 503".to_owned()),
            None,
            100_000,
        );
        let at = [(view.label.clone(), Some(100_000 - 3 * 3600 - 300))];
        assert_eq!(last_good(&view, &at, 100_000), "no");
        view.on_last_good = true;
        assert_eq!(last_good(&view, &at, 100_000), "yes, content as of 3 h 5 min ago");
        assert_eq!(last_good(&view, &[], 100_000), "yes");
    }

    #[test]
    fn the_policy_allows_the_style_by_its_hash_only() {
        let csp = CONTENT_SECURITY_POLICY.as_str();
        assert!(csp.starts_with("default-src 'none'; style-src 'sha256-"), "{csp}");
        assert!(!csp.contains("unsafe"), "{csp}");
    }
}
