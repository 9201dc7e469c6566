//! What JavaScript sees, without JavaScript: the `Agent` options, verdicts,
//! update reports, counters and errors as JSON values, and the sans-I/O
//! helpers. The glue in `js` turns these into JS objects (`JSON.parse`)
//! and thrown `Error`s; everything here also runs, and is tested, on the
//! host.

use blocksieve_engine::lookup::{FailurePolicy, Verdict};
use blocksieve_engine::session::{SessionConfig, SessionStats};
use blocksieve_engine::{Error, ErrorKind};
use blocksieve_format::TrustedKey;
use serde::Deserialize;
use serde_json::{Value, json};

/// The options of `new Agent({...})`, as JSON.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Options {
    /// The publisher's base URL.
    publisher: String,
    /// The threat lists to subscribe to.
    lists: Vec<String>,
    /// One trusted key (Ed25519 public key, base64 or 64 hex digits);
    /// `keys` for several.
    #[serde(default)]
    key: Option<String>,
    /// Several trusted keys.
    #[serde(default)]
    keys: Vec<String>,
    /// Noise prefixes per full-hash request.
    #[serde(default)]
    noise_prefixes: Option<usize>,
    /// `"open"` or `"closed"`.
    #[serde(default)]
    failure_policy: Option<String>,
    /// The full-hash cache's budget, in bytes.
    #[serde(default)]
    full_hash_cache_bytes: Option<usize>,
    /// The most bytes of a snapshot or delta chain.
    #[serde(default)]
    max_snapshot_bytes: Option<u64>,
    /// Accept `http://` to any host.
    #[serde(default)]
    dangerous_allow_plain_http: bool,
}

fn setting(setting: &'static str, value: impl ToString) -> Error {
    Error::InvalidSetting {
        setting,
        value: value.to_string(),
    }
}

/// The session settings of the `Agent` options `json` (the options object
/// as `JSON.stringify` wrote it).
///
/// # Errors
///
/// [`Error::InvalidSetting`] for options that do not parse (an unknown
/// field, a wrong type, a key that is not an Ed25519 public key (base64 or hex), an
/// unknown failure policy), [`Error::NoTrustedKeys`] without a key. The
/// rest is checked by [`Session::new`](blocksieve_engine::session::Session::new).
pub fn session_config(json: &str) -> Result<SessionConfig, Error> {
    let options: Options = serde_json::from_str(json).map_err(|e| setting("options", e))?;
    let mut trusted_keys = Vec::new();
    for text in options.key.iter().chain(&options.keys) {
        trusted_keys.push(
            TrustedKey::from_base64_or_hex(text).map_err(|e| setting("key", format!("{text:?}: {e}")))?,
        );
    }
    if trusted_keys.is_empty() {
        return Err(Error::NoTrustedKeys);
    }
    let defaults = SessionConfig::default();
    let failure_policy = match options.failure_policy.as_deref() {
        None | Some("open") => FailurePolicy::FailOpen,
        Some("closed") => FailurePolicy::FailClosed,
        Some(other) => return Err(setting("failurePolicy", format!("{other:?} (open or closed)"))),
    };
    Ok(SessionConfig {
        base_url: options.publisher,
        lists: options.lists,
        trusted_keys,
        max_snapshot_bytes: options.max_snapshot_bytes.unwrap_or(defaults.max_snapshot_bytes),
        full_hash_cache_bytes: options
            .full_hash_cache_bytes
            .unwrap_or(defaults.full_hash_cache_bytes),
        noise_prefixes: options.noise_prefixes.unwrap_or(defaults.noise_prefixes),
        failure_policy,
        dangerous_allow_plain_http: options.dangerous_allow_plain_http,
        ..defaults
    })
}

/// The `.kind` of a thrown `Error`: what the caller does next.
pub fn error_kind(error: &Error) -> &'static str {
    match error.kind() {
        ErrorKind::BadData => "bad_data",
        ErrorKind::Transport => "transport",
        ErrorKind::NotReady => "not_ready",
        ErrorKind::InvalidInput => "invalid_input",
        ErrorKind::Storage => "storage",
        _ => "misconfigured",
    }
}

/// A verdict as JavaScript sees it: `{kind, list?, expression?, fullHash?,
/// reason?, lists?, stale, block}`.
pub fn verdict_json(verdict: &Verdict) -> Value {
    let block = verdict.should_block();
    match verdict {
        Verdict::Unsafe {
            list,
            expression,
            full_hash,
            stale,
        } => json!({
            "kind": "unsafe", "list": list, "expression": expression,
            "fullHash": full_hash.to_string(), "stale": stale, "block": block,
        }),
        Verdict::Unverified {
            reason, lists, stale, ..
        } => json!({
            "kind": "unverified", "reason": reason.to_string(), "reasonKind": error_kind(reason),
            "lists": lists, "stale": stale, "block": block,
        }),
        Verdict::Safe { stale } => json!({"kind": "safe", "stale": stale, "block": block}),
        // A kind of verdict added to the engine after this binding: neither
        // safe nor unsafe, as the C and Python bindings answer it.
        other => json!({
            "kind": "unverified", "reason": format!("unknown verdict {other:?}"),
            "reasonKind": "misconfigured", "lists": [], "stale": other.is_stale(), "block": block,
        }),
    }
}

/// The counters as JavaScript sees them; `update_transport_failures` are
/// the update requests that never got a response.
pub fn stats_json(stats: &SessionStats, update_transport_failures: u64) -> Value {
    json!({
        "lookups": stats.lookups,
        "prefixHits": stats.prefix_hits,
        "fullHashRequests": stats.full_hash_requests,
        "fullHashFailures": stats.full_hash_failures,
        "cacheHits": stats.cache_hits,
        "confirmedUnsafe": stats.confirmed_unsafe,
        "falsePrefixHits": stats.false_prefix_hits,
        "unverified": stats.unverified,
        "snapshotsApplied": stats.snapshots_applied,
        "deltasApplied": stats.deltas_applied,
        "deltaFallbacks": stats.delta_fallbacks,
        "updatesFailed": stats.updates_failed + update_transport_failures,
        "restored": stats.restored,
        "restoredStale": stats.restored_stale,
    })
}

/// `url`'s Safe Browsing canonical form.
///
/// # Errors
///
/// [`Error::InvalidUrl`] when it names no host.
pub fn canonicalize(url: &str) -> Result<String, Error> {
    blocksieve_format::canonicalize(url)
        .map(|c| c.as_str().to_owned())
        .map_err(|reason| Error::InvalidUrl { reason })
}

/// The full hash (SHA-256, 64 hex digits) of each of `url`'s expressions,
/// in expression order (the exact URL first).
///
/// # Errors
///
/// [`Error::InvalidUrl`] when it names no host.
pub fn full_hashes(url: &str) -> Result<Vec<String>, Error> {
    let canonical = blocksieve_format::canonicalize(url).map_err(|reason| Error::InvalidUrl { reason })?;
    let mut hashes = Vec::new();
    canonical.full_hashes_into(&mut hashes);
    Ok(hashes.iter().map(ToString::to_string).collect())
}

#[cfg(test)]
mod tests {
    use blocksieve_engine::session::Session;
    use blocksieve_format::{FullHash, SigningKey};

    use super::*;

    fn key() -> String {
        SigningKey::from_secret_bytes([7; 32]).public_key().to_base64()
    }

    #[test]
    fn the_documented_options_make_a_session() {
        let json = json!({"publisher": "http://127.0.0.1:8080", "lists": ["phishing"], "key": key()});
        let config = session_config(&json.to_string()).expect("config");
        assert_eq!(config.noise_prefixes, 4);
        assert_eq!(config.failure_policy, FailurePolicy::FailOpen);
        assert!(Session::new(config).is_ok());

        let json = json!({"publisher": "https://p.example", "lists": ["a", "b"], "keys": [key(), key()],
            "noisePrefixes": 0, "failurePolicy": "closed", "fullHashCacheBytes": 0});
        let config = session_config(&json.to_string()).expect("config");
        assert_eq!((config.trusted_keys.len(), config.noise_prefixes), (2, 0));
        assert_eq!(config.failure_policy, FailurePolicy::FailClosed);
    }

    #[test]
    fn bad_options_are_misconfigured_errors_that_name_the_setting() {
        let cases = [
            (
                json!({"publisher": "https://p.example", "lists": ["a"]}),
                "no trusted publisher key",
            ),
            (
                json!({"publisher": "https://p.example", "lists": ["a"], "key": "nope"}),
                "key",
            ),
            (
                json!({"publisher": "https://p.example", "lists": "a", "key": key()}),
                "options",
            ),
            (
                json!({"publisher": "https://p.example", "lists": ["a"], "key": key(), "typo": 1}),
                "typo",
            ),
            (
                json!({"publisher": "https://p.example", "lists": ["a"], "key": key(), "failurePolicy": "maybe"}),
                "failurePolicy",
            ),
        ];
        for (json, mention) in cases {
            let error = session_config(&json.to_string()).expect_err("refused");
            assert_eq!(error_kind(&error), "misconfigured", "{error}");
            assert!(error.to_string().contains(mention), "{error}");
        }
        let json = json!({"publisher": "http://p.example", "lists": ["a"], "key": key()});
        let error = Session::new(session_config(&json.to_string()).expect("config")).expect_err("plain http");
        assert_eq!(error_kind(&error), "misconfigured");
    }

    #[test]
    fn verdicts_have_the_documented_shape() {
        let h = FullHash::of(b"evil.example/");
        let unsafe_ = Verdict::Unsafe {
            list: "phishing".into(),
            expression: "evil.example/".into(),
            full_hash: h,
            stale: false,
        };
        assert_eq!(
            verdict_json(&unsafe_),
            json!({"kind": "unsafe", "list": "phishing", "expression": "evil.example/",
                "fullHash": h.to_string(), "stale": false, "block": true})
        );
        assert_eq!(
            verdict_json(&Verdict::Safe { stale: true }),
            json!({"kind": "safe", "stale": true, "block": false})
        );
        let unverified = Verdict::Unverified {
            reason: Error::BackingOff {
                remaining: std::time::Duration::from_secs(3),
                failures: 1,
            },
            lists: vec!["phishing".into()],
            block: true,
            stale: false,
        };
        let v = verdict_json(&unverified);
        assert_eq!(
            (v["kind"].as_str(), v["block"].as_bool()),
            (Some("unverified"), Some(true))
        );
        assert_eq!(v["reasonKind"], "transport");
    }

    #[test]
    fn the_helpers_follow_the_conformance_rules() {
        assert_eq!(
            canonicalize("HTTP://Example.COM/a/../b").as_deref(),
            Ok("http://example.com/b")
        );
        let hashes = full_hashes("http://a.b.example/x/y").expect("hashes");
        assert_eq!(hashes[0], FullHash::of(b"a.b.example/x/y").to_string());
        assert!(hashes.contains(&FullHash::of(b"b.example/").to_string()));
        let error = canonicalize("http://").expect_err("no host");
        assert_eq!(error_kind(&error), "invalid_input");
        assert!(full_hashes("").is_err());
    }
}
