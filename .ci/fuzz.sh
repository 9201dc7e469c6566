#!/usr/bin/env bash
# Fuzzing for CI (run by .ci/run after the tests): builds the cargo-fuzz
# targets in fuzz/ in one invocation and runs each for a bounded time from
# its committed seed corpus (fuzz/corpus/<target>/, made from real data),
# as many at once as there are cores. A crash, a timeout or an
# out-of-memory fails the script; libFuzzer leaves the reproducer in
# fuzz/artifacts/<target>/, and the log tail is printed. New inputs go to a
# scratch directory, never into the committed corpus.
#
#   bash .ci/fuzz.sh                                  # every target, 60 s each
#   FUZZ_SECONDS=600 bash .ci/fuzz.sh snapshot_decode # one target, 10 minutes
#   FUZZ_JOBS=1 bash .ci/fuzz.sh                      # one target at a time
#
# Reproduce a finding with the same flags (else everything is rebuilt):
#   cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run --release --debug-assertions \
#       --sanitizer none --codegen-units 16 <target> artifacts/<target>/<file>
# then add a regression test named for the case beside the library function
# the target calls: format/src/fuzzing.rs (canonicalize, snapshot_decode,
# full_hash_answer, delta_decode) or
# publisher/src/fuzzing.rs (feed_parse, feed_decode, full_hash_request) or
# bindings/c/src/fuzzing.rs (c_entry_points).
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

seconds="${FUZZ_SECONDS:-60}"
jobs="${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}"
all_targets=(canonicalize snapshot_decode delta_decode full_hash_answer feed_parse feed_decode full_hash_request c_entry_points)
if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    targets=("${all_targets[@]}")
fi

# libFuzzer needs nightly compiler flags (coverage instrumentation); a
# stable toolchain accepts them with RUSTC_BOOTSTRAP=1.
export RUSTC_BOOTSTRAP=1
cargo_fuzz_version=0.13.2
if [ "$(cargo fuzz --version 2>/dev/null)" != "cargo-fuzz $cargo_fuzz_version" ]; then
    started=$(date +%s)
    cargo install cargo-fuzz --locked --version "$cargo_fuzz_version"
    echo "fuzz: installed cargo-fuzz $cargo_fuzz_version in $(($(date +%s) - started)) s"
fi

# The same flags for `build` and `run` (different ones would rebuild):
# - optimized, with debug assertions and overflow checks (cargo fuzz's
#   default, spelled out): an overflow panics, and every panic is a crash;
# - no sanitizer: every crate of ours forbids `unsafe`, so AddressSanitizer
#   could only catch memory errors in dependencies' unsafe code (the C of
#   zstd is not instrumented by it anyway), and what we look for is caught
#   without it: a panic (libfuzzer-sys aborts on one), an overflow, an
#   out-of-bounds index, a stack overflow, a timeout (-timeout) and memory
#   over -rss_limit_mb. Measured on the 2-core machine, ASan cost 1,019 s of
#   CPU to build against 604 s (+69 %), and 3-5x fewer executions per
#   second (canonicalize 6,100/s against 19,300/s, snapshot_decode 1,100/s
#   against 5,800/s). Run `cargo fuzz run <target>` (ASan is its default)
#   for a long campaign;
# - 16 codegen units: both cores busy on the last, largest crates.
# fuzz/Cargo.toml builds the publisher's daemon-only dependencies (HTTP,
# TLS, CLI), which no target runs, without optimization.
flags=(--release --debug-assertions --sanitizer none --codegen-units 16)

started=$(date +%s)
if [ "${#targets[@]}" -eq "${#all_targets[@]}" ]; then
    cargo fuzz build "${flags[@]}"
else
    for target in "${targets[@]}"; do
        cargo fuzz build "${flags[@]}" "$target"
    done
fi
echo "fuzz: built ${#targets[@]} targets in $(($(date +%s) - started)) s"

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

# One target: new inputs to the scratch directory (libFuzzer writes to the
# first corpus directory only), seeds read from the committed corpus.
# -timeout: one input taking this long is a finding (a hang or a
# pathological slowdown), as is going over -rss_limit_mb.
fuzz_one() {
    local target="$1"
    mkdir -p "$scratch/$target" "artifacts/$target"
    if cargo fuzz run "${flags[@]}" "$target" "$scratch/$target" "corpus/$target" -- \
        -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 \
        -print_final_stats=1 >"$scratch/$target.log" 2>&1; then
        echo 0 >"$scratch/$target.rc"
    else
        echo 1 >"$scratch/$target.rc"
    fi
}

started=$(date +%s)
for target in "${targets[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
        wait -n || true
    done
    fuzz_one "$target" &
done
wait
echo "fuzz: ran ${#targets[@]} targets ${seconds} s each, $jobs at a time, in $(($(date +%s) - started)) s"

passed=0
failed=0
for target in "${targets[@]}"; do
    log="$scratch/$target.log"
    if [ "$(cat "$scratch/$target.rc" 2>/dev/null)" = 0 ]; then
        runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
        echo "fuzz: $target: ${seconds} s, ${runs} executions, no crash"
        passed=$((passed + 1))
    else
        echo "fuzz: $target FAILED; reproducer in fuzz/artifacts/$target/:"
        ls -l "artifacts/$target" || true
        tail -n 60 "$log" || true
        failed=$((failed + 1))
    fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
