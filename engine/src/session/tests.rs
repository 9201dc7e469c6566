use std::collections::{BTreeMap, BTreeSet};
use std::time::UNIX_EPOCH;

use blocksieve_format::api::{
    FRESHNESS_HEADER, FULL_HASHES_CONTENT_TYPE, FullHashAnswer, FullHashSearchRequest, ListedFullHash,
    PrefixAnswer, snapshot_etag,
};
use blocksieve_format::{
    DeltaEnd, DeltaParams, FilterKind, FullHash, KeyBits, PrefixFilter, SigningKey, SnapshotParams, encode,
    encode_delta,
};
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::*;
use crate::accept::{self, ListRecord};

const NOW: u64 = 1_700_000_000;
const LISTED: &str = "http://evil.example/login/";
const LISTED_EXPRESSION: &str = "evil.example/login/";

fn at(seconds: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(seconds)
}

fn key() -> SigningKey {
    SigningKey::from_secret_bytes([7u8; 32])
}

fn expressions(count: u32) -> Vec<String> {
    let mut out: Vec<String> = (0..count).map(|i| format!("listed-{i}.example/")).collect();
    out.push(LISTED_EXPRESSION.to_owned());
    out
}

/// A signed snapshot of `malware` at `version` holding `expressions`,
/// signed by `signer`.
fn snapshot_by(signer: &SigningKey, version: u64, expressions: &[String]) -> Vec<u8> {
    snapshot_of("malware", signer, version, expressions)
}

/// [`snapshot_by`] of list `list`.
fn snapshot_of(list: &str, signer: &SigningKey, version: u64, expressions: &[String]) -> Vec<u8> {
    let mut keys: Vec<u64> = expressions
        .iter()
        .map(|e| FullHash::of(e.as_bytes()).prefix().key())
        .collect();
    keys.sort_unstable();
    keys.dedup();
    let filter = PrefixFilter::build(FilterKind::BinaryFuse8, &keys).expect("filter");
    let params = SnapshotParams {
        list_name: list.into(),
        version,
        created_at: NOW - 10,
        expires_at: NOW + 3600,
        key_bits: KeyBits::Bits32,
        request_prefix_bits: 16,
        full_hash_count: keys.len() as u64,
        measured_fpr: 0.0,
        zstd_level: 1,
    };
    encode(&params, &filter, signer).expect("snapshot")
}

fn snapshot(version: u64) -> Vec<u8> {
    snapshot_by(&key(), version, &expressions(50))
}

fn config() -> SessionConfig {
    SessionConfig {
        base_url: "https://publisher.example/".into(),
        lists: vec!["malware".into()],
        trusted_keys: vec![key().public_key().clone()],
        ..SessionConfig::default()
    }
}

fn ok(body: Vec<u8>, headers: &[(&str, &str)]) -> HttpResponse {
    HttpResponse {
        status: 200,
        headers: headers
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect(),
        body,
    }
}

fn status(code: u16, headers: &[(&str, &str)]) -> HttpResponse {
    HttpResponse {
        status: code,
        ..ok(Vec::new(), headers)
    }
}

/// The version floor of the signed snapshot `bytes` of `malware`.
fn floor_of(bytes: &[u8]) -> VersionFloor {
    accept::accept(
        "malware",
        bytes,
        &[key().public_key().clone()],
        &DecodeLimits::default(),
        None,
    )
    .expect("accepted")
    .floor()
}

/// A session with version 1 of `malware` loaded, and the ETag it came with.
fn loaded(config: SessionConfig) -> (Session, String) {
    let mut session = Session::new(config).expect("session");
    let bytes = snapshot(1);
    let floor = floor_of(&bytes);
    let etag = snapshot_etag(1, &floor.body_sha256);
    let [request] = session.update_requests().try_into().expect("one request");
    let update = session
        .handle_update_response(&request, ok(bytes, &[("ETag", &etag)]), at(NOW))
        .expect("applied");
    assert_eq!(
        update,
        ListUpdate::Updated {
            previous: None,
            version: 1
        }
    );
    (session, etag)
}

/// The publisher's binary answer to `query`: `listed` under its prefix,
/// nothing under the others (noise included).
fn answer(query: &FullHashQuery, listed: &[&str], cache_duration_s: u64) -> HttpResponse {
    let request: FullHashSearchRequest = serde_json::from_slice(&query.request.body).expect("json");
    let results = request
        .prefixes
        .iter()
        .map(|p| {
            let prefix: RequestPrefix = p.parse().expect("prefix");
            let matches = listed
                .iter()
                .map(|e| FullHash::of(e.as_bytes()))
                .filter(|h| prefix.matches(h))
                .map(|full_hash| ListedFullHash {
                    full_hash,
                    list: "malware".into(),
                })
                .collect();
            PrefixAnswer { prefix, matches }
        })
        .collect();
    let body = FullHashAnswer {
        cache_duration_s,
        results,
    }
    .encode()
    .expect("answer");
    ok(body, &[("Content-Type", FULL_HASHES_CONTENT_TYPE)])
}

fn need(step: Result<CheckStep, Error>) -> FullHashQuery {
    match step {
        Ok(CheckStep::NeedFullHashes(query)) => query,
        other => panic!("expected a full-hash request: {other:?}"),
    }
}

fn done(step: Result<CheckStep, Error>) -> Verdict {
    match step {
        Ok(CheckStep::Done(verdict)) => verdict,
        other => panic!("expected a verdict without a request: {other:?}"),
    }
}

#[test]
fn the_first_round_downloads_the_snapshot_and_the_next_asks_for_deltas_with_its_etag() {
    let session = Session::new(config()).expect("session");
    let [first] = session.update_requests().try_into().expect("one request");
    assert_eq!(first.kind, RequestKind::Snapshot { conditional: false });
    assert_eq!(first.request.method, Method::Get);
    assert_eq!(
        first.request.url,
        "https://publisher.example/v1/lists/malware/snapshot"
    );
    assert!(first.request.headers.is_empty());

    let (mut session, etag) = loaded(config());
    assert_eq!(session.version("malware"), Some(1));
    let [next] = session.update_requests().try_into().expect("one request");
    assert_eq!(next.kind, RequestKind::Deltas { from: 1 });
    assert_eq!(
        next.request.url,
        "https://publisher.example/v1/lists/malware/updates/1"
    );
    assert_eq!(
        next.request.headers,
        vec![("if-none-match".to_owned(), etag.clone())]
    );
    let update = session.handle_update_response(&next, status(304, &[]), at(NOW + 60));
    assert_eq!(update, Ok(ListUpdate::Unchanged { version: 1 }));

    // A publisher without deltas: the same round takes the snapshot,
    // conditionally, and a 304 keeps the base.
    let update = session.handle_update_response(&next, status(410, &[]), at(NOW + 60));
    let Ok(ListUpdate::NeedSnapshot {
        reason: Some(Error::Status { status: 410, .. }),
        request,
    }) = update
    else {
        panic!("{update:?}");
    };
    assert_eq!(request.kind, RequestKind::Snapshot { conditional: true });
    assert_eq!(request.request.headers, vec![("if-none-match".to_owned(), etag)]);
    let update = session.handle_update_response(&request, status(304, &[]), at(NOW + 60));
    assert_eq!(update, Ok(ListUpdate::Unchanged { version: 1 }));
    assert_eq!(session.stats().snapshots_applied, 1);
    assert_eq!(session.stats().delta_fallbacks, 1);
}

/// A 304 cannot keep the list on its version while its signed freshness
/// record vouches for a newer one (`update::stale_validator`): on the
/// snapshot route the session forgets the ETag and asks again without it,
/// on the updates route it takes the snapshot; a record for the version
/// held is a 304 that holds.
#[test]
fn a_304_whose_freshness_record_names_a_newer_version_asks_for_the_snapshot_again() {
    let (mut session, etag) = loaded(config());
    let newer = crate::delta::tests::freshness_header("malware", 2, true);
    let held = crate::delta::tests::freshness_header("malware", 1, true);

    let [deltas] = session.update_requests().try_into().expect("one request");
    let update =
        session.handle_update_response(&deltas, status(304, &[(FRESHNESS_HEADER, &held)]), at(NOW + 60));
    assert_eq!(update, Ok(ListUpdate::Unchanged { version: 1 }));
    let update =
        session.handle_update_response(&deltas, status(304, &[(FRESHNESS_HEADER, &newer)]), at(NOW + 60));
    let Ok(ListUpdate::NeedSnapshot {
        reason: Some(Error::UnexpectedResponse { reason, .. }),
        request,
    }) = update
    else {
        panic!("{update:?}");
    };
    assert!(
        reason.contains("names version 2, newer than version 1 in use"),
        "{reason}"
    );
    assert_eq!(request.kind, RequestKind::Snapshot { conditional: true });
    assert_eq!(request.request.headers, vec![("if-none-match".to_owned(), etag)]);

    let update =
        session.handle_update_response(&request, status(304, &[(FRESHNESS_HEADER, &newer)]), at(NOW + 60));
    let Ok(ListUpdate::NeedSnapshot {
        reason: Some(Error::UnexpectedResponse { .. }),
        request: again,
    }) = update
    else {
        panic!("{update:?}");
    };
    assert_eq!(again.kind, RequestKind::Snapshot { conditional: false });
    assert!(again.request.headers.is_empty());
    assert_eq!(session.version("malware"), Some(1));
    let update = session.handle_update_response(&again, ok(snapshot(2), &[("etag", "\"v2\"")]), at(NOW + 60));
    assert_eq!(
        update,
        Ok(ListUpdate::Updated {
            previous: Some(1),
            version: 2
        })
    );
    assert_eq!(session.stats().delta_fallbacks, 2);
    assert_eq!(session.stats().updates_failed, 0);
}

/// The snapshot asked for again after a stale validator, or any snapshot
/// whose own signed record vouches for a newer version, that is still the
/// version held: the publisher (or a cache) is behind. The round fails
/// with the list kept, rather than reporting it unchanged.
#[test]
fn a_snapshot_still_behind_the_version_vouched_for_fails_the_round() {
    let newer = crate::delta::tests::freshness_header("malware", 2, true);
    let (mut session, _) = loaded(config());
    let [deltas] = session.update_requests().try_into().expect("one request");
    let update =
        session.handle_update_response(&deltas, status(304, &[(FRESHNESS_HEADER, &newer)]), at(NOW + 60));
    let Ok(ListUpdate::NeedSnapshot { request, .. }) = update else {
        panic!("{update:?}");
    };
    let update =
        session.handle_update_response(&request, status(304, &[(FRESHNESS_HEADER, &newer)]), at(NOW + 60));
    let Ok(ListUpdate::NeedSnapshot { request: again, .. }) = update else {
        panic!("{update:?}");
    };
    // Version 1 again, without a record of its own.
    let update = session.handle_update_response(&again, ok(snapshot(1), &[("etag", "\"v2\"")]), at(NOW + 60));
    let Err(Error::UnexpectedResponse { reason, .. }) = &update else {
        panic!("{update:?}");
    };
    assert!(
        reason.contains(
            "serves version 1 (the snapshot in use) while its signed freshness record names version 2"
        ),
        "{reason}"
    );
    assert_eq!(session.version("malware"), Some(1));
    assert_eq!(session.stats().updates_failed, 1);
    // Its ETag was not taken: the next snapshot request is unconditional.
    let [next] = session.update_requests().try_into().expect("one request");
    let update = session.handle_update_response(&next, status(410, &[]), at(NOW + 60));
    let Ok(ListUpdate::NeedSnapshot { request, .. }) = update else {
        panic!("{update:?}");
    };
    assert_eq!(request.kind, RequestKind::Snapshot { conditional: false });
    // A snapshot whose own record vouches for a newer version: behind too.
    let update = session.handle_update_response(
        &request,
        ok(snapshot(1), &[(FRESHNESS_HEADER, &newer)]),
        at(NOW + 60),
    );
    assert!(
        matches!(update, Err(Error::UnexpectedResponse { .. })),
        "{update:?}"
    );
    assert_eq!(session.stats().updates_failed, 2);
    // Without one, the same snapshot is the one held: unchanged.
    let update = session.handle_update_response(&request, ok(snapshot(1), &[]), at(NOW + 60));
    assert_eq!(update, Ok(ListUpdate::Unchanged { version: 1 }));
}

#[test]
fn a_delta_chain_is_applied_whole_and_its_additions_are_found() {
    let (mut session, _) = loaded(config());
    let base = session.state("malware").expect("state").floor();
    let to = DeltaEnd {
        version: 2,
        body_sha256: [2; 32],
    };
    let added = "http://new.example/";
    let params = DeltaParams {
        list_name: "malware".into(),
        from: DeltaEnd {
            version: base.version,
            body_sha256: base.body_sha256,
        },
        to,
        created_at: NOW,
        expires_at: NOW + 7200,
    };
    let chain = encode_delta(&params, &[FullHash::of(b"new.example/").prefix().0], &key()).expect("delta");
    let [request] = session.update_requests().try_into().expect("one request");
    let mut rng = StdRng::seed_from_u64(1);
    assert!(matches!(
        session.check(added, at(NOW), &mut rng),
        Ok(CheckStep::Done(Verdict::Safe { stale: false }))
    ));

    // Every length of the chain but the whole is refused, without a panic.
    for cut in 1..chain.len() {
        let update = session.handle_update_response(&request, ok(chain[..cut].to_vec(), &[]), at(NOW));
        assert!(
            matches!(update, Ok(ListUpdate::NeedSnapshot { .. })),
            "cut at {cut}"
        );
        assert_eq!(session.version("malware"), Some(1));
    }

    let etag = snapshot_etag(2, &[2; 32]);
    let update = session.handle_update_response(&request, ok(chain, &[("etag", &etag)]), at(NOW));
    assert_eq!(
        update,
        Ok(ListUpdate::Updated {
            previous: Some(1),
            version: 2
        })
    );
    assert_eq!(session.stats().deltas_applied, 1);
    let query = need(session.check(added, at(NOW), &mut rng));
    assert!(
        query.request.body.windows(2).any(|w| w == b"\"2"),
        "min_versions name 2"
    );
    let verdict = session
        .complete_check(query, Ok(answer_for(&[added_expression()])), at(NOW), &mut rng)
        .expect("verdict");
    assert!(verdict.is_unsafe(), "{verdict:?}");

    // With deltas applied, a rebase is unconditional.
    let [next] = session.update_requests().try_into().expect("one request");
    let update = session.handle_update_response(&next, status(404, &[]), at(NOW));
    let Ok(ListUpdate::NeedSnapshot { request, .. }) = update else {
        panic!("{update:?}");
    };
    assert_eq!(request.kind, RequestKind::Snapshot { conditional: false });
}

#[test]
fn a_chain_cut_short_is_applied_before_the_snapshot_and_kept_when_it_fails() {
    let (mut session, _) = loaded(config());
    let chain = delta_to_2(&session);
    let [request] = session.update_requests().try_into().expect("one request");
    // The ETag names version 3; the chain reaches 2.
    let later = snapshot_etag(3, &[3; 32]);
    let update = session.handle_update_response(&request, ok(chain, &[("etag", &later)]), at(NOW));
    let Ok(ListUpdate::NeedSnapshot {
        reason: Some(Error::DeltaChainShort { ends_at: 2, .. }),
        request,
    }) = update
    else {
        panic!("{update:?}");
    };
    assert_eq!(request.kind, RequestKind::Snapshot { conditional: false });
    assert_eq!(session.version("malware"), Some(2));
    assert_eq!(session.stats().deltas_applied, 1);
    // The snapshot fails: what the chain added stays in use.
    let update = session.handle_update_response(&request, status(503, &[]), at(NOW));
    assert!(update.is_err(), "{update:?}");
    assert_eq!(session.version("malware"), Some(2));
    let mut rng = StdRng::seed_from_u64(1);
    let query = need(session.check("http://new.example/", at(NOW), &mut rng));
    let verdict = session
        .complete_check(query, Ok(answer_for(&[added_expression()])), at(NOW), &mut rng)
        .expect("verdict");
    assert!(verdict.is_unsafe(), "{verdict:?}");
}

fn added_expression() -> &'static str {
    "new.example/"
}

/// A JSON answer listing `listed` under every prefix asked (the session
/// reads it whatever the request held).
fn answer_for(listed: &[&str]) -> HttpResponse {
    let matches: Vec<_> = listed
        .iter()
        .map(|e| serde_json::json!({"full_hash": FullHash::of(e.as_bytes()).to_string(), "list": "malware"}))
        .collect();
    let results: Vec<_> = listed
        .iter()
        .map(|e| {
            let prefix = RequestPrefix::of(&FullHash::of(e.as_bytes()), 16);
            serde_json::json!({"prefix": prefix.to_string(), "matches": matches})
        })
        .collect();
    let body = serde_json::json!({"results": results, "cache_duration_s": 300});
    ok(
        body.to_string().into_bytes(),
        &[("content-type", "application/json")],
    )
}

#[test]
fn a_listed_url_is_confirmed_by_full_hashes_and_then_answered_from_the_cache() {
    let (mut session, etag) = loaded(config());
    let mut rng = StdRng::seed_from_u64(7);
    let query = need(session.check(LISTED, at(NOW), &mut rng));
    assert_eq!(query.request.method, Method::Post);
    assert_eq!(query.request.url, "https://publisher.example/v1/hashes:search");
    let body: FullHashSearchRequest = serde_json::from_slice(&query.request.body).expect("json");
    // The real prefix and four noise prefixes, all 16 bits.
    assert_eq!(body.prefixes.len(), 5);
    let real = RequestPrefix::of(&FullHash::of(LISTED_EXPRESSION.as_bytes()), 16).to_string();
    assert!(body.prefixes.contains(&real), "{:?}", body.prefixes);
    assert!(body.prefixes.iter().all(|p| p.len() == 4));
    assert_eq!(body.min_versions, BTreeMap::from([("malware".to_owned(), 1)]));
    // The snapshot by its id (version and body hash, the ETag's text): a
    // server holding another build of version 1 refuses.
    assert_eq!(
        body.snapshots,
        BTreeMap::from([("malware".to_owned(), etag.trim_matches('"').to_owned())])
    );

    let response = answer(&query, &[LISTED_EXPRESSION], 300);
    let verdict = session
        .complete_check(query, Ok(response), at(NOW), &mut rng)
        .expect("verdict");
    let Verdict::Unsafe {
        list,
        expression,
        stale,
        ..
    } = &verdict
    else {
        panic!("{verdict:?}");
    };
    assert_eq!(
        (list.as_str(), expression.as_str(), *stale),
        ("malware", LISTED_EXPRESSION, false)
    );

    // Cached for its duration: no request.
    assert_eq!(done(session.check(LISTED, at(NOW + 299), &mut rng)), verdict);
    let stats = session.stats();
    assert_eq!(
        (stats.full_hash_requests, stats.cache_hits, stats.confirmed_unsafe),
        (1, 1, 2)
    );
    // Expired: asked again.
    need(session.check(LISTED, at(NOW + 301), &mut rng));
}

#[test]
fn an_answer_without_the_real_prefix_is_unverified_and_another_listed_hash_is_a_false_prefix_hit() {
    let (mut session, _) = loaded(config());
    let mut rng = StdRng::seed_from_u64(8);
    // Another path on the listed host: `evil.example/login/` is one of its
    // expressions only if the path starts with it; `evil.example/` is not.
    let url = "http://evil.example/login/other.html";
    let query = need(session.check(url, at(NOW), &mut rng));
    let verdict = session
        .complete_check(query, Ok(answer_for(&[])), at(NOW), &mut rng)
        .expect("verdict");
    // The answer holds no result for the real prefix: unverified, not safe,
    // and a failed request, as a body that does not parse is: requests
    // pause (up to a second after a first failure) as after one.
    assert!(verdict.is_unverified(), "{verdict:?}");
    assert_eq!(session.stats().full_hash_failures, 1);
    let paused = session.check(url, at(NOW), &mut rng);
    assert!(
        matches!(
            &paused,
            Ok(CheckStep::Done(Verdict::Unverified {
                reason: Error::BackingOff { failures: 1, .. },
                ..
            }))
        ),
        "{paused:?}"
    );

    let query = need(session.check(url, at(NOW + 2), &mut rng));
    let response = answer(&query, &["other.example/"], 60);
    let verdict = session
        .complete_check(query, Ok(response), at(NOW + 2), &mut rng)
        .expect("verdict");
    // Only another full hash is listed under the prefix: a false prefix hit.
    assert_eq!(verdict, Verdict::Safe { stale: false });
    assert_eq!(session.stats().full_hash_failures, 1);

    let benign = "http://benign.example/index.html";
    assert!(matches!(
        session.check(benign, at(NOW), &mut rng),
        Ok(CheckStep::Done(Verdict::Safe { stale: false }))
    ));
    assert_eq!(session.stats().lookups, 4);
}

/// Two requests handed out together fail one after the other (the host
/// timed both out): one outage, one step of the backoff
/// ([`FullHashBackoff::on_failure`](crate::schedule::FullHashBackoff::on_failure)).
#[test]
fn requests_that_fail_in_one_outage_count_once() {
    let (mut session, _) = loaded(config());
    let mut rng = StdRng::seed_from_u64(11);
    let first = need(session.check(LISTED, at(NOW), &mut rng));
    let second = need(session.check("http://listed-0.example/", at(NOW), &mut rng));
    for query in [first, second] {
        let timed_out = Error::Transport {
            url: query.request.url.clone(),
            reason: "timed out".into(),
            timed_out: true,
        };
        let verdict = session
            .complete_check(query, Err(timed_out), at(NOW + 10), &mut rng)
            .expect("verdict");
        assert!(verdict.is_unverified(), "{verdict:?}");
    }
    assert_eq!(session.stats().full_hash_failures, 2);
    let paused = session.check(LISTED, at(NOW + 10), &mut rng);
    assert!(
        matches!(
            &paused,
            Ok(CheckStep::Done(Verdict::Unverified {
                reason: Error::BackingOff { failures: 1, .. },
                ..
            }))
        ),
        "{paused:?}"
    );
}

#[test]
fn a_miss_answer_is_safe_and_cached() {
    let (mut session, _) = loaded(config());
    let mut rng = StdRng::seed_from_u64(9);
    let query = need(session.check(LISTED, at(NOW), &mut rng));
    let response = answer(&query, &[], 300);
    let verdict = session
        .complete_check(query, Ok(response), at(NOW), &mut rng)
        .expect("verdict");
    assert_eq!(verdict, Verdict::Safe { stale: false });
    assert_eq!(
        done(session.check(LISTED, at(NOW + 10), &mut rng)),
        Verdict::Safe { stale: false }
    );
    assert_eq!(session.stats().false_prefix_hits, 2);
}

/// A `Retry-After` HTTP-date is an instant on the answering server's
/// clock: read against the response's `Date`, a host clock two hours
/// behind does not stretch a 30-second pause to the hour-long cap.
#[test]
fn regression_a_retry_after_date_is_read_against_the_responses_date() {
    let (mut session, _) = loaded(config());
    let mut rng = StdRng::seed_from_u64(10);
    let behind = NOW - 2 * 3600;
    let query = need(session.check(LISTED, at(behind), &mut rng));
    let overloaded = HttpResponse {
        status: 503,
        headers: vec![
            ("Date".into(), httpdate::fmt_http_date(at(NOW))),
            ("Retry-After".into(), httpdate::fmt_http_date(at(NOW + 30))),
        ],
        body: Vec::new(),
    };
    let verdict = session
        .complete_check(query, Ok(overloaded), at(behind), &mut rng)
        .expect("verdict");
    assert!(verdict.is_unverified(), "{verdict:?}");
    assert_eq!(
        session.full_hash_paused_for(at(behind)),
        Some(Duration::from_secs(30))
    );
}

#[test]
fn a_failed_full_hash_request_is_unverified_and_pauses_requests_for_retry_after() {
    let (mut session, _) = loaded(SessionConfig {
        failure_policy: FailurePolicy::FailClosed,
        ..config()
    });
    let mut rng = StdRng::seed_from_u64(10);
    let query = need(session.check(LISTED, at(NOW), &mut rng));
    let overloaded = HttpResponse {
        status: 503,
        headers: vec![("Retry-After".into(), "600".into())],
        body: br#"{"error":{"code":"overloaded","message":"try later"}}"#.to_vec(),
    };
    let verdict = session
        .complete_check(query, Ok(overloaded), at(NOW), &mut rng)
        .expect("verdict");
    let Verdict::Unverified { reason, block, .. } = &verdict else {
        panic!("{verdict:?}");
    };
    assert!(*block, "fail closed");
    assert!(
        matches!(reason, Error::Status { status: 503, message, retry_after: Some(r), .. }
            if message == "try later" && *r == Duration::from_secs(600)),
        "{reason:?}"
    );
    // Paused: no request, unverified.
    let verdict = done(session.check(LISTED, at(NOW + 599), &mut rng));
    assert!(matches!(
        verdict,
        Verdict::Unverified {
            reason: Error::BackingOff { .. },
            ..
        }
    ));
    assert!(session.full_hash_paused_for(at(NOW + 599)).is_some());
    // After the pause, a transport failure the host reports the same way.
    let query = need(session.check(LISTED, at(NOW + 601), &mut rng));
    let lost = Error::Transport {
        url: query.request.url.clone(),
        reason: "connection refused".into(),
        timed_out: false,
    };
    let verdict = session
        .complete_check(query, Err(lost), at(NOW + 601), &mut rng)
        .expect("verdict");
    assert!(verdict.is_unverified() && verdict.should_block());
    // Garbage, binary or JSON, is unverified too, never a panic.
    for (i, (content_type, body)) in [
        (FULL_HASHES_CONTENT_TYPE, b"BSFH\x01garbage".to_vec()),
        ("application/json", b"{\"results\":".to_vec()),
    ]
    .into_iter()
    .enumerate()
    {
        // Each failure pauses requests: check after the pause.
        let later = NOW + 100_000 * (i as u64 + 1);
        let query = need(session.check(LISTED, at(later), &mut rng));
        let response = ok(body, &[("content-type", content_type)]);
        let verdict = session
            .complete_check(query, Ok(response), at(later), &mut rng)
            .expect("verdict");
        assert!(
            matches!(
                verdict,
                Verdict::Unverified {
                    reason: Error::UnexpectedResponse { .. },
                    ..
                }
            ),
            "{verdict:?}"
        );
    }
    assert_eq!(session.stats().full_hash_failures, 4);
}

/// A `400 prefix_too_short` says the session's snapshot is behind the
/// publisher's (the list's request prefix length grew): refusals at
/// version 1 pause nothing, since the host's next step is an update and
/// the check again; once an update answered nothing newer, a refusal at
/// version 1 pauses requests for version 1 as any failure does, but not
/// those of the newer snapshot when it comes. Any other `400` pauses at
/// once.
#[test]
fn a_prefix_too_short_refusal_pauses_only_once_an_update_left_the_version_as_it_was() {
    let refusal = |code: &str| {
        HttpResponse {
        status: 400,
        headers: Vec::new(),
        body: format!(r#"{{"error":{{"code":"{code}","message":"a 8-bit prefix selects about 78 full hashes of list malware, more than the limit of 64; send a longer prefix"}}}}"#)
            .into_bytes(),
    }
    };
    let (mut session, _) = loaded(config());
    let mut rng = StdRng::seed_from_u64(11);
    assert!(!session.update_advised());
    let query = need(session.check(LISTED, at(NOW), &mut rng));
    let verdict = session
        .complete_check(query, Ok(refusal("prefix_too_short")), at(NOW), &mut rng)
        .expect("verdict");
    let Verdict::Unverified { reason, .. } = &verdict else {
        panic!("{verdict:?}");
    };
    assert!(reason.is_prefix_too_short(), "{reason:?}");
    assert_eq!(session.full_hash_paused_for(at(NOW)), None);
    // What a C host is told, without reading the body: update, then check
    // again.
    assert!(session.update_advised());
    // A second check refused before any update: nothing paused either.
    let query = need(session.check(LISTED, at(NOW), &mut rng));
    let verdict = session
        .complete_check(query, Ok(refusal("prefix_too_short")), at(NOW), &mut rng)
        .expect("verdict");
    assert!(verdict.is_unverified(), "{verdict:?}");
    assert_eq!(session.full_hash_paused_for(at(NOW)), None);
    assert!(session.update_advised());
    // An update with nothing newer, then refused again: paused, and no
    // further update advised (the refusal stands: no loop).
    let [request] = session.update_requests().try_into().expect("one request");
    let update = session.handle_update_response(&request, status(304, &[]), at(NOW));
    assert_eq!(update, Ok(ListUpdate::Unchanged { version: 1 }));
    assert!(!session.update_advised());
    let query = need(session.check(LISTED, at(NOW), &mut rng));
    let verdict = session
        .complete_check(query, Ok(refusal("prefix_too_short")), at(NOW), &mut rng)
        .expect("verdict");
    assert!(verdict.is_unverified(), "{verdict:?}");
    assert!(session.full_hash_paused_for(at(NOW)).is_some());
    assert!(!session.update_advised());
    assert!(matches!(
        done(session.check(LISTED, at(NOW), &mut rng)),
        Verdict::Unverified {
            reason: Error::BackingOff { .. },
            ..
        }
    ));
    // Version 2 arrives: its requests go out, and are answered.
    let [request] = session.update_requests().try_into().expect("one request");
    let Ok(ListUpdate::NeedSnapshot { request, .. }) =
        session.handle_update_response(&request, status(410, &[]), at(NOW))
    else {
        panic!("no snapshot request");
    };
    let update = session.handle_update_response(&request, ok(snapshot(2), &[]), at(NOW));
    assert_eq!(
        update,
        Ok(ListUpdate::Updated {
            previous: Some(1),
            version: 2
        })
    );
    let query = need(session.check(LISTED, at(NOW), &mut rng));
    let response = answer(&query, &[LISTED_EXPRESSION], 300);
    let verdict = session
        .complete_check(query, Ok(response), at(NOW), &mut rng)
        .expect("verdict");
    assert!(verdict.is_unsafe(), "{verdict:?}");
    assert_eq!(session.full_hash_paused_for(at(NOW)), None);
    assert!(!session.update_advised());

    // Refused at version 1, then version 2 arrives: no update advised
    // any more (the newer snapshot sizes its requests anew).
    let (mut session, _) = loaded(config());
    let query = need(session.check(LISTED, at(NOW), &mut rng));
    session
        .complete_check(query, Ok(refusal("prefix_too_short")), at(NOW), &mut rng)
        .expect("verdict");
    assert!(session.update_advised());
    let [request] = session.update_requests().try_into().expect("one request");
    let Ok(ListUpdate::NeedSnapshot { request, .. }) =
        session.handle_update_response(&request, status(410, &[]), at(NOW))
    else {
        panic!("no snapshot request");
    };
    let update = session.handle_update_response(&request, ok(snapshot(2), &[]), at(NOW));
    assert!(
        matches!(update, Ok(ListUpdate::Updated { version: 2, .. })),
        "{update:?}"
    );
    assert!(!session.update_advised());

    // Any other 400 is a failure like any other.
    let (mut session, _) = loaded(config());
    let query = need(session.check(LISTED, at(NOW), &mut rng));
    let verdict = session
        .complete_check(query, Ok(refusal("bad_prefix")), at(NOW), &mut rng)
        .expect("verdict");
    let Verdict::Unverified { reason, .. } = &verdict else {
        panic!("{verdict:?}");
    };
    assert!(!reason.is_prefix_too_short(), "{reason:?}");
    assert!(session.full_hash_paused_for(at(NOW)).is_some());
    assert!(!session.update_advised());
}

/// The prefixes a query sends.
fn sent(query: &FullHashQuery) -> BTreeSet<String> {
    let body: FullHashSearchRequest = serde_json::from_slice(&query.request.body).expect("json");
    body.prefixes.into_iter().collect()
}

/// Two checks needing the same prefix while the first one's request is
/// out (a page's frames, a download beside its navigation): new noise for
/// the second would show the real prefix, the one both requests share,
/// as the Rust agent's single flight and its halves avoid. The second
/// asks again what the first asked, with the noise of the first; a
/// prefix no request in flight holds gets noise of its own.
#[test]
fn a_check_while_a_request_for_its_prefix_is_out_asks_with_the_same_noise() {
    let (mut session, _) = loaded(config());
    let mut rng = StdRng::seed_from_u64(11);
    let first = need(session.check(LISTED, at(NOW), &mut rng));
    let again = need(session.check(LISTED, at(NOW), &mut rng));
    assert_eq!(sent(&first).len(), 5);
    assert_eq!(
        sent(&again),
        sent(&first),
        "the real prefix is the one both share"
    );
    // Another listed URL, whose prefix no request in flight holds: noise
    // of its own.
    let other = need(session.check("http://listed-3.example/", at(NOW), &mut rng));
    let real = RequestPrefix::of(&FullHash::of(b"listed-3.example/"), 16).to_string();
    assert!(sent(&other).contains(&real));
    assert_eq!(sent(&other).len(), 5);
    assert_eq!(sent(&other).intersection(&sent(&first)).count(), 0);

    // Each is answered; once none is out, a prefix asked again still
    // carries the same noise (the session's noise key), never new noise
    // around it.
    let asked = sent(&first);
    for (query, listed) in [
        (first, LISTED_EXPRESSION),
        (again, LISTED_EXPRESSION),
        (other, "listed-3.example/"),
    ] {
        let response = answer(&query, &[listed], 0);
        let verdict = session
            .complete_check(query, Ok(response), at(NOW), &mut rng)
            .expect("verdict");
        assert!(matches!(verdict, Verdict::Unsafe { .. }), "{verdict:?}");
    }
    let later = need(session.check(LISTED, at(NOW + 1), &mut rng));
    assert_eq!(sent(&later), asked);
}

#[test]
fn the_same_seed_makes_the_same_request_and_another_seed_another() {
    let body = |seed| {
        let (mut session, _) = loaded(config());
        need(session.check(LISTED, at(NOW), &mut StdRng::seed_from_u64(seed)))
            .request
            .body
    };
    assert_eq!(body(3), body(3));
    assert_ne!(body(3), body(4));
    // Without noise, the real prefix alone.
    let (mut session, _) = loaded(SessionConfig {
        noise_prefixes: 0,
        ..config()
    });
    let query = need(session.check(LISTED, at(NOW), &mut StdRng::seed_from_u64(3)));
    let sent: FullHashSearchRequest = serde_json::from_slice(&query.request.body).expect("json");
    assert_eq!(sent.prefixes.len(), 1);
}

#[test]
fn forged_rolled_back_or_cut_snapshots_are_refused_and_the_list_kept() {
    let (mut session, _) = loaded(config());
    let request = session.snapshot_request(&session.slots[0]);
    let forged = snapshot_by(&SigningKey::from_secret_bytes([8; 32]), 5, &expressions(5));
    let update = session.handle_update_response(&request, ok(forged, &[]), at(NOW));
    assert!(matches!(update, Err(Error::Decode { .. })), "{update:?}");
    // Version 0 is below the floor.
    let update = session.handle_update_response(&request, ok(snapshot(0), &[]), at(NOW));
    assert!(
        matches!(
            update,
            Err(Error::Rollback {
                trusted_version: 1,
                new_version: 0,
                ..
            })
        ),
        "{update:?}"
    );
    let newer = snapshot(2);
    for cut in (0..newer.len()).step_by(7) {
        let update = session.handle_update_response(&request, ok(newer[..cut].to_vec(), &[]), at(NOW));
        assert!(update.is_err(), "cut at {cut}");
    }
    assert_eq!(session.version("malware"), Some(1));
    // A 304 to an unconditional request, a server error, a body over the limit.
    let unconditional = Session::new(config())
        .expect("session")
        .update_requests()
        .remove(0);
    let update = session.handle_update_response(&unconditional, status(304, &[]), at(NOW));
    assert!(
        matches!(update, Err(Error::UnexpectedResponse { .. })),
        "{update:?}"
    );
    let update = session.handle_update_response(&request, status(500, &[]), at(NOW));
    assert!(matches!(update, Err(Error::Status { status: 500, .. })));
    let mut small = Session::new(SessionConfig {
        max_snapshot_bytes: 64,
        ..config()
    })
    .expect("session");
    let update = small.handle_update_response(&unconditional, ok(vec![0; 65], &[]), at(NOW));
    assert!(matches!(
        update,
        Err(Error::ResponseTooLarge { limit_bytes: 64, .. })
    ));
    assert_eq!(
        session.stats().updates_failed,
        2 + newer.len().div_ceil(7) as u64 + 2
    );
    assert_eq!(small.stats().updates_failed, 1);

    // The newer one is taken, and answers are asked for its version.
    let update = session.handle_update_response(&request, ok(newer, &[]), at(NOW));
    assert_eq!(
        update,
        Ok(ListUpdate::Updated {
            previous: Some(1),
            version: 2
        })
    );
}

#[test]
fn checks_before_an_update_and_of_invalid_urls_are_errors() {
    let mut session = Session::new(config()).expect("session");
    let mut rng = StdRng::seed_from_u64(0);
    assert!(matches!(
        session.check(LISTED, at(NOW), &mut rng),
        Err(Error::NotReady { .. })
    ));
    let (mut session, _) = loaded(config());
    for url in ["", "http://"] {
        let step = session.check(url, at(NOW), &mut rng);
        assert!(matches!(step, Err(Error::InvalidUrl { .. })), "{url:?}: {step:?}");
    }
}

/// A session subscribed to `malware` (version 1 loaded) and `phishing`
/// (no snapshot: its download never answered).
fn one_list_unready() -> Session {
    let mut session = Session::new(SessionConfig {
        lists: vec!["malware".into(), "phishing".into()],
        ..config()
    })
    .expect("session");
    let requests = session.update_requests();
    let malware = requests
        .iter()
        .find(|r| &*r.list == "malware")
        .expect("malware's request");
    let update = session.handle_update_response(malware, ok(snapshot(1), &[]), at(NOW));
    assert!(matches!(update, Ok(ListUpdate::Updated { .. })), "{update:?}");
    session
}

#[test]
fn a_list_without_a_snapshot_does_not_switch_the_others_off() {
    let mut rng = StdRng::seed_from_u64(0);
    // Confirmed unsafe on the loaded list: an answer, whatever the other
    // list holds; the request asks for the loaded list's version only.
    let mut session = one_list_unready();
    let query = need(session.check(LISTED, at(NOW), &mut rng));
    let request: FullHashSearchRequest = serde_json::from_slice(&query.request.body).expect("json");
    assert_eq!(request.min_versions, BTreeMap::from([("malware".to_owned(), 1)]));
    let verdict = session.complete_check(query, Ok(answer_for(&[LISTED_EXPRESSION])), at(NOW), &mut rng);
    assert!(
        matches!(&verdict, Ok(Verdict::Unsafe { list, .. }) if list == "malware"),
        "{verdict:?}"
    );
    // From the cache, with no request.
    let verdict = done(session.check(LISTED, at(NOW + 1), &mut rng));
    assert!(verdict.is_unsafe(), "{verdict:?}");

    // No hit, a refuted hit, an unverified hit: the list not probed may
    // hold the URL, so none of them is an answer.
    let not_ready = |result: &Result<Verdict, Error>| matches!(result, Err(Error::NotReady { list }) if list == "phishing");
    let step = session.check("http://benign.example/", at(NOW), &mut rng);
    assert!(
        matches!(&step, Err(Error::NotReady { list }) if list == "phishing"),
        "{step:?}"
    );
    let mut session = one_list_unready();
    let query = need(session.check(LISTED, at(NOW), &mut rng));
    let refuted = answer(&query, &[], 60);
    let verdict = session.complete_check(query, Ok(refuted), at(NOW), &mut rng);
    assert!(not_ready(&verdict), "{verdict:?}");
    assert_eq!(session.stats().false_prefix_hits, 1);
    let mut session = one_list_unready();
    let query = need(session.check(LISTED, at(NOW), &mut rng));
    let lost = Error::Transport {
        url: query.request.url.clone(),
        reason: "connection reset".into(),
        timed_out: false,
    };
    let verdict = session.complete_check(query, Err(lost), at(NOW), &mut rng);
    assert!(not_ready(&verdict), "{verdict:?}");
}

#[test]
fn expired_snapshots_answer_stale() {
    let (mut session, _) = loaded(config());
    let mut rng = StdRng::seed_from_u64(0);
    let verdict = done(session.check("http://benign.example/", at(NOW + 3601), &mut rng));
    assert_eq!(verdict, Verdict::Safe { stale: true });
}

#[test]
fn settings_are_checked() {
    let fails = |config: SessionConfig| Session::new(config).err();
    assert_eq!(
        fails(SessionConfig {
            lists: vec![],
            ..config()
        }),
        Some(Error::NoLists)
    );
    assert_eq!(
        fails(SessionConfig {
            trusted_keys: vec![],
            ..config()
        }),
        Some(Error::NoTrustedKeys)
    );
    assert!(matches!(
        fails(SessionConfig {
            lists: vec!["Malware".into()],
            ..config()
        }),
        Some(Error::InvalidListName { .. })
    ));
    for url in [
        "http://publisher.example",
        "ftp://x",
        "publisher.example",
        "https://",
    ] {
        assert!(
            matches!(
                fails(SessionConfig {
                    base_url: url.into(),
                    ..config()
                }),
                Some(Error::InvalidBaseUrl { .. })
            ),
            "{url}"
        );
    }
    for url in ["http://127.0.0.1:8080", "http://localhost", "http://[::1]:9/"] {
        assert!(
            Session::new(SessionConfig {
                base_url: url.into(),
                ..config()
            })
            .is_ok(),
            "{url}"
        );
    }
    assert!(
        Session::new(SessionConfig {
            base_url: "http://publisher.example".into(),
            dangerous_allow_plain_http: true,
            ..config()
        })
        .is_ok()
    );
}

#[test]
fn a_base_url_with_credentials_is_refused_whatever_host_they_look_like() {
    // The host of each is `publisher.example` (what precedes `@` is user
    // info): plain http to it must not pass for loopback.
    for url in [
        "http://127.0.0.1:8080@publisher.example",
        "http://localhost:80@publisher.example/",
        "http://[::1]@publisher.example",
        "https://user:secret@publisher.example",
    ] {
        assert!(
            matches!(
                Session::new(SessionConfig {
                    base_url: url.into(),
                    ..config()
                }),
                Err(Error::InvalidBaseUrl { .. })
            ),
            "{url}"
        );
    }
}

#[test]
fn a_session_can_move_between_threads_and_be_shared() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<Session>();
    assert_send_sync::<FullHashQuery>();
    assert_send_sync::<ListRequest>();
}

/// `bytes` with a few random bytes changed, cut or grown.
fn mutate(bytes: &[u8], rng: &mut StdRng) -> Vec<u8> {
    use rand::Rng as _;
    let mut out = bytes.to_vec();
    match rng.gen_range(0..4) {
        0 if !out.is_empty() => out.truncate(rng.gen_range(0..out.len())),
        1 => out.extend((0..rng.gen_range(1..64)).map(|_| rng.r#gen::<u8>())),
        _ => {
            for _ in 0..rng.gen_range(1..4) {
                if !out.is_empty() {
                    let i = rng.gen_range(0..out.len());
                    out[i] ^= 1 << rng.gen_range(0..8);
                }
            }
        }
    }
    out
}

/// The delta from `session`'s version of `malware` to version 2, adding
/// `new.example/`.
fn delta_to_2(session: &Session) -> Vec<u8> {
    let base = session.state("malware").expect("state").floor();
    let params = DeltaParams {
        list_name: "malware".into(),
        from: DeltaEnd {
            version: base.version,
            body_sha256: base.body_sha256,
        },
        to: DeltaEnd {
            version: 2,
            body_sha256: [2; 32],
        },
        created_at: NOW,
        expires_at: NOW + 7200,
    };
    encode_delta(&params, &[FullHash::of(b"new.example/").prefix().0], &key()).expect("delta")
}

#[test]
fn mangled_responses_never_panic_roll_back_or_lose_a_listed_entry() {
    use rand::Rng as _;
    let (mut session, etag) = loaded(config());
    let chain = delta_to_2(&session);
    let newer = snapshot(3);
    let listed = FullHash::of(LISTED_EXPRESSION.as_bytes());
    let mut rng = StdRng::seed_from_u64(11);
    let mut highest = 1;
    for round in 0..3_000 {
        let requests = session.update_requests();
        let request = &requests[0];
        let body = match rng.gen_range(0..3) {
            0 => mutate(&chain, &mut rng),
            1 => mutate(&newer, &mut rng),
            _ => mutate(&snapshot(1), &mut rng),
        };
        let code = [200, 200, 200, 304, 404, 410, 503][rng.gen_range(0..7)];
        let header_etag = [etag.as_str(), "\"2-0202020202020202\"", "garbage", ""][rng.gen_range(0..4)];
        let response = HttpResponse {
            status: code,
            headers: vec![
                ("etag".into(), header_etag.into()),
                (
                    FRESHNESS_HEADER.into(),
                    String::from_utf8_lossy(&mutate(b"v1.abc", &mut rng)).into(),
                ),
                ("retry-after".into(), "99999999999999999999999".into()),
            ],
            body,
        };
        let _ = session.handle_update_response(request, response, at(NOW + round));
        let state = session.state("malware").expect("a state is kept");
        assert!(state.version() >= highest, "round {round}: rolled back");
        highest = state.version();
        assert!(
            state.probably_contains(&listed),
            "round {round}: the listed entry is gone"
        );

        if let Ok(CheckStep::NeedFullHashes(query)) = session.check(LISTED, at(NOW + round), &mut rng) {
            let good = answer(&query, &[LISTED_EXPRESSION], rng.gen_range(0..u64::MAX));
            let mut response = ok(mutate(&good.body, &mut rng), &[]);
            response.headers = good.headers;
            response.status = [200, 200, 200, 429, 503][rng.gen_range(0..5)];
            let _ = session
                .complete_check(query, Ok(response), at(NOW + round), &mut rng)
                .expect("verdict");
        }
    }
}

/// `loaded`'s session after one delta (to version 2, adding
/// `new.example/`).
fn with_delta() -> Session {
    let (mut session, _) = loaded(config());
    let chain = delta_to_2(&session);
    let [request] = session.update_requests().try_into().expect("one request");
    let etag = snapshot_etag(2, &[2; 32]);
    let update = session.handle_update_response(&request, ok(chain, &[("etag", &etag)]), at(NOW));
    assert!(
        matches!(update, Ok(ListUpdate::Updated { version: 2, .. })),
        "{update:?}"
    );
    session
}

#[test]
fn a_saved_list_is_restored_without_a_download_and_the_next_round_asks_for_deltas() {
    let mut rng = StdRng::seed_from_u64(5);
    assert_eq!(Session::new(config()).expect("session").saved("malware"), None);
    let (session, etag) = loaded(config());
    let saved = session.saved("malware").expect("saved");
    assert!(saved.chain.is_empty());
    assert_eq!(session.saved("phishing"), None);

    let mut restarted = Session::new(config()).expect("session");
    assert_eq!(restarted.restore(&saved, at(NOW)).map(|r| r.version), Ok(1));
    assert_eq!(restarted.stats().restored, 1);
    // Checks work at once: the listed URL's prefix hits, a miss is final.
    assert!(matches!(
        restarted.check("http://evil.example/login/", at(NOW), &mut rng),
        Ok(CheckStep::NeedFullHashes(_))
    ));
    assert!(matches!(
        restarted.check("http://unlisted.example/", at(NOW), &mut rng),
        Ok(CheckStep::Done(Verdict::Safe { stale: false }))
    ));
    // The next round asks for the deltas since the version restored.
    let [request] = restarted.update_requests().try_into().expect("one request");
    assert_eq!(request.kind, RequestKind::Deltas { from: 1 });
    // The ETag came back too: a 304 to the snapshot keeps the list.
    let snapshot_request = restarted.snapshot_request(&restarted.slots[0]);
    assert_eq!(
        snapshot_request.request.headers,
        vec![("if-none-match".to_owned(), etag)]
    );
    // Saved again, the same bytes.
    assert_eq!(restarted.saved("malware"), Some(saved.clone()));

    // An expired snapshot is restored, and answers stale.
    let mut late = Session::new(config()).expect("session");
    assert_eq!(late.restore(&saved, at(NOW + 7200)).map(|r| r.version), Ok(1));
    assert_eq!(late.stats().restored_stale, 1);
    assert!(matches!(
        late.check("http://unlisted.example/", at(NOW + 7200), &mut rng),
        Ok(CheckStep::Done(Verdict::Safe { stale: true }))
    ));
}

#[test]
fn a_saved_chain_comes_back_with_its_additions_and_a_bad_one_leaves_the_base() {
    let session = with_delta();
    let saved = session.saved("malware").expect("saved");
    assert!(!saved.chain.is_empty());
    let mut rng = StdRng::seed_from_u64(6);

    let mut restarted = Session::new(config()).expect("session");
    assert_eq!(restarted.restore(&saved, at(NOW)).map(|r| r.version), Ok(2));
    assert!(matches!(
        restarted.check("http://new.example/", at(NOW), &mut rng),
        Ok(CheckStep::NeedFullHashes(_))
    ));
    let [request] = restarted.update_requests().try_into().expect("one request");
    assert_eq!(request.kind, RequestKind::Deltas { from: 2 });
    assert_eq!(restarted.saved("malware"), Some(saved.clone()));

    // A chain that does not verify: the base alone, asking for the deltas
    // from its version, and reported. The floor is what the restored bytes
    // prove (the record is not signed): the base's.
    let mut bad = saved.clone();
    let last = bad.chain.len() - 1;
    bad.chain[last] ^= 1;
    let mut restarted = Session::new(config()).expect("session");
    let restored = restarted.restore(&bad, at(NOW)).expect("the base restored");
    assert_eq!(restored.version, 1);
    assert!(
        matches!(restored.chain_error, Some(Error::Delta { .. })),
        "the dropped chain is reported: {restored:?}"
    );
    let [request] = restarted.update_requests().try_into().expect("one request");
    assert_eq!(request.kind, RequestKind::Deltas { from: 1 });
    assert!(restarted.saved("malware").expect("saved").chain.is_empty());

    // Saved again, the base alone: it restores again, whole.
    let again = restarted.saved("malware").expect("saved");
    assert_eq!(
        Session::new(config()).expect("session").restore(&again, at(NOW)),
        Ok(Restored {
            version: 1,
            chain_error: None
        })
    );

    // A chain lost (none kept) where the record names version 2: reported
    // as such, never as a whole restore.
    let mut lost = saved.clone();
    lost.chain.clear();
    let restored = Session::new(config())
        .expect("session")
        .restore(&lost, at(NOW))
        .expect("the base restored");
    assert_eq!(restored.version, 1);
    assert!(
        matches!(
            restored.chain_error,
            Some(Error::KeptChainMissing {
                restored_version: 1,
                kept_version: 2,
                ..
            })
        ),
        "{restored:?}"
    );
}

#[test]
fn an_edited_record_cannot_pin_a_list() {
    // A record naming a far newer version than its snapshot and chain
    // (edited, or a corrupt digit): reported, and not trusted — the next
    // snapshot is taken, not refused as a rollback for ever.
    let (session, _) = loaded(config());
    let mut saved = session.saved("malware").expect("saved");
    let held = session.state("malware").expect("state").floor();
    saved.record = ListRecord {
        list: "malware".into(),
        floor: VersionFloor {
            version: 99_999_999_999,
            body_sha256: [9; 32],
        },
        base: Some(held),
        etag: None,
    }
    .to_bytes();
    let mut restarted = Session::new(config()).expect("session");
    let restored = restarted.restore(&saved, at(NOW)).expect("restored");
    assert!(
        matches!(
            restored.chain_error,
            Some(Error::KeptChainMissing {
                kept_version: 99_999_999_999,
                ..
            })
        ),
        "{restored:?}"
    );
    let update = restarted.handle_update_response(
        &restarted.snapshot_request(&restarted.slots[0]),
        ok(snapshot(2), &[]),
        at(NOW),
    );
    assert_eq!(
        update,
        Ok(ListUpdate::Updated {
            previous: Some(1),
            version: 2
        })
    );
}

#[test]
fn saved_bytes_that_do_not_verify_are_refused_and_nothing_replaces_a_download() {
    let (session, _) = loaded(config());
    let saved = session.saved("malware").expect("saved");

    let mut forged = saved.clone();
    let mut bytes = forged.snapshot.to_vec();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
    forged.snapshot = bytes.into();
    let mut restarted = Session::new(config()).expect("session");
    let refused = restarted.restore(&forged, at(NOW));
    assert!(matches!(refused, Err(Error::Decode { .. })), "{refused:?}");
    assert_eq!(restarted.version("malware"), None);

    // Signed by another key.
    let mut foreign = saved.clone();
    foreign.snapshot = snapshot_by(&SigningKey::from_secret_bytes([9; 32]), 1, &expressions(5)).into();
    assert!(matches!(
        Session::new(config())
            .expect("session")
            .restore(&foreign, at(NOW)),
        Err(Error::Decode { .. })
    ));

    // Older than the floor the record holds.
    let newer = ListRecord {
        list: "malware".into(),
        floor: VersionFloor {
            version: 5,
            body_sha256: [5; 32],
        },
        base: None,
        etag: None,
    };
    let mut rolled_back = saved.clone();
    rolled_back.record = newer.to_bytes();
    assert!(matches!(
        Session::new(config())
            .expect("session")
            .restore(&rolled_back, at(NOW)),
        Err(Error::Rollback { .. })
    ));

    // A record that cannot be read is ignored; the snapshot still verifies.
    let mut unreadable = saved.clone();
    unreadable.record = b"{".to_vec();
    assert_eq!(
        Session::new(config())
            .expect("session")
            .restore(&unreadable, at(NOW))
            .map(|r| r.version),
        Ok(1)
    );

    // A list not subscribed.
    let mut other = saved.clone();
    other.list = "phishing".into();
    assert!(matches!(
        Session::new(config()).expect("session").restore(&other, at(NOW)),
        Err(Error::InvalidSetting { .. })
    ));

    // A list already updated keeps what it downloaded.
    let mut updated = with_delta();
    assert_eq!(updated.restore(&saved, at(NOW)).map(|r| r.version), Ok(2));
    assert_eq!(updated.stats().restored, 0);
}

#[test]
fn a_refused_restore_keeps_the_records_floor_against_rollback() {
    // The host kept version 2, and its saved snapshot was replaced by the
    // older, still signed, version 1: the restore is refused as a
    // rollback, and so is version 1 when the network serves it at the next
    // update (the Rust agent keeps the record's floor the same way).
    let newer = snapshot(2);
    let floor = floor_of(&newer);
    let (session, _) = loaded(config());
    let mut replaced = session.saved("malware").expect("saved");
    replaced.record = ListRecord {
        list: "malware".into(),
        floor,
        base: None,
        etag: None,
    }
    .to_bytes();
    let mut restarted = Session::new(config()).expect("session");
    let refused = restarted.restore(&replaced, at(NOW));
    assert!(matches!(refused, Err(Error::Rollback { .. })), "{refused:?}");
    let [request] = restarted.update_requests().try_into().expect("one request");
    assert_eq!(request.kind, RequestKind::Snapshot { conditional: false });
    let replayed = restarted.handle_update_response(&request, ok(snapshot(1), &[]), at(NOW));
    assert!(matches!(replayed, Err(Error::Rollback { .. })), "{replayed:?}");
    assert_eq!(restarted.version("malware"), None);
    let update = restarted.handle_update_response(&request, ok(newer, &[]), at(NOW));
    assert_eq!(
        update,
        Ok(ListUpdate::Updated {
            previous: None,
            version: 2
        })
    );

    // A saved snapshot that does not verify keeps the floor too.
    let mut corrupt = replaced.clone();
    let mut bytes = corrupt.snapshot.to_vec();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
    corrupt.snapshot = bytes.into();
    let mut restarted = Session::new(config()).expect("session");
    assert!(matches!(
        restarted.restore(&corrupt, at(NOW)),
        Err(Error::Decode { .. })
    ));
    // Refused again with a record that cannot be read: the floor stays.
    let mut unreadable = corrupt.clone();
    unreadable.record = b"{".to_vec();
    assert!(restarted.restore(&unreadable, at(NOW)).is_err());
    let [request] = restarted.update_requests().try_into().expect("one request");
    let replayed = restarted.handle_update_response(&request, ok(snapshot(1), &[]), at(NOW));
    assert!(matches!(replayed, Err(Error::Rollback { .. })), "{replayed:?}");
}

/// The updates route's answer (`answer`) vouches (signed) for version 2
/// while version 1 is held and sends the round to the snapshot: whatever
/// answers there must not leave the list "unchanged" at version 1. A
/// conditional request's `304` without a record (a cache in front of the
/// snapshot route) is asked again without the ETag; version 1 served again
/// fails the round; version 2 is taken.
fn vouched_then(config: SessionConfig, answer: impl Fn(&Session, &str) -> HttpResponse) {
    let newer = crate::delta::tests::freshness_header("malware", 2, true);
    for behind in [true, false] {
        let (mut session, _) = loaded(config.clone());
        let [deltas] = session.update_requests().try_into().expect("one request");
        let response = answer(&session, &newer);
        let update = session.handle_update_response(&deltas, response, at(NOW + 60));
        let Ok(ListUpdate::NeedSnapshot { mut request, .. }) = update else {
            panic!("{update:?}");
        };
        if request.kind == (RequestKind::Snapshot { conditional: true }) {
            let update = session.handle_update_response(&request, status(304, &[]), at(NOW + 60));
            let Ok(ListUpdate::NeedSnapshot {
                request: again,
                reason,
            }) = update
            else {
                panic!("a 304 without a record after version 2 was vouched for: {update:?}");
            };
            assert_eq!(again.kind, RequestKind::Snapshot { conditional: false });
            let reason = reason.expect("a reason").to_string();
            assert!(reason.contains("in this round names version 2"), "{reason}");
            request = again;
        }
        let served = if behind { snapshot(1) } else { snapshot(2) };
        let update =
            session.handle_update_response(&request, ok(served, &[("etag", "\"cached\"")]), at(NOW + 60));
        if behind {
            assert!(
                matches!(&update, Err(Error::UnexpectedResponse { reason, .. }) if reason.contains("names version 2")),
                "{update:?}"
            );
            assert_eq!(session.version("malware"), Some(1));
        } else {
            assert_eq!(
                update,
                Ok(ListUpdate::Updated {
                    previous: Some(1),
                    version: 2
                })
            );
        }
    }
}

#[test]
fn a_snapshot_304_without_a_record_cannot_undo_a_version_vouched_for_by_the_updates_route() {
    vouched_then(config(), |_, newer| status(304, &[(FRESHNESS_HEADER, newer)]));
}

#[test]
fn the_record_of_a_chain_not_used_holds_for_the_snapshot_that_follows() {
    // A chain that does not verify.
    vouched_then(config(), |session, newer| {
        let mut chain = delta_to_2(session);
        let last = chain.len() - 1;
        chain[last] ^= 1;
        ok(
            chain,
            &[(FRESHNESS_HEADER, newer), ("etag", &snapshot_etag(2, &[2; 32]))],
        )
    });
    // A chain that verifies, where `max_additions_ratio` 0 takes it whole.
    let ratio_zero = SessionConfig {
        max_additions_ratio: 0.0,
        ..config()
    };
    vouched_then(ratio_zero, |session, newer| {
        ok(
            delta_to_2(session),
            &[(FRESHNESS_HEADER, newer), ("etag", &snapshot_etag(2, &[2; 32]))],
        )
    });
}

#[test]
fn an_empty_chain_under_a_record_of_a_newer_version_is_not_unchanged() {
    // No ETag (a proxy stripped it): the chain's end cannot be checked.
    vouched_then(config(), |_, newer| ok(Vec::new(), &[(FRESHNESS_HEADER, newer)]));
}

/// A session with version 2 of `malware` reached by a delta past a
/// `max_additions_ratio` of 0.01, and the round's request: the snapshot (a
/// rebase).
fn past_the_ratio() -> (Session, ListRequest) {
    let (mut session, _) = loaded(SessionConfig {
        max_additions_ratio: 0.01,
        ..config()
    });
    let [request] = session.update_requests().try_into().expect("one request");
    let etag = snapshot_etag(2, &[2; 32]);
    let chain = delta_to_2(&session);
    let update = session.handle_update_response(&request, ok(chain, &[("etag", &etag)]), at(NOW));
    assert!(matches!(update, Ok(ListUpdate::Updated { .. })), "{update:?}");
    let [rebase] = session.update_requests().try_into().expect("one request");
    assert!(matches!(rebase.kind, RequestKind::Snapshot { .. }), "{rebase:?}");
    (session, rebase)
}

/// Past `max_additions_ratio` a round asks for the whole snapshot; when
/// that fails, the next round asks for the deltas since the version held
/// (their additions found, not answered "safe" while the snapshot route
/// fails), and the one after asks for the snapshot again.
#[test]
fn a_rebase_whose_snapshot_fails_is_followed_by_a_round_of_deltas() {
    // Past the ratio: the snapshot, which fails.
    let (mut session, rebase) = past_the_ratio();
    assert!(
        session
            .handle_update_response(&rebase, status(503, &[]), at(NOW))
            .is_err()
    );

    // The deltas since version 2, with what was listed since.
    let [next] = session.update_requests().try_into().expect("one request");
    assert_eq!(next.kind, RequestKind::Deltas { from: 2 }, "{next:?}");
    let params = DeltaParams {
        list_name: "malware".into(),
        from: DeltaEnd {
            version: 2,
            body_sha256: [2; 32],
        },
        to: DeltaEnd {
            version: 3,
            body_sha256: [3; 32],
        },
        created_at: NOW,
        expires_at: NOW + 7200,
    };
    let late = encode_delta(&params, &[FullHash::of(b"late.example/").prefix().0], &key()).expect("delta");
    let update =
        session.handle_update_response(&next, ok(late, &[("etag", &snapshot_etag(3, &[3; 32]))]), at(NOW));
    assert_eq!(
        update,
        Ok(ListUpdate::Updated {
            previous: Some(2),
            version: 3
        })
    );
    let mut rng = StdRng::seed_from_u64(1);
    assert!(matches!(
        session.check("http://late.example/", at(NOW), &mut rng),
        Ok(CheckStep::NeedFullHashes(_))
    ));
    let [again] = session.update_requests().try_into().expect("one request");
    assert!(matches!(again.kind, RequestKind::Snapshot { .. }), "{again:?}");
}

/// The same when the host could not send the snapshot request or read its
/// answer (a timeout on a large snapshot): the next round asks for the
/// deltas.
#[test]
fn a_rebase_the_host_could_not_send_is_followed_by_a_round_of_deltas() {
    let (mut session, rebase) = past_the_ratio();
    session.update_not_sent(&rebase);
    let [next] = session.update_requests().try_into().expect("one request");
    assert_eq!(next.kind, RequestKind::Deltas { from: 2 }, "{next:?}");
    // A deltas request not sent changes nothing: the snapshot next.
    session.update_not_sent(&next);
    let [again] = session.update_requests().try_into().expect("one request");
    assert!(matches!(again.kind, RequestKind::Snapshot { .. }), "{again:?}");
}

/// A session whose rebases keep failing takes the deltas every other round
/// (the fallback above), past the 4,096 one response may hold. What
/// `saved()` gave then came back without its chain at `restore`: the
/// session on its base, 4,099 versions older, its floor there too, a URL
/// added since answered safe. The chain kept since the base restores whole.
#[test]
fn a_saved_chain_grown_past_one_response_by_failed_rebases_restores_whole() {
    let (mut session, mut rebase) = past_the_ratio();
    let end = |v: u64| DeltaEnd {
        version: v,
        body_sha256: [(v % 251) as u8 + 3; 32],
    };
    let chain = |from: u64, to: u64, late_at: u64| -> Vec<u8> {
        let mut out = Vec::new();
        for v in from..to {
            let start = if v == 2 {
                DeltaEnd {
                    version: 2,
                    body_sha256: [2; 32],
                }
            } else {
                end(v)
            };
            let params = DeltaParams {
                list_name: "malware".into(),
                from: start,
                to: end(v + 1),
                created_at: NOW,
                expires_at: NOW + 7200,
            };
            let additions: Vec<u32> = if v + 1 == late_at {
                vec![FullHash::of(b"late.example/").prefix().0]
            } else {
                Vec::new()
            };
            out.extend(encode_delta(&params, &additions, &key()).expect("delta"));
        }
        out
    };
    for (from, to) in [(2u64, 2050u64), (2050, 4100)] {
        // The rebase's snapshot fails, and the next round takes the deltas.
        assert!(matches!(rebase.kind, RequestKind::Snapshot { .. }), "{rebase:?}");
        assert!(
            session
                .handle_update_response(&rebase, status(503, &[]), at(NOW))
                .is_err()
        );
        let [next] = session.update_requests().try_into().expect("one request");
        assert_eq!(next.kind, RequestKind::Deltas { from }, "{next:?}");
        let e = end(to);
        let update = session.handle_update_response(
            &next,
            ok(
                chain(from, to, 4000),
                &[("etag", &snapshot_etag(to, &e.body_sha256))],
            ),
            at(NOW),
        );
        assert_eq!(
            update,
            Ok(ListUpdate::Updated {
                previous: Some(from),
                version: to
            })
        );
        [rebase] = session.update_requests().try_into().expect("one request");
    }
    let saved = session.saved("malware").expect("saved");

    let mut restarted = Session::new(config()).expect("session");
    let restored = restarted.restore(&saved, at(NOW)).expect("restored");
    assert_eq!(restored.version, 4100);
    assert!(restored.chain_error.is_none(), "{restored:?}");
    let mut rng = StdRng::seed_from_u64(1);
    assert!(matches!(
        restarted.check("http://late.example/", at(NOW), &mut rng),
        Ok(CheckStep::NeedFullHashes(_))
    ));
}

/// `phishing` served again: its update round answered with version 2 (its
/// updates route with what is no chain, then its snapshot route).
fn served_again(session: &mut Session, now: u64) {
    let requests = session.update_requests();
    let mut request = (requests.into_iter().find(|r| r.list == "phishing")).expect("phishing's request");
    let bytes = snapshot_of("phishing", &key(), 2, &expressions(50));
    let update = loop {
        match session.handle_update_response(&request, ok(bytes.clone(), &[]), at(now)) {
            Ok(ListUpdate::NeedSnapshot { request: next, .. }) => request = next,
            outcome => break outcome,
        }
    };
    assert!(matches!(update, Ok(ListUpdate::Updated { .. })), "{update:?}");
}

/// `list`'s update round answered `404 unknown_list` throughout (its
/// updates route, then its snapshot route): the round's outcome.
fn not_served(session: &mut Session, list: &str, now: u64) -> Result<ListUpdate, Error> {
    let unknown = || HttpResponse {
        status: 404,
        headers: vec![("Content-Type".into(), "application/json".into())],
        body: format!(r#"{{"error":{{"code":"unknown_list","message":"no list named {list}"}}}}"#)
            .into_bytes(),
    };
    let requests = session.update_requests();
    let mut request = (requests.into_iter().find(|r| r.list == list)).expect("the list's request");
    loop {
        match session.handle_update_response(&request, unknown(), at(now)) {
            Ok(ListUpdate::NeedSnapshot { request: next, .. }) => request = next,
            outcome => return outcome,
        }
    }
}

/// `malware` and `phishing` subscribed, version 1 of each loaded (the same
/// entries).
fn both_lists_loaded() -> Session {
    let mut session = Session::new(SessionConfig {
        lists: vec!["malware".into(), "phishing".into()],
        ..config()
    })
    .expect("session");
    for request in session.update_requests() {
        let bytes = snapshot_of(&request.list, &key(), 1, &expressions(50));
        let update = session.handle_update_response(&request, ok(bytes, &[]), at(NOW));
        assert!(matches!(update, Ok(ListUpdate::Updated { .. })), "{update:?}");
    }
    session
}

/// Both lists loaded (`malware` and `phishing`, the same entries), then
/// `phishing`'s next update answered `404 unknown_list`: the publisher
/// stopped serving it.
fn one_list_not_served() -> Session {
    let mut session = both_lists_loaded();
    let update = not_served(&mut session, "phishing", NOW + 1);
    assert!(matches!(&update, Err(e) if e.is_unknown_list()), "{update:?}");
    session
}

/// A list the publisher stopped serving is left out of full-hash requests
/// (a publisher refuses a search naming a list it does not serve, and
/// every other list's hits were unverified: under the default fail-open
/// policy, a URL listed on a list still served let through); a hit on it
/// alone is unverified, never safe; an answer for it again puts it back.
/// Found by an adversarial review (of the Rust agent, which does the same).
#[test]
fn a_list_the_publisher_stops_serving_leaves_the_other_lists_confirmed() {
    let mut rng = StdRng::seed_from_u64(21);
    let mut session = one_list_not_served();
    let query = need(session.check(LISTED, at(NOW + 2), &mut rng));
    let request: FullHashSearchRequest = serde_json::from_slice(&query.request.body).expect("json");
    assert_eq!(request.min_versions, BTreeMap::from([("malware".to_owned(), 1)]));
    let verdict = session.complete_check(query, Ok(answer_for(&[LISTED_EXPRESSION])), at(NOW + 2), &mut rng);
    assert!(
        matches!(&verdict, Ok(Verdict::Unsafe { list, .. }) if list == "malware"),
        "{verdict:?}"
    );

    // Refuted on `malware`; `phishing`'s hit was asked of no one.
    let mut session = one_list_not_served();
    let query = need(session.check(LISTED, at(NOW + 2), &mut rng));
    let refuted = answer(&query, &[], 60);
    let verdict = session.complete_check(query, Ok(refuted), at(NOW + 2), &mut rng);
    assert!(
        matches!(&verdict, Ok(Verdict::Unverified { lists, reason, block: false, .. })
            if lists == &["phishing"] && reason.is_unknown_list()),
        "{verdict:?}"
    );

    // A search refused for naming it (made before the update that said so)
    // pauses no request for the versions that leave it out.
    let mut session = both_lists_loaded();
    let query = need(session.check(LISTED, at(NOW + 1), &mut rng));
    let refused = HttpResponse {
        status: 404,
        headers: vec![("Content-Type".into(), "application/json".into())],
        body: br#"{"error":{"code":"unknown_list","message":"no list named \"phishing\""}}"#.to_vec(),
    };
    let verdict = session.complete_check(query, Ok(refused), at(NOW + 1), &mut rng);
    assert!(
        matches!(&verdict, Ok(Verdict::Unverified { reason, .. }) if reason.is_unknown_list()),
        "{verdict:?}"
    );
    let update = not_served(&mut session, "phishing", NOW + 2);
    assert!(matches!(&update, Err(e) if e.is_unknown_list()), "{update:?}");
    let query = need(session.check(LISTED, at(NOW + 3), &mut rng));
    let verdict = session.complete_check(query, Ok(answer_for(&[LISTED_EXPRESSION])), at(NOW + 3), &mut rng);
    assert!(verdict.as_ref().is_ok_and(Verdict::is_unsafe), "{verdict:?}");

    // Served again: named again.
    let mut session = one_list_not_served();
    served_again(&mut session, NOW + 3);
    let query = need(session.check(LISTED, at(NOW + 4), &mut rng));
    let request: FullHashSearchRequest = serde_json::from_slice(&query.request.body).expect("json");
    assert_eq!(
        request.min_versions,
        BTreeMap::from([("malware".to_owned(), 1), ("phishing".to_owned(), 2)])
    );
}

/// Under a `max_additions_ratio` of 0 a chain that adds entries is left
/// for the whole snapshot; when that snapshot fails, the next round takes
/// the chain all the same (as after any failed rebase): its additions were
/// left every round (the deltas request led back to the snapshot), and a
/// URL listed since was answered "safe" while the snapshot route failed.
/// Found by an adversarial review (of the Rust agent, which does the same
/// within the round).
#[test]
fn under_a_ratio_of_zero_a_snapshot_that_fails_is_followed_by_a_round_that_takes_the_deltas() {
    let (mut session, _) = loaded(SessionConfig {
        max_additions_ratio: 0.0,
        ..config()
    });
    let [request] = session.update_requests().try_into().expect("one request");
    let etag = snapshot_etag(2, &[2; 32]);
    let chain = delta_to_2(&session);
    let update = session.handle_update_response(&request, ok(chain.clone(), &[("etag", &etag)]), at(NOW));
    let Ok(ListUpdate::NeedSnapshot {
        reason: None,
        request: snapshot,
    }) = update
    else {
        panic!("{update:?}");
    };
    assert!(
        session
            .handle_update_response(&snapshot, status(503, &[]), at(NOW))
            .is_err()
    );
    let [next] = session.update_requests().try_into().expect("one request");
    assert_eq!(next.kind, RequestKind::Deltas { from: 1 }, "{next:?}");
    let update = session.handle_update_response(&next, ok(chain, &[("etag", &etag)]), at(NOW + 1));
    assert_eq!(
        update,
        Ok(ListUpdate::Updated {
            previous: Some(1),
            version: 2
        })
    );
    let mut rng = StdRng::seed_from_u64(2);
    assert!(matches!(
        session.check("http://new.example/", at(NOW + 1), &mut rng),
        Ok(CheckStep::NeedFullHashes(_))
    ));
    // The round after asks for the snapshot again.
    let [again] = session.update_requests().try_into().expect("one request");
    assert!(matches!(again.kind, RequestKind::Snapshot { .. }), "{again:?}");
}

/// A check made while `phishing` was not served asks for `malware` alone;
/// an update round answering for `phishing` again lands before the answer.
/// The answer (for `malware` alone: no match) was decided against the
/// session's lists as they were by then, `phishing` served, and the hit
/// on `phishing`, asked of no one, was answered safe; it is decided by
/// what the request named. Found by an adversarial review.
#[test]
fn a_list_served_again_while_a_check_that_left_it_out_is_in_flight_is_never_answered_safe() {
    let mut rng = StdRng::seed_from_u64(22);
    let mut session = one_list_not_served();
    let query = need(session.check(LISTED, at(NOW + 2), &mut rng));
    let request: FullHashSearchRequest = serde_json::from_slice(&query.request.body).expect("json");
    assert_eq!(request.min_versions, BTreeMap::from([("malware".to_owned(), 1)]));
    // Meanwhile phishing's update is answered (served again).
    served_again(&mut session, NOW + 3);
    // The answer for `malware` alone: not on it.
    let refuted = answer(&query, &[], 60);
    let verdict = session.complete_check(query, Ok(refuted), at(NOW + 3), &mut rng);
    assert!(
        !matches!(&verdict, Ok(Verdict::Safe { .. })),
        "a hit on phishing, asked of no one, answered {verdict:?}"
    );
}
