#!/usr/bin/env bash
# Fuzzing for CI: builds the cargo-fuzz targets in fuzz/ and runs each for a
# bounded time from its committed seed corpus (fuzz/corpus/<target>/, made
# from real data). A crash, a timeout or an out-of-memory fails the script;
# libFuzzer leaves the reproducer in fuzz/artifacts/<target>/, and the log
# tail is printed. New inputs go to a scratch directory, never into the
# committed corpus.
#
#   bash .ci/fuzz.sh                                  # every target, 60 s each
#   FUZZ_SECONDS=600 bash .ci/fuzz.sh snapshot_decode # one target, 10 minutes
#
# Reproduce a finding with
#   cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run <target> artifacts/<target>/<file>
# then add a regression test named for the case beside the library function
# the target calls (format/src/fuzzing.rs or publisher/src/fuzzing.rs).
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

seconds="${FUZZ_SECONDS:-60}"
if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    targets=(canonicalize snapshot_decode feed_parse full_hash_request)
fi

# libFuzzer needs nightly compiler flags (sanitizers, coverage); a stable
# toolchain accepts them with RUSTC_BOOTSTRAP=1.
export RUSTC_BOOTSTRAP=1
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

started=$(date +%s)
for target in "${targets[@]}"; do
    cargo fuzz build "$target"
done
echo "fuzz: built ${#targets[@]} targets in $(($(date +%s) - started)) s"

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
passed=0
failed=0
for target in "${targets[@]}"; do
    mkdir -p "$scratch/$target" "artifacts/$target"
    log="$scratch/$target.log"
    # -timeout: one input taking this long is a finding (a hang or a
    # pathological slowdown), as is going over -rss_limit_mb.
    if cargo fuzz run "$target" "$scratch/$target" "corpus/$target" -- \
        -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 \
        -print_final_stats=1 >"$log" 2>&1; then
        runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
        echo "fuzz: $target: ${seconds} s, ${runs} executions, no crash"
        passed=$((passed + 1))
    else
        echo "fuzz: $target FAILED; reproducer in fuzz/artifacts/$target/:"
        ls -l "artifacts/$target" || true
        tail -n 60 "$log"
        failed=$((failed + 1))
    fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
