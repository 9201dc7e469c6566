use blocksieve_format::{
    DeltaParams, FilterKind, KeyBits, PrefixFilter, SigningKey, SnapshotParams, encode, encode_delta,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::accept::accept;

pub(crate) const NOW: u64 = 1_700_000_000;

fn key() -> SigningKey {
    SigningKey::from_secret_bytes([7u8; 32])
}

pub(crate) fn keys() -> Vec<TrustedKey> {
    vec![key().public_key().clone()]
}

/// A freshness record's header value for `list` at `version`, signed by
/// `key` (the trusted [`keys`] with `trusted`, a stranger's without).
pub(crate) fn freshness_header(list: &str, version: u64, trusted: bool) -> String {
    let record = FreshnessRecord {
        list_name: list.into(),
        version,
        body_sha256: [version as u8; 32],
        issued_at: NOW,
        expires_at: NOW + 7200,
        next_build_at: 0,
    };
    let signer = if trusted {
        key()
    } else {
        SigningKey::from_secret_bytes([8u8; 32])
    };
    FreshnessRecord::to_header_value(&record.sign(&signer).expect("signed"))
}

pub(crate) fn hash(expression: &str) -> FullHash {
    FullHash::of(expression.as_bytes())
}

/// A signed snapshot of `list` holding `expressions`, as served.
pub(crate) fn snapshot_bytes(list: &str, version: u64, expressions: &[String]) -> Vec<u8> {
    let mut k: Vec<u64> = expressions.iter().map(|e| hash(e).prefix().key()).collect();
    k.sort_unstable();
    k.dedup();
    let filter = PrefixFilter::build(FilterKind::BinaryFuse8, &k).expect("filter");
    let params = SnapshotParams {
        list_name: list.into(),
        version,
        created_at: NOW - 10,
        expires_at: NOW + 3600,
        key_bits: KeyBits::Bits32,
        request_prefix_bits: 16,
        full_hash_count: k.len() as u64,
        measured_fpr: 0.0,
        zstd_level: 1,
    };
    encode(&params, &filter, &key()).expect("snapshot")
}

/// A signed snapshot of `list` holding `expressions`, accepted.
pub(crate) fn base(list: &str, version: u64, expressions: &[String]) -> AcceptedSnapshot {
    let bytes = snapshot_bytes(list, version, expressions);
    accept(
        list,
        &bytes,
        &keys(),
        &blocksieve_format::DecodeLimits::default(),
        None,
    )
    .expect("accepted")
}

/// The end of version `version` in these tests (the snapshots past the
/// base are never downloaded, so any hash stands for them).
pub(crate) fn end(version: u64) -> DeltaEnd {
    DeltaEnd {
        version,
        body_sha256: [version as u8; 32],
    }
}

pub(crate) fn delta(from: DeltaEnd, to: DeltaEnd, expressions: &[String], expires_at: u64) -> Vec<u8> {
    let params = DeltaParams {
        list_name: "malware".into(),
        from,
        to,
        created_at: NOW,
        expires_at,
    };
    let additions: Vec<u32> = expressions.iter().map(|e| hash(e).prefix().0).collect();
    encode_delta(&params, &additions, &key()).expect("delta")
}

pub(crate) fn names(range: std::ops::Range<u32>, tag: &str) -> Vec<String> {
    range.map(|i| format!("{tag}-{i}.example/")).collect()
}

pub(crate) fn base_end(state: &ListState) -> DeltaEnd {
    let floor = state.floor();
    DeltaEnd {
        version: floor.version,
        body_sha256: floor.body_sha256,
    }
}

fn advanced(outcome: Result<ChainOutcome, Error>) -> ListState {
    match outcome {
        Ok(ChainOutcome::Advanced { state, .. }) => state,
        other => panic!("not advanced: {other:?}"),
    }
}

#[test]
fn following_twenty_deltas_finds_every_added_prefix_after_each() {
    let mut state = ListState::of_base(base("malware", 1, &names(0..50, "base")));
    let mut added: Vec<String> = Vec::new();
    let mut rng = StdRng::seed_from_u64(20);
    for v in 2..22u64 {
        let fresh: Vec<String> = (0..rng.gen_range(0..40))
            .map(|i| format!("v{v}-{i}-{}.example/", rng.r#gen::<u32>()))
            .collect();
        let from = base_end(&state);
        let bytes = delta(from, end(v), &fresh, NOW + 3600 + v);
        state = advanced(apply_chain(
            "malware",
            &state,
            &bytes,
            &keys(),
            Some(&state.floor()),
        ));
        added.extend(fresh);
        assert_eq!(state.version(), v);
        assert!(state.additions().windows(2).all(|w| w[0] < w[1]));
        for e in names(0..50, "base").iter().chain(&added) {
            assert!(state.probably_contains(&hash(e)), "{e} missed at version {v}");
        }
        assert_eq!(state.base().header().version, 1);
        assert_eq!(
            state.expires_at(),
            from_unix_seconds(NOW + 3600 + v),
            "fresh until the latest delta's expiry"
        );
    }
}

#[test]
fn a_chain_of_several_deltas_applies_at_once_and_an_empty_one_changes_nothing() {
    let state = ListState::of_base(base("malware", 1, &names(0..10, "base")));
    let mut chain = delta(base_end(&state), end(2), &names(0..5, "a"), NOW + 7200);
    chain.extend(delta(end(2), end(3), &names(0..5, "b"), NOW + 7200));
    let next = match apply_chain("malware", &state, &chain, &keys(), Some(&state.floor())) {
        Ok(ChainOutcome::Advanced { state, deltas }) => {
            assert_eq!(deltas, 2);
            state
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(next.version(), 3);
    assert_eq!(next.additions().len(), 10);
    assert!(next.has_deltas());
    assert!(matches!(
        apply_chain("malware", &next, &[], &keys(), None),
        Ok(ChainOutcome::Unchanged)
    ));
}

#[test]
fn dropped_replayed_reordered_corrupt_and_rolled_back_chains_are_refused() {
    let state = ListState::of_base(base("malware", 1, &names(0..10, "base")));
    let d2 = delta(base_end(&state), end(2), &names(0..5, "a"), NOW + 7200);
    let d3 = delta(end(2), end(3), &names(0..5, "b"), NOW + 7200);
    let d4 = delta(end(3), end(4), &names(0..5, "c"), NOW + 7200);
    let floor = state.floor();
    let refuse = |chain: Vec<u8>| apply_chain("malware", &state, &chain, &keys(), Some(&floor));
    // The first delta dropped: the chain no longer starts at the floor.
    assert!(matches!(
        refuse([d3.clone(), d4.clone()].concat()),
        Err(Error::DeltaMismatch {
            held_version: 1,
            from_version: 2,
            ..
        })
    ));
    // A middle one dropped, one replayed, two swapped: broken links.
    for chain in [
        [d2.clone(), d4.clone()].concat(),
        [d2.clone(), d2.clone(), d3.clone()].concat(),
        [d2.clone(), d4.clone(), d3.clone()].concat(),
    ] {
        assert!(matches!(refuse(chain), Err(Error::Delta { .. })));
    }
    // A flipped bit anywhere.
    let good = [d2.clone(), d3.clone()].concat();
    for i in (0..good.len()).step_by(7) {
        let mut bad = good.clone();
        bad[i] ^= 0x10;
        assert!(refuse(bad).is_err(), "flip at {i} accepted");
    }
    // Signed by a stranger.
    let stranger = SigningKey::from_secret_bytes([8u8; 32]);
    let params = DeltaParams {
        list_name: "malware".into(),
        from: base_end(&state),
        to: end(2),
        created_at: NOW,
        expires_at: NOW,
    };
    let forged = encode_delta(&params, &[1, 2, 3], &stranger).expect("delta");
    assert!(matches!(refuse(forged), Err(Error::Delta { .. })));
    // A chain ending below the rollback floor.
    let high = VersionFloor {
        version: 9,
        body_sha256: [9; 32],
    };
    assert!(matches!(
        apply_chain("malware", &state, &d2, &keys(), Some(&high)),
        Err(Error::Rollback {
            trusted_version: 9,
            new_version: 2,
            ..
        })
    ));
    // Another list's chain.
    let other = ListState::of_base(base("phishing", 1, &names(0..10, "base")));
    let other_chain = delta(base_end(&other), end(2), &names(0..5, "a"), NOW);
    assert!(matches!(
        apply_chain("phishing", &other, &other_chain, &keys(), None),
        Err(Error::Delta { .. })
    ));
}

#[test]
fn a_freshness_record_extends_only_the_exact_version_and_hash_held() {
    let state = ListState::of_base(base("malware", 1, &names(0..10, "base")));
    let now = from_unix_seconds(NOW + 4000);
    assert!(state.is_stale(now));
    let floor = state.floor();
    let record = |list: &str, version: u64, body_sha256: [u8; 32]| FreshnessRecord {
        list_name: list.into(),
        version,
        body_sha256,
        issued_at: NOW + 3900,
        expires_at: NOW + 7200,
        next_build_at: 0,
    };
    for wrong in [
        record("malware", 2, floor.body_sha256),
        record("malware", 1, [0; 32]),
        record("phishing", 1, floor.body_sha256),
    ] {
        assert!(!state.apply_freshness("malware", &wrong));
        assert!(state.is_stale(now));
    }
    let right = record("malware", 1, floor.body_sha256);
    let header = FreshnessRecord::to_header_value(&right.sign(&key()).expect("signed"));
    let read = read_freshness("malware", &header, &keys()).expect("verifies");
    assert!(state.apply_freshness("malware", &read));
    assert!(!state.is_stale(now));
    assert_eq!(state.expires_at(), from_unix_seconds(NOW + 7200));
    // An older record never shortens it.
    let older = FreshnessRecord {
        expires_at: NOW + 5000,
        ..right.clone()
    };
    assert!(state.apply_freshness("malware", &older));
    assert_eq!(state.expires_at(), from_unix_seconds(NOW + 7200));
    // A forged record does not verify; another list's is refused.
    let stranger = SigningKey::from_secret_bytes([8u8; 32]);
    let forged = FreshnessRecord::to_header_value(&right.sign(&stranger).expect("signed"));
    assert!(read_freshness("malware", &forged, &keys()).is_err());
    assert!(read_freshness("phishing", &header, &keys()).is_err());
}

#[test]
fn deltas_are_asked_for_until_the_additions_pass_the_ratio() {
    assert_eq!(next_request(None, 0.3), UpdateRequest::Snapshot);
    let state = ListState::of_base(base("malware", 1, &names(0..100, "base")));
    assert_eq!(
        next_request(Some(&state), 0.3),
        UpdateRequest::Deltas {
            from: 1,
            if_none_match: snapshot_etag(1, &state.floor().body_sha256),
        }
    );
    let chain = delta(base_end(&state), end(2), &names(0..30, "a"), NOW);
    let at_ratio = advanced(apply_chain("malware", &state, &chain, &keys(), None));
    assert!(!at_ratio.due_for_rebase(0.3), "30 of 100 is not past 0.3");
    assert!(matches!(
        next_request(Some(&at_ratio), 0.3),
        UpdateRequest::Deltas { from: 2, .. }
    ));
    let chain = delta(end(2), end(3), &names(0..1, "b"), NOW);
    let past = advanced(apply_chain("malware", &at_ratio, &chain, &keys(), None));
    assert_eq!(next_request(Some(&past), 0.3), UpdateRequest::Snapshot);
    assert_eq!(
        next_request(Some(&state), 0.0),
        UpdateRequest::Deltas {
            from: 1,
            if_none_match: state.etag(),
        }
    );
}

#[test]
fn restore_applies_a_good_chain_and_falls_back_to_the_base_on_a_bad_one() {
    let expressions = names(0..10, "base");
    let first = ListState::of_base(base("malware", 1, &expressions));
    let mut chain = delta(base_end(&first), end(2), &names(0..5, "a"), NOW);
    chain.extend(delta(end(2), end(3), &names(0..5, "b"), NOW));
    let floor = VersionFloor {
        version: 3,
        body_sha256: [3; 32],
    };
    let (state, error) = restore_chain(
        "malware",
        base("malware", 1, &expressions),
        Some(&chain),
        Some(&floor),
        &keys(),
    );
    assert!(error.is_none());
    assert_eq!(state.floor(), floor);
    assert!(state.probably_contains(&hash("b-4.example/")));

    let mut corrupt = chain.clone();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    let (state, error) = restore_chain(
        "malware",
        base("malware", 1, &expressions),
        Some(&corrupt),
        Some(&floor),
        &keys(),
    );
    assert!(error.is_some());
    assert_eq!(state.version(), 1);
    assert!(state.additions().is_empty());

    let (state, error) = restore_chain(
        "malware",
        base("malware", 1, &expressions),
        None,
        Some(&floor),
        &keys(),
    );
    assert!(error.is_none());
    assert_eq!(state.version(), 1);
}

#[test]
fn a_saved_chain_cut_at_any_length_restores_the_base_alone() {
    let expressions = names(0..10, "base");
    let first = ListState::of_base(base("malware", 1, &expressions));
    let mut chain = delta(base_end(&first), end(2), &names(0..5, "a"), NOW);
    chain.extend(delta(end(2), end(3), &names(0..5, "b"), NOW));
    let floor = VersionFloor {
        version: 3,
        body_sha256: [3; 32],
    };
    let snapshot = base("malware", 1, &expressions);
    let (whole, error) = restore_chain("malware", snapshot, Some(&chain), Some(&floor), &keys());
    assert!(error.is_none() && whole.version() == 3);
    for cut in 1..chain.len() {
        let snapshot = base("malware", 1, &expressions);
        let (state, error) = restore_chain("malware", snapshot, Some(&chain[..cut]), Some(&floor), &keys());
        // A cut between the two deltas leaves a valid chain to version 2,
        // below the floor: refused as well.
        assert!(error.is_some(), "cut at {cut} accepted");
        assert_eq!((state.version(), state.additions().len()), (1, 0), "cut at {cut}");
    }
}

#[test]
fn a_chain_cut_short_of_the_version_its_response_names_is_refused() {
    let state = ListState::of_base(base("malware", 10, &names(0..50, "base")));
    let d1 = delta(base_end(&state), end(11), &names(0..5, "one"), NOW + 3600);
    let d2 = delta(end(11), end(12), &names(0..5, "two"), NOW + 3600);
    let latest = snapshot_etag(12, &end(12).body_sha256);
    // The whole chain reaches the tagged version.
    let full = advanced(apply_chain(
        "malware",
        &state,
        &[d1.clone(), d2].concat(),
        &keys(),
        None,
    ));
    assert!(check_chain_end("malware", &full.floor(), Some(&latest)).is_ok());
    // The last delta left out: it verifies and links, but stops at 11.
    let short = advanced(apply_chain("malware", &state, &d1, &keys(), None));
    assert!(matches!(
        check_chain_end("malware", &short.floor(), Some(&latest)),
        Err(Error::DeltaChainShort { ends_at: 11, .. })
    ));
    // Every delta left out: an empty chain is "unchanged" only at the latest.
    assert!(check_chain_end("malware", &state.floor(), Some(&latest)).is_err());
    assert!(check_chain_end("malware", &state.floor(), Some(&state.etag())).is_ok());
    // No tag (stripped by a proxy): nothing to check against.
    assert!(check_chain_end("malware", &short.floor(), None).is_ok());
}

#[test]
fn a_far_future_expiry_of_a_delta_or_freshness_record_reads_without_a_panic() {
    // Signed, so trusted, but any u64: the state's expiry must still be a
    // time (as a snapshot's is), not a panic in status or scheduling.
    let state = ListState::of_base(base("malware", 1, &names(0..10, "base")));
    let far = delta(base_end(&state), end(2), &names(10..12, "far"), u64::MAX);
    let next = advanced(apply_chain("malware", &state, &far, &keys(), None));
    assert!(next.expires_at() > from_unix_seconds(NOW + 3600));
    assert!(!next.is_stale(from_unix_seconds(NOW + 4000)));
    let floor = state.floor();
    let record = FreshnessRecord {
        list_name: "malware".into(),
        version: 1,
        body_sha256: floor.body_sha256,
        issued_at: NOW,
        expires_at: u64::MAX,
        next_build_at: 0,
    };
    assert!(state.apply_freshness("malware", &record));
    assert!(state.expires_at() > from_unix_seconds(NOW + 3600));
}

/// A list that changes little gets a delta per build that adds nothing, so
/// its additions never pass the ratio, and the saved chain grew without end:
/// past [`MAX_CHAIN_DELTAS`] (about 85 days at 48 builds a day) it was
/// refused at the next start, and the agent restarted on a months-old base.
/// At [`REBASE_AFTER_DELTAS`] the whole snapshot is asked for; a chain of
/// that many, saved, is restored whole.
#[test]
fn a_long_chain_of_empty_deltas_is_followed_by_a_rebase() {
    let state = ListState::of_base(base("malware", 1, &names(0..100, "base")));
    let links = |from: u64, to: u64| -> Vec<u8> {
        let mut chain = Vec::new();
        for v in from..to {
            let start = if v == 1 { base_end(&state) } else { end(v) };
            chain.extend(delta(start, end(v + 1), &[], NOW));
        }
        chain
    };
    let almost = links(1, REBASE_AFTER_DELTAS as u64);
    let before = advanced(apply_chain("malware", &state, &almost, &keys(), None));
    assert_eq!(before.deltas_applied(), REBASE_AFTER_DELTAS - 1);
    assert!(matches!(
        next_request(Some(&before), 0.3),
        UpdateRequest::Deltas { .. }
    ));
    let last = links(REBASE_AFTER_DELTAS as u64, REBASE_AFTER_DELTAS as u64 + 1);
    let due = advanced(apply_chain("malware", &before, &last, &keys(), None));
    assert_eq!(due.deltas_applied(), REBASE_AFTER_DELTAS);
    assert_eq!(next_request(Some(&due), 0.3), UpdateRequest::Snapshot);
    // After a failed rebase the deltas are still asked for.
    assert!(matches!(deltas_request(&due), UpdateRequest::Deltas { .. }));
    // The chain as saved (both responses) restores whole at start.
    let saved = [almost, last].concat();
    let (restored, error) = restore_chain(
        "malware",
        base("malware", 1, &names(0..100, "base")),
        Some(&saved),
        None,
        &keys(),
    );
    assert!(error.is_none(), "{error:?}");
    assert_eq!(restored.version(), REBASE_AFTER_DELTAS as u64 + 1);
    assert_eq!(restored.deltas_applied(), REBASE_AFTER_DELTAS);
}

/// A rebase whose snapshot keeps failing takes the deltas meanwhile; the
/// chain since the base then passes what one response may hold
/// ([`MAX_CHAIN_DELTAS`]). It was refused at the next start ("chain holds
/// more than 4096 deltas") and the list came back on its base, every entry
/// added since answered safe. A saved chain is restored up to
/// [`MAX_KEPT_CHAIN_DELTAS`]; a chain that would pass that is refused when it
/// arrives (the list stays at the version held, which a restart restores).
#[test]
fn a_chain_kept_past_one_responses_bound_restores_whole_up_to_its_own() {
    let state = ListState::of_base(base("malware", 1, &names(0..100, "base")));
    let links = |from: u64, to: u64, late: u64| -> Vec<u8> {
        let mut chain = Vec::new();
        for v in from..to {
            let start = if v == 1 { base_end(&state) } else { end(v) };
            let added = if v + 1 == late {
                names(0..1, "late")
            } else {
                Vec::new()
            };
            chain.extend(delta(start, end(v + 1), &added, NOW));
        }
        chain
    };
    let total = MAX_CHAIN_DELTAS as u64 + 10;
    let first = links(1, MAX_CHAIN_DELTAS as u64, 0);
    let held = advanced(apply_chain("malware", &state, &first, &keys(), None));
    let second = links(MAX_CHAIN_DELTAS as u64, total + 1, total - 3);
    let held = advanced(apply_chain("malware", &held, &second, &keys(), None));
    assert_eq!(held.deltas_applied(), total as usize);
    let late = hash(&names(0..1, "late")[0]);
    assert!(held.probably_contains(&late));
    let saved = [first, second].concat();
    let (restored, error) = restore_chain(
        "malware",
        base("malware", 1, &names(0..100, "base")),
        Some(&saved),
        Some(&held.floor()),
        &keys(),
    );
    assert!(error.is_none(), "{error:?}");
    assert_eq!(restored.version(), total + 1);
    assert!(restored.probably_contains(&late));

    // A state as far from its base as is kept: one delta more is refused.
    let far = ListState {
        base: Arc::clone(&held.base),
        additions: Arc::clone(&held.additions),
        deltas: MAX_KEPT_CHAIN_DELTAS,
        floor: held.floor,
        signed_until: held.signed_until,
        fresh_until: AtomicU64::new(held.signed_until),
    };
    let one = delta(end(total + 1), end(total + 2), &[], NOW);
    let refused = apply_chain("malware", &far, &one, &keys(), None);
    assert!(
        matches!(
            refused,
            Err(Error::ChainPastRestoreLimit { deltas, .. }) if deltas == MAX_KEPT_CHAIN_DELTAS + 1
        ),
        "{refused:?}"
    );
}

/// A chain kept since the base is refused past its byte bound, which is
/// what a restart reads back.
#[test]
fn a_kept_chain_past_its_byte_bound_is_refused() {
    let state = ListState::of_base(base("malware", 1, &names(0..10, "base")));
    let bound = usize::try_from(MAX_KEPT_CHAIN_BYTES).unwrap();
    assert!(check_kept_bytes("malware", &state, bound).is_ok());
    assert!(matches!(
        check_kept_bytes("malware", &state, bound + 1),
        Err(Error::ChainPastRestoreLimit { bytes, .. }) if bytes == MAX_KEPT_CHAIN_BYTES + 1
    ));
}
