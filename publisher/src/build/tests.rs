//! Unit tests of the build: allowlists, fallbacks, sizing.

use std::io::Read;

use blocksieve_format::{FilterKind, KeyBits};

use super::*;
use crate::config::{FilterChoice, SourceFormat};

fn loaded(bytes: &str, format: SourceFormat, role: SourceRole) -> LoadedSource {
    LoadedSource {
        config: SourceConfig::file(format!("{format:?}-{role:?}"), format),
        role,
        fetched: Fetched::Fresh {
            bytes: bytes.as_bytes().to_vec(),
            validators: Default::default(),
        },
        last_good: LastGood::none(),
        read_duration: Duration::ZERO,
        keep_to: KeepTo::memory(),
    }
}

fn collect(sources: Vec<LoadedSource>) -> Result<(Vec<FullHash>, ParseReport, AllowReport), Error> {
    let read = read_sources(
        "test",
        sources,
        1,
        PeakRssProbe::NONE,
        &mut Vec::new(),
        &Cancel::default(),
    )
    .map_err(|f| f.error)?;
    Ok((read.hashes, read.parse, read.allow))
}

fn sorted(exprs: &[&str]) -> Vec<FullHash> {
    let mut v: Vec<FullHash> = exprs.iter().map(|e| FullHash::of(e.as_bytes())).collect();
    v.sort_unstable();
    v
}

// Real entries of MetaMask's eth-phishing-config.json
// (1.2.0). `metmask.com`, `coinbased.xyz` and `spi.club` are on both
// lists; `cpanel.coinbased.xyz` and `usermd.net` on the blacklist only,
// `imagine.usermd.net` and `auctic.net` on the whitelist only.
#[test]
fn metamask_whitelist_overrides_its_blacklist() {
    let json = r#"{"whitelist": ["metmask.com", "coinbased.xyz", "spi.club", "imagine.usermd.net", "auctic.net"],
                   "blacklist": ["metmask.com", "coinbased.xyz", "spi.club", "cpanel.coinbased.xyz", "usermd.net"]}"#;
    let (hashes, report, allow) = collect(vec![loaded(json, SourceFormat::Json, SourceRole::Block)]).unwrap();
    // Allow wins for the same expression only: a blocked subdomain of an
    // allowed domain stays, and so does the domain of an allowed
    // subdomain (`usermd.net/` matches `imagine.usermd.net` too).
    assert_eq!(hashes, sorted(&["cpanel.coinbased.xyz/", "usermd.net/"]));
    assert_eq!(report.accepted, 5);
    assert_eq!((allow.parse.lines, allow.entries, allow.removed), (5, 5, 3));
    assert_eq!(allow.sources[0].source, "Json-Block (whitelist)");

    // `json_allow_key = ""` reads no allow array.
    let mut source = loaded(json, SourceFormat::Json, SourceRole::Block);
    source.config.json_allow_key = Some(String::new());
    let (hashes, _, allow) = collect(vec![source]).unwrap();
    assert_eq!(hashes.len(), 5);
    assert_eq!(allow, AllowReport::default());

    // The same document as an allow source of another list.
    let urls = "http://metmask.com/\nhttp://cpanel.coinbased.xyz\n";
    let (hashes, _, allow) = collect(vec![
        loaded(urls, SourceFormat::Urls, SourceRole::Block),
        loaded(json, SourceFormat::Json, SourceRole::Allow),
    ])
    .unwrap();
    assert_eq!(hashes, sorted(&["cpanel.coinbased.xyz/"]));
    assert_eq!((allow.entries, allow.removed), (5, 1));
}

#[test]
fn allow_sources_remove_the_same_expression_from_every_source() {
    let (hashes, _, allow) = collect(vec![
        loaded(
            "http://a.example/p\nhttp://c.example/x\nhttp://x.b.example/\n",
            SourceFormat::Urls,
            SourceRole::Block,
        ),
        loaded("b.example\nc.example\n", SourceFormat::Domains, SourceRole::Block),
        loaded(
            "# allowed\nhttp://a.example/p\nb.example\n\"x\"\n",
            SourceFormat::Urls,
            SourceRole::Allow,
        ),
    ])
    .unwrap();
    assert_eq!(hashes, sorted(&["c.example/x", "x.b.example/", "c.example/"]));
    assert_eq!((allow.parse.lines, allow.parse.accepted), (4, 2));
    assert_eq!(allow.parse.rejected[crate::sources::reason::SINGLE_LABEL], 1);
    assert_eq!((allow.entries, allow.removed), (2, 2));
    assert_eq!(allow.sources[0].state, "fresh");
}

// A missing allowlist only blocks more; a missing threat feed would
// publish less.
// A block source that fails with no last good content fails the build,
// but the sources after it are still read: the failed build says which
// of them fail too, and keeps their fresh content as their last good.
#[test]
fn a_failed_read_reports_every_source_and_keeps_the_others_content() {
    let failed = |role| LoadedSource {
        fetched: Fetched::Failed("HTTP 503".to_owned()),
        ..loaded("", SourceFormat::Domains, role)
    };
    let mut updates = Vec::new();
    let sources = vec![
        loaded("a.example\n", SourceFormat::Domains, SourceRole::Block),
        failed(SourceRole::Block),
        loaded("c.example\nd.example\n", SourceFormat::Domains, SourceRole::Block),
        failed(SourceRole::Allow),
    ];
    let failure = read_sources(
        "test",
        sources,
        1,
        PeakRssProbe::NONE,
        &mut updates,
        &Cancel::default(),
    )
    .unwrap_err();
    assert_eq!(
        failure.error.to_string(),
        "source: Domains-Block: HTTP 503; no last good content to fall back to"
    );
    let read: Vec<_> = (failure.read.sources.iter())
        .map(|s| (s.state.as_str(), s.accepted, s.error.as_deref()))
        .collect();
    assert_eq!(
        read,
        [
            ("fresh", 1, None),
            (
                "failed",
                0,
                Some("HTTP 503; no last good content to fall back to")
            ),
            ("fresh", 2, None),
        ]
    );
    let allow = &failure.read.allow.sources;
    assert_eq!((allow.len(), allow[0].state.as_str()), (1, "failed"));
    let stored: Vec<usize> = (updates.iter())
        .filter(|(_, u)| matches!(u, SourceUpdate::Store { .. }))
        .map(|(i, _)| *i)
        .collect();
    assert_eq!(stored, [0, 2]);
}

#[test]
fn failing_allow_source_is_left_out_but_a_failing_block_source_fails() {
    let failed = |role| LoadedSource {
        fetched: Fetched::Failed("HTTP 503".to_owned()),
        ..loaded("", SourceFormat::Domains, role)
    };
    let (hashes, _, allow) = collect(vec![
        loaded("evil.example\n", SourceFormat::Domains, SourceRole::Block),
        failed(SourceRole::Allow),
    ])
    .unwrap();
    assert_eq!(hashes, sorted(&["evil.example/"]));
    assert_eq!(allow.sources[0].state, "failed");
    assert!(
        allow.sources[0]
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("HTTP 503")
    );
    let err = collect(vec![failed(SourceRole::Block)]).unwrap_err();
    assert!(matches!(err, Error::Source { .. }), "{err}");
}

/// A stored copy whose reader gives `text`, then refuses it at its end
/// (as one that does not match its metadata does).
fn refused_copy(text: &'static str) -> LastGood {
    struct RefusedAtEnd(std::io::Cursor<&'static [u8]>);
    impl Read for RefusedAtEnd {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            match self.0.read(buf)? {
                0 if !buf.is_empty() => Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    crate::storage::StoredCopyError("does not match its metadata".into()),
                )),
                n => Ok(n),
            }
        }
    }
    LastGood::deferred(move || {
        let reader = Box::new(RefusedAtEnd(std::io::Cursor::new(text.as_bytes())));
        Some((
            reader as Box<dyn Read + Send>,
            ContentEncoding::Identity,
            CacheMeta::default(),
        ))
    })
}

// What a refused copy gave before its end is dropped: an allow source's
// entries would remove listed ones.
#[test]
fn a_refused_stored_copy_leaves_an_allow_source_out_and_fails_a_block_source() {
    let falling_back = |text, role| LoadedSource {
        fetched: Fetched::Failed("HTTP 503".to_owned()),
        last_good: refused_copy(text),
        ..loaded("", SourceFormat::Domains, role)
    };
    let (hashes, _, allow) = collect(vec![
        loaded(
            "evil.example\nworse.example\n",
            SourceFormat::Domains,
            SourceRole::Block,
        ),
        falling_back("evil.example\n", SourceRole::Allow),
    ])
    .unwrap();
    assert_eq!(hashes, sorted(&["evil.example/", "worse.example/"]));
    assert_eq!(allow.sources[0].state, "failed");
    let error = allow.sources[0].error.as_deref().unwrap_or_default();
    assert!(
        error.contains("HTTP 503; last good content not usable: stored copy: does not match its metadata"),
        "{error}"
    );
    let err = collect(vec![falling_back("evil.example\n", SourceRole::Block)]).unwrap_err();
    assert!(matches!(err, Error::Source { .. }), "{err}");
}

#[test]
fn request_prefix_length_keeps_the_anonymity_set() {
    assert_eq!(request_prefix_bits(813_641, 64), 12); // 813641/4096 = 198 ≥ 64; /65536 = 12
    assert_eq!(request_prefix_bits(90_000, 64), 8);
    assert_eq!(request_prefix_bits(500, 64), 8);
    assert_eq!(request_prefix_bits(1 << 30, 64), 24);
    assert_eq!(request_prefix_bits(1 << 40, 64), 32);
}

/// A list around a threshold (262,144 full hashes at `min_anonymity` 64:
/// 8 bits below, 12 from it) keeps the length it had until its bucket
/// passes 32 × `min_anonymity` or falls under it: the length goes up at
/// twice the threshold and back down at the threshold, not at each
/// crossing, since every change of length sends agents a whole snapshot.
#[test]
fn request_prefix_length_changes_only_past_a_doubling_or_a_halving() {
    let threshold = 64 << 12;
    assert_eq!(request_prefix_bits(threshold - 1, 64), 8);
    assert_eq!(request_prefix_bits(threshold, 64), 12);
    let mut bits = request_prefix_bits_after(None, threshold - 1, 64);
    assert_eq!(bits, 8);
    for n in [threshold + 1, threshold - 1, threshold + 1, 2 * threshold] {
        bits = request_prefix_bits_after(Some(bits), n, 64);
        assert_eq!(bits, 8, "{n}");
    }
    // Past 32 × min_anonymity under 8 bits: the longest length, 12.
    bits = request_prefix_bits_after(Some(bits), 2 * threshold + 1, 64);
    assert_eq!(bits, 12);
    for n in [2 * threshold + 1, threshold, 8 * threshold] {
        assert_eq!(request_prefix_bits_after(Some(12), n, 64), 12, "{n}");
    }
    // Under min_anonymity at 12 bits (halved since it took 12): back to 8.
    assert_eq!(request_prefix_bits_after(Some(12), threshold - 1, 64), 8);
    // A length the list could not keep (set by the operator before, or
    // invalid) is sized afresh.
    assert_eq!(request_prefix_bits_after(Some(32), threshold, 64), 12);
    assert_eq!(request_prefix_bits_after(Some(13), threshold, 64), 12);
}

#[test]
fn auto_picks_the_smallest_kind_under_target() {
    let mut list = ListConfig::new("x", vec![]);
    list.filter = FilterChoice::Auto(crate::config::AutoFilter::Auto);
    // BinaryFuse8: ~18 requests per 1,000 checks; over a target of 10.
    assert_eq!(filter_kind_for(&list, 100_000), FilterKind::BinaryFuse16);
    list.target_full_hash_requests_per_1000 = 20.0;
    assert_eq!(filter_kind_for(&list, 100_000), FilterKind::BinaryFuse8);
    let r8 = expected_requests_per_1000(false_hit_per_probe(1.0 / 256.0, 100_000, KeyBits::Bits32));
    assert!((17.0..19.0).contains(&r8), "{r8}");
}

#[test]
fn poisson_tails_match_hand_computed_values() {
    use sizing::poisson_tail;
    // P(X ≥ 4 | λ = 100,000 / 65,536) = 1 − e^−λ (1 + λ + λ²/2 + λ³/6).
    let l: f64 = 100_000.0 / 65_536.0;
    let expected = 1.0 - (-l).exp() * (1.0 + l + l * l / 2.0 + l * l * l / 6.0);
    assert!(
        (poisson_tail(l, 4.0) - expected).abs() < 1e-12,
        "{}",
        poisson_tail(l, 4.0)
    );
    assert!((expected - 0.0698).abs() < 1e-3);
    assert_eq!(poisson_tail(l, 0.0), 1.0);
    assert!((poisson_tail(3.0, 1.0) - (1.0 - (-3.0f64).exp())).abs() < 1e-12);
    // Twice a binary_fuse8 canary's mean is no chance at all; its mean is
    // a coin flip.
    let fuse8 = 100_000.0 / 256.0;
    assert!(poisson_tail(fuse8, 2.0 * fuse8) < 1e-60);
    assert!((poisson_tail(fuse8, fuse8.ceil()) - 0.5).abs() < 0.05);
}

#[test]
fn the_fpr_gate_refuses_a_broken_filter_not_a_lucky_count() {
    let fuse16 = 1.0 / 65_536.0;
    let fuse8 = 1.0 / 256.0;
    let per = |hits: u32| f64::from(hits) / f64::from(CANARY_PROBES);
    // binary_fuse16 expects 1.5 hits: 4 is over 2× by chance (7 %), 12 is
    // not chance (P < 1e-6), and a broken filter hits half its probes.
    assert!(!sizing::fpr_over_bound(per(4), fuse16, 2.0));
    assert!(!sizing::fpr_over_bound(per(8), fuse16, 2.0));
    assert!(sizing::fpr_over_bound(per(12), fuse16, 2.0));
    assert!(sizing::fpr_over_bound(0.5, fuse16, 2.0));
    // binary_fuse8 expects 391: 2× the bound is refused as before, a count
    // under it never.
    assert!(sizing::fpr_over_bound(per(782), fuse8, 2.0));
    assert!(!sizing::fpr_over_bound(per(780), fuse8, 2.0));
    assert!(!sizing::fpr_over_bound(per(450), fuse8, 2.0));
}

/// A good binary_fuse16 filter over a small list (the built-in list's
/// size), canary-measured with 60 seeds: the count alone was "over 2×" in
/// some of them (7 % each), the gate refuses none.
#[test]
fn a_good_small_binary_fuse16_filter_is_never_refused_by_chance() {
    use rand::{Rng as _, SeedableRng as _};
    let mut rng = rand::rngs::StdRng::seed_from_u64(19);
    let mut keys: Vec<u64> = (0..778).map(|_| u64::from(rng.r#gen::<u32>())).collect();
    keys.sort_unstable();
    keys.dedup();
    let filter = PrefixFilter::build(FilterKind::BinaryFuse16, &keys).unwrap();
    let theoretical = 1.0 / 65_536.0;
    let (mut over_by_count, mut refused) = (0, 0);
    for seed in 0..60 {
        let measured = measure_fpr(&filter, &keys, KeyBits::Bits32, CANARY_PROBES, seed);
        over_by_count += u32::from(measured > 2.0 * theoretical);
        refused += u32::from(sizing::fpr_over_bound(measured, theoretical, 2.0));
    }
    assert!(
        over_by_count >= 1,
        "the old rule refused none of 60 (expected ~4)"
    );
    assert_eq!(refused, 0);
}

#[test]
fn the_fpr_gate_bound_is_the_largest_rate_it_accepts() {
    let per = |hits: u32| f64::from(hits) / f64::from(CANARY_PROBES);
    // binary_fuse16: P(X ≥ 10) = 4.8e-6, P(X ≥ 11) = 6.5e-7 at λ = 1.53.
    for (theoretical, bound) in [(1.0 / 256.0, per(781)), (1.0 / 65_536.0, per(10))] {
        let got = sizing::fpr_gate_bound(theoretical, 2.0);
        assert!((got - bound).abs() < 1e-12, "{theoretical}: {got} vs {bound}");
        assert!(!sizing::fpr_over_bound(got, theoretical, 2.0));
        assert!(sizing::fpr_over_bound(got + per(1), theoretical, 2.0));
    }
}

#[test]
fn the_fpr_gate_bound_of_no_probability_is_none_at_once() {
    for theoretical in [-1e12, -1.0, 1.5, f64::NAN, f64::INFINITY] {
        assert!(sizing::fpr_gate_bound(theoretical, 2.0).is_nan(), "{theoretical}");
    }
    assert!(sizing::fpr_gate_bound(1.0 / 256.0, f64::NAN).is_nan());
}

#[test]
fn a_collapsed_parse_names_its_three_most_frequent_reasons() {
    let rejected: std::collections::BTreeMap<String, u64> =
        [("b", 5), ("a", 5), ("c", 9), ("d", 1), ("e", 2)]
            .into_iter()
            .map(|(r, n)| (r.to_owned(), n))
            .collect();
    assert_eq!(top_reasons(&rejected), "9 × c; 5 × a; 5 × b; 2 more reasons");
    let one = [("only".to_owned(), 3)].into_iter().collect();
    assert_eq!(top_reasons(&one), "3 × only");
    assert_eq!(top_reasons(&Default::default()), "");
}

/// A source whose content gives not one entry but rejects something (an
/// error body, a JSON error object or a document cut short, a renamed
/// array or column) is not a list: its last good content is used, and the
/// content is not kept in its place. An empty body (no entry line at all)
/// is an emptied list, taken as it is.
#[test]
fn content_that_gives_no_entry_falls_back_to_the_last_good_content() {
    let good_json = r#"{"blacklist": ["json-listed-1.example", "json-listed-2.example"], "whitelist": []}"#;
    let good_urls = "http://listed.example/a\nhttp://listed.example/b\n";
    let meta = || CacheMeta {
        validators: Default::default(),
        fetched_at: 0,
        accepted: 2,
    };
    for (format, good, bad) in [
        (
            SourceFormat::Json,
            good_json,
            r#"{"error": "rate limit exceeded, try again later"}"#,
        ),
        (SourceFormat::Json, good_json, &good_json[..good_json.len() / 2]),
        (
            SourceFormat::Json,
            good_json,
            r#"{"blocklist": ["json-listed-1.example"]}"#,
        ),
        (
            SourceFormat::Urls,
            good_urls,
            "Error: daily download quota exceeded\n",
        ),
        (
            SourceFormat::Urls,
            good_urls,
            "Service unavailable\nTry again later\n",
        ),
    ] {
        let source = LoadedSource {
            last_good: LastGood::in_memory(good.as_bytes().to_vec(), meta()),
            ..loaded(bad, format, SourceRole::Block)
        };
        let mut updates = Vec::new();
        let read = read_sources(
            "test",
            vec![source],
            1,
            PeakRssProbe::NONE,
            &mut updates,
            &Cancel::default(),
        )
        .unwrap();
        assert_eq!(read.sources[0].state, "last_good", "{format:?} {bad:?}");
        let error = read.sources[0].error.as_deref().unwrap_or_default();
        assert!(error.starts_with("parse collapsed: "), "{bad:?}: {error}");
        assert_eq!(read.hashes.len(), 2, "{bad:?}: the last good content's entries");
        assert!(
            !updates
                .iter()
                .any(|(_, u)| matches!(u, SourceUpdate::Store { .. })),
            "{bad:?}: kept as the last good content"
        );
    }
    // An emptied list: no entry line, nothing rejected.
    let source = LoadedSource {
        last_good: LastGood::in_memory(good_urls.as_bytes().to_vec(), meta()),
        ..loaded(
            "# no threats listed today\n",
            SourceFormat::Urls,
            SourceRole::Block,
        )
    };
    let read = read_sources(
        "test",
        vec![source],
        1,
        PeakRssProbe::NONE,
        &mut Vec::new(),
        &Cancel::default(),
    )
    .unwrap();
    assert_eq!((read.sources[0].state.as_str(), read.hashes.len()), ("fresh", 0));
}

/// A `urls` feed whose lines became `date,url` rows (a layout change, or a
/// CSV export configured as `urls`) was taken as fresh content: each line
/// read as a URL on the host `2024-05-01,http`, no line rejected, so the
/// parse did not collapse, the entry count did not shrink, and every URL
/// the feed lists was dropped from the published list.
#[test]
fn regression_a_feed_turned_into_rows_falls_back_to_its_last_good_content() {
    let good: String = (0..20).map(|i| format!("http://e{i}.example/login\n")).collect();
    let rows: String = (0..20)
        .map(|i| format!("2024-05-01,http://e{i}.example/login\n"))
        .collect();
    let meta = CacheMeta {
        validators: Default::default(),
        fetched_at: 0,
        accepted: 20,
    };
    let source = LoadedSource {
        last_good: LastGood::in_memory(good.into_bytes(), meta),
        ..loaded(&rows, SourceFormat::Urls, SourceRole::Block)
    };
    let read = read_sources(
        "test",
        vec![source],
        1,
        PeakRssProbe::NONE,
        &mut Vec::new(),
        &Cancel::default(),
    )
    .unwrap();
    let listed = FullHash::of(b"e1.example/login");
    assert_eq!(read.sources[0].state, "last_good", "{:?}", read.sources[0]);
    assert!(read.hashes.contains(&listed), "e1.example/login is not published");
}

/// Fresh content whose copy cannot be made (a full disk) is read and used,
/// stores nothing, and says how many entries it gave, for the per-source
/// gates (`SourceUpdate::Unkept`).
#[test]
fn a_fresh_source_whose_copy_fails_is_used_and_reported_unkept() {
    let source = LoadedSource {
        keep_to: KeepTo::deferred(|| {
            Err(Error::Storage {
                path: "sources/test".into(),
                reason: std::io::Error::other("no space left on device"),
            })
        }),
        ..loaded(
            "http://a.example/x\nhttp://b.example/y\n",
            SourceFormat::Urls,
            SourceRole::Block,
        )
    };
    let mut updates = Vec::new();
    let read = read_sources(
        "test",
        vec![source],
        1,
        PeakRssProbe::NONE,
        &mut updates,
        &Cancel::default(),
    )
    .unwrap();
    assert_eq!((read.sources[0].state.as_str(), read.hashes.len()), ("fresh", 2));
    assert!(
        matches!(
            updates.as_slice(),
            [(0, SourceUpdate::Unkept(CacheMeta { accepted: 2, .. }))]
        ),
        "{updates:?}"
    );
}

/// A spill past the page cache (as a large list's is, its keys then taken
/// from memory before the full hashes go) builds the same snapshot as the
/// full hashes kept in memory, and as a spill through the page cache.
#[test]
fn a_spill_past_the_page_cache_builds_the_same_snapshot() {
    #[derive(Debug)]
    struct ToDir(std::path::PathBuf, bool);
    impl Spill for ToDir {
        fn spill(&self, hashes: &[FullHash]) -> Option<SpilledHashes> {
            let staged = crate::storage::Staged::file(self.0.join(format!("{}.tmp", self.1))).unwrap();
            Some(SpilledHashes::write_as(staged, hashes, "t".into(), self.1).unwrap())
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let key = SigningKey::from_secret_bytes([3; 32]);
    let feed: String = (0..20_000)
        .map(|i| format!("http://phish{i}.example/p/{}\n", i % 977))
        .collect();
    let now = 1_800_000_000;
    let in_memory = testing::build_feed_spilled(&feed, now, &key, None);
    // Whether the test's directory takes direct I/O (a staged file is
    // direct by default where it does).
    let takes_direct = crate::storage::Staged::file(dir.path().join("probe.tmp"))
        .unwrap()
        .is_direct();
    for direct in [false, true] {
        let spill = ToDir(dir.path().to_owned(), direct);
        let built = testing::build_feed_spilled(&feed, now, &key, Some(&spill));
        let spilled = built.spilled.as_ref().expect("spilled");
        // Past the page cache where the file system takes it.
        assert_eq!(spilled.is_direct(), direct && takes_direct);
        assert_eq!(built.hashes, in_memory.hashes, "direct: {direct}");
        assert_eq!(built.snapshot, in_memory.snapshot, "direct: {direct}");
    }
}

/// A read cancelled while a source's content is read stops there: the
/// source is not failed (no fallback to its last good content, which would
/// drop its validators when cut short), the sources after it are not read,
/// and nothing is asked to be stored.
#[test]
fn a_read_cancelled_midway_fails_as_cancelled_and_asks_to_store_nothing() {
    /// Content of many blocks that cancels the build as its first block
    /// is read.
    struct CancelsWhenRead(Cancel, std::io::Cursor<Vec<u8>>);
    impl Read for CancelsWhenRead {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.0.cancel();
            self.1.read(buf)
        }
    }
    let cancel = Cancel::default();
    let lines: String = (0..200_000).map(|i| format!("h{i}.example\n")).collect();
    let meta = crate::storage::CacheMeta {
        validators: crate::fetch::Validators {
            etag: Some("\"v1\"".to_owned()),
            ..Default::default()
        },
        fetched_at: 1,
        accepted: 1,
    };
    let cancelling = LoadedSource {
        fetched: Fetched::Stream(crate::fetch::Stream {
            reader: Box::new(CancelsWhenRead(
                cancel.clone(),
                std::io::Cursor::new(lines.into_bytes()),
            )),
            encoding: ContentEncoding::Identity,
            size: 0,
            validators: Default::default(),
        }),
        last_good: LastGood::in_memory(b"b.example\n".to_vec(), meta),
        ..loaded("", SourceFormat::Domains, SourceRole::Block)
    };
    let mut updates = Vec::new();
    let sources = vec![
        loaded("a.example\n", SourceFormat::Domains, SourceRole::Block),
        cancelling,
        loaded("c.example\n", SourceFormat::Domains, SourceRole::Block),
    ];
    let failure = read_sources("test", sources, 1, PeakRssProbe::NONE, &mut updates, &cancel).unwrap_err();
    assert!(
        matches!(failure.error, Error::Cancelled { .. }),
        "{:?}",
        failure.error
    );
    assert_eq!(failure.read.sources.len(), 1, "{:?}", failure.read.sources);
    assert!(
        failure.read.parse.lines < 200_000,
        "read to its end: {:?}",
        failure.read.parse
    );
    // The first source's copy only: the caller stores nothing once cancelled.
    assert!(updates.iter().all(|(index, _)| *index == 0), "{updates:?}");
}

/// A build cancelled between its stages (here as its full hashes are
/// written out, the first stage of `build_snapshot`) stops at the next
/// check, with no snapshot, and the error says it was cancelled.
#[test]
fn a_build_cancelled_after_its_full_hashes_are_written_stops_at_the_next_stage() {
    /// Cancels the build when it writes its full hashes out, and keeps
    /// them in memory.
    #[derive(Debug)]
    struct CancelsOnSpill(Cancel);
    impl crate::storage::spill::Spill for CancelsOnSpill {
        fn spill(&self, _: &[FullHash]) -> Option<crate::storage::spill::SpilledHashes> {
            self.0.cancel();
            None
        }
    }
    let cancel = Cancel::default();
    let spill = CancelsOnSpill(cancel.clone());
    let list = ListConfig::new("phishing", vec![]);
    let key = SigningKey::from_secret_bytes([3; 32]);
    let request = BuildRequest {
        list: &list,
        previous: None,
        after_version: 0,
        now: 1,
        ttl: Duration::from_secs(3600),
        probe: PeakRssProbe::NONE,
        key: &key,
        spill: Some(&spill),
        cancel: Some(&cancel),
    };
    let sources = vec![loaded(
        "http://evil.example/x\n",
        SourceFormat::Urls,
        SourceRole::Block,
    )];
    let built = build_list(&request, sources);
    assert!(cancel.is_cancelled());
    assert!(matches!(built, Err(Error::Cancelled { .. })), "{built:?}");
}

/// A read cancelled while it falls back to a source's last good content
/// stops there: the rest of the stored copy is not read (read to its end to
/// check it, it was, which from an object store is a download).
#[test]
fn a_read_cancelled_in_a_stored_copy_reads_no_more_of_it() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    /// A stored copy that cancels the build at its first read and counts
    /// the bytes read of it.
    struct Counted(Cancel, Arc<AtomicU64>, std::io::Cursor<Vec<u8>>);
    impl Read for Counted {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.0.cancel();
            let n = self.2.read(buf)?;
            self.1.fetch_add(n as u64, Ordering::Relaxed);
            Ok(n)
        }
    }
    let cancel = Cancel::default();
    let read = Arc::new(AtomicU64::new(0));
    let lines: Vec<u8> = (0..400_000)
        .flat_map(|i| format!("h{i}.example\n").into_bytes())
        .collect();
    let total = lines.len() as u64;
    let copy = Counted(cancel.clone(), read.clone(), std::io::Cursor::new(lines));
    let falls_back = LoadedSource {
        fetched: Fetched::NotModified,
        last_good: LastGood::deferred(move || {
            Some((
                Box::new(copy) as Box<dyn Read + Send>,
                crate::fetch::ContentEncoding::Identity,
                crate::storage::CacheMeta::default(),
            ))
        }),
        ..loaded("", SourceFormat::Domains, SourceRole::Block)
    };
    let failure = read_sources(
        "test",
        vec![falls_back],
        1,
        PeakRssProbe::NONE,
        &mut Vec::new(),
        &cancel,
    )
    .unwrap_err();
    assert!(
        matches!(failure.error, Error::Cancelled { .. }),
        "{:?}",
        failure.error
    );
    let read = read.load(Ordering::Relaxed);
    assert!(read < total / 2, "read {read} of {total} bytes");
}

/// A Bloom list of a few entries (default 12 bits per key, so 64 or 128
/// bits and k = 8) is a healthy filter whatever its keys: the
/// `max_fpr_ratio` gate must not refuse it. Its bits are few, so how many
/// of them its keys set varies from one key set to the next, and its rate
/// with it, far more than the mean (1 − e^(−kn/m))^k allows for: against
/// that mean, about one such list in twelve was refused at every build.
/// A canary hitting half its probes is still refused.
#[test]
fn a_small_bloom_list_is_not_refused_by_the_fpr_gate() {
    let mut list = ListConfig::new("phishing", vec![]);
    list.filter = FilterChoice::Kind(FilterKind::Bloom);
    let key = SigningKey::from_secret_bytes([7; 32]);
    let mut refused = Vec::new();
    for set in 0..100u64 {
        let n = 3 + set % 8;
        let feed: String = (0..n)
            .map(|i| format!("http://evil-{set}-{i}.example/\n"))
            .collect();
        let source = LoadedSource {
            config: SourceConfig::file("feed.txt", SourceFormat::Urls),
            role: SourceRole::Block,
            fetched: Fetched::Fresh {
                bytes: feed.into_bytes(),
                validators: Default::default(),
            },
            last_good: LastGood::none(),
            read_duration: Duration::ZERO,
            keep_to: KeepTo::memory(),
        };
        let request = BuildRequest {
            list: &list,
            previous: None,
            after_version: 0,
            now: 1_800_000_000 + set,
            ttl: Duration::from_secs(3600),
            probe: PeakRssProbe::NONE,
            key: &key,
            spill: None,
            cancel: None,
        };
        let built = build_list(&request, vec![source]).unwrap();
        if let Some(refusal) = check_gates(&list, None, &built.report) {
            refused.push(format!("{n} entries: {refusal}"));
        }
        let mut broken = built.report;
        broken.sizing.measured_fpr = 0.5;
        assert!(check_gates(&list, None, &broken).is_some(), "{n} entries");
    }
    assert!(
        refused.is_empty(),
        "{} of 100 refused: {refused:#?}",
        refused.len()
    );
}
