//! The interleaved comparison shared by the benchmarks (`format`'s
//! `canonicalize` and `probe`, `agent`'s `lookup`, which includes this file
//! by path): on a shared, noisy machine two criterion medians measured one
//! after the other can disagree by 2× between runs, while the ratio of two
//! passes timed side by side holds.

use std::hint::black_box;

/// Rounds of [`interleaved`]: odd, so the median is one round's ratio.
pub(crate) const ROUNDS: usize = 41;

/// Times one pass of `ours` and one of `reference` per round, alternating
/// which goes first, and reports the median per-round ratio with the median
/// time of each (nanoseconds per element, `elements` per pass), to stderr
/// and, with `BLOCKSIEVE_BENCH_OUT`, to
/// `<out>/interleaved/<group>.<name>.json` (read by `blocksieve-bench rows`).
pub(crate) fn interleaved<T>(
    group: &str,
    name: &str,
    elements: usize,
    mut ours: impl FnMut() -> T,
    mut reference: impl FnMut() -> T,
) {
    // Each timed pass follows an untimed one of the same side: both sides
    // are measured warm, as criterion measures them. (Timing each side
    // right after the other's pass, cold, the second pass of every round
    // lost its caches to the first: a 2× swing with the order.)
    let time = |f: &mut dyn FnMut() -> T| {
        black_box(f());
        let started = std::time::Instant::now();
        black_box(f());
        started.elapsed().as_secs_f64() * 1e9 / elements as f64
    };
    let (mut a, mut b, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    // a[i], b[i]: the two passes of round i, in nanoseconds per element.
    for round in 0..ROUNDS {
        let (x, y) = if round % 2 == 0 {
            let x = time(&mut ours);
            (x, time(&mut reference))
        } else {
            let y = time(&mut reference);
            (time(&mut ours), y)
        };
        a.push(x);
        b.push(y);
        ratios.push(x / y);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (ours_ns, reference_ns, ratio) = (
        median(&mut a.clone()),
        median(&mut b.clone()),
        median(&mut ratios),
    );
    eprintln!(
        "{group}/{name} interleaved: ours {ours_ns:.2} ns, reference {reference_ns:.2} ns per element, ratio {ratio:.3}"
    );
    if let Some(out) = std::env::var_os("BLOCKSIEVE_BENCH_OUT") {
        let dir = std::path::Path::new(&out).join("interleaved");
        std::fs::create_dir_all(&dir).expect("create BLOCKSIEVE_BENCH_OUT/interleaved");
        let json = serde_json::json!({
            "group": group, "name": name, "rounds": ROUNDS, "elements": elements,
            "ours_ns": ours_ns, "reference_ns": reference_ns, "ratio": ratio,
            "ours_rounds": a, "reference_rounds": b,
        });
        std::fs::write(dir.join(format!("{group}.{name}.json")), json.to_string())
            .expect("write the interleaved result");
    }
}
