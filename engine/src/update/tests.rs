use blocksieve_format::api::snapshot_etag;
use blocksieve_format::{DecodeLimits, DeltaEnd};

use super::*;
use crate::delta::tests::{NOW, base, base_end, delta, end, freshness_header, keys, names, snapshot_bytes};

fn etag_of(state: &ListState) -> String {
    let floor = state.floor();
    snapshot_etag(floor.version, &floor.body_sha256)
}

fn held(step: Result<SnapshotStep, Error>) -> (u64, bool) {
    match step {
        Ok(SnapshotStep::Held { version, new_etag }) => (version, new_etag),
        other => panic!("not held: {other:?}"),
    }
}

#[test]
fn the_snapshot_in_use_is_held_under_its_etag_or_a_new_one_and_a_newer_one_is_a_new_base() {
    let v1 = snapshot_bytes("malware", 1, &names(0..20, "a"));
    let state = ListState::of_base(base("malware", 1, &names(0..20, "a")));
    let limits = DecodeLimits::default();
    let plain = |etag| {
        Some(PlainBase {
            state: &state,
            etag: Some(etag),
        })
    };
    let floor = Some(state.floor());

    // The same ETag: the body is not even read (If-None-Match ignored).
    let step = take_snapshot(
        "malware",
        b"garbage",
        Some("\"e1\""),
        plain("\"e1\""),
        &keys(),
        &limits,
        floor.as_ref(),
    );
    assert_eq!(held(step), (1, false));

    // The same version and body under a new ETag: kept, the ETag replaced.
    let step = take_snapshot(
        "malware",
        &v1,
        Some("\"e2\""),
        plain("\"e1\""),
        &keys(),
        &limits,
        floor.as_ref(),
    );
    assert_eq!(held(step), (1, true));

    // A newer version: verified, a new base with no additions.
    let v2 = snapshot_bytes("malware", 2, &names(0..30, "a"));
    match take_snapshot(
        "malware",
        &v2,
        Some("\"e3\""),
        plain("\"e1\""),
        &keys(),
        &limits,
        floor.as_ref(),
    ) {
        Ok(SnapshotStep::New(next)) => {
            assert_eq!(next.version(), 2);
            assert!(!next.has_deltas());
        }
        other => panic!("not a new base: {other:?}"),
    }

    // With deltas applied there is no plain base: the same version is
    // taken again whole (a rebase), under any ETag.
    let step = take_snapshot("malware", &v1, Some("\"e1\""), None, &keys(), &limits, None);
    assert!(matches!(step, Ok(SnapshotStep::New(_))));

    // Older than the floor, another list, garbage: refused.
    let floor2 = Some(base("malware", 2, &names(0..30, "a")).floor());
    let step = take_snapshot("malware", &v1, None, None, &keys(), &limits, floor2.as_ref());
    assert!(matches!(step, Err(Error::Rollback { .. })), "{step:?}");
    let step = take_snapshot("phishing", &v1, None, None, &keys(), &limits, None);
    assert!(matches!(step, Err(Error::WrongList { .. })), "{step:?}");
    let step = take_snapshot(
        "malware",
        b"garbage",
        Some("\"e9\""),
        plain("\"e1\""),
        &keys(),
        &limits,
        None,
    );
    assert!(matches!(step, Err(Error::Decode { .. })), "{step:?}");
}

#[test]
fn a_chain_is_taken_only_whole_to_the_version_its_response_names() {
    let state = ListState::of_base(base("malware", 1, &names(0..20, "base")));
    let floor = Some(state.floor());
    let mut chain = delta(base_end(&state), end(2), &names(0..5, "a"), NOW + 7200);
    chain.extend(delta(end(2), end(3), &names(0..5, "b"), NOW + 7200));
    let latest = snapshot_etag(3, &end(3).body_sha256);

    match take_chain(
        "malware",
        &state,
        &chain,
        Some(&latest),
        &keys(),
        floor.as_ref(),
        1.0,
    ) {
        ChainStep::Advanced { state: next, deltas } => {
            assert_eq!((next.version(), deltas), (3, 2));
            assert_eq!(etag_of(&next), latest);
        }
        other => panic!("not advanced: {other:?}"),
    }
    // Without an ETag (stripped by a proxy) there is nothing to check.
    assert!(matches!(
        take_chain("malware", &state, &chain, None, &keys(), floor.as_ref(), 1.0),
        ChainStep::Advanced { .. }
    ));
    // Cut short: the response names version 4, the chain reaches 3, which
    // is swapped in before the snapshot is asked for; under a ratio of 0
    // the snapshot alone.
    let later = snapshot_etag(4, &end(4).body_sha256);
    match take_chain(
        "malware",
        &state,
        &chain,
        Some(&later),
        &keys(),
        floor.as_ref(),
        1.0,
    ) {
        ChainStep::Short {
            state: next,
            deltas,
            error: Error::DeltaChainShort { ends_at: 3, .. },
        } => {
            assert_eq!((next.version(), deltas, next.additions().len()), (3, 2, 10));
        }
        other => panic!("not short: {other:?}"),
    }
    assert!(matches!(
        take_chain(
            "malware",
            &state,
            &chain,
            Some(&later),
            &keys(),
            floor.as_ref(),
            0.0
        ),
        ChainStep::Fallback(Some(Error::DeltaChainShort { .. }))
    ));
    // A ratio of 0 holds no additions: the version is taken whole.
    assert!(matches!(
        take_chain(
            "malware",
            &state,
            &chain,
            Some(&latest),
            &keys(),
            floor.as_ref(),
            0.0
        ),
        ChainStep::Fallback(None)
    ));
    // An empty chain at the version held: unchanged; at another: short.
    assert!(matches!(
        take_chain(
            "malware",
            &state,
            b"",
            Some(&etag_of(&state)),
            &keys(),
            floor.as_ref(),
            1.0
        ),
        ChainStep::Unchanged
    ));
    assert!(matches!(
        take_chain(
            "malware",
            &state,
            b"",
            Some(&latest),
            &keys(),
            floor.as_ref(),
            1.0
        ),
        ChainStep::Fallback(Some(Error::DeltaChainShort { .. }))
    ));
    // From another version, or garbage: the whole snapshot instead.
    let elsewhere = delta(
        DeltaEnd {
            version: 7,
            body_sha256: [7; 32],
        },
        end(8),
        &names(0..1, "c"),
        NOW + 7200,
    );
    assert!(matches!(
        take_chain("malware", &state, &elsewhere, None, &keys(), floor.as_ref(), 1.0),
        ChainStep::Fallback(Some(Error::DeltaMismatch { .. }))
    ));
    assert!(matches!(
        take_chain("malware", &state, b"garbage", None, &keys(), floor.as_ref(), 1.0),
        ChainStep::Fallback(Some(Error::Delta { .. }))
    ));
}

#[test]
fn a_304_is_a_stale_validator_only_when_its_signed_record_names_a_newer_version() {
    let state = ListState::of_base(base("malware", 2, &names(0..20, "a")));
    let url = "http://publisher.example/v1/lists/malware/snapshot";
    let stale = |header: Option<&str>| stale_validator("malware", url, &state, header, &keys());

    let newer = freshness_header("malware", 3, true);
    let Some((3, Error::UnexpectedResponse { url: at, reason })) = stale(Some(&newer)) else {
        panic!("a trusted record naming version 3 over version 2 is a stale validator");
    };
    assert_eq!(at, url);
    assert!(
        reason.contains("version 3, newer than version 2 in use"),
        "{reason}"
    );

    for (what, header) in [
        ("no record", None),
        ("the held version", Some(freshness_header("malware", 2, true))),
        ("an older version", Some(freshness_header("malware", 1, true))),
        ("another list", Some(freshness_header("phishing", 3, true))),
        ("an untrusted key", Some(freshness_header("malware", 3, false))),
        ("garbage", Some("not-a-record".to_owned())),
    ] {
        assert!(stale(header.as_deref()).is_none(), "{what}");
    }
}

#[test]
fn only_a_trusted_record_of_this_list_naming_a_newer_version_is_evidence_for_the_round() {
    let vouched = |header: Option<String>| newer_vouched("malware", 2, header.as_deref(), &keys());
    assert_eq!(vouched(Some(freshness_header("malware", 3, true))), Some(3));
    for (what, header) in [
        ("no record", None),
        ("the held version", Some(freshness_header("malware", 2, true))),
        ("an older version", Some(freshness_header("malware", 1, true))),
        ("another list", Some(freshness_header("phishing", 3, true))),
        ("an untrusted key", Some(freshness_header("malware", 3, false))),
        ("garbage", Some("not-a-record".to_owned())),
    ] {
        assert_eq!(vouched(header), None, "{what}");
    }
    let Error::UnexpectedResponse { url, reason } = behind("http://mirror.example", 2, 3) else {
        panic!("not an unexpected response");
    };
    assert_eq!(url, "http://mirror.example");
    assert!(
        reason.contains("version 2 (the version in use) is unchanged while a signed freshness record in this round names version 3"),
        "{reason}"
    );
}
