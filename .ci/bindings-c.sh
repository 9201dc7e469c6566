#!/usr/bin/env bash
# The C ABI (bindings/c), run by .ci/run after the workspace tests (whose
# debug build it reuses):
#
# 1. installs what it needs if missing (pinned): cbindgen, a C and C++
#    compiler, valgrind, python3, libcurl (the HTTP stack of the session
#    test's host);
# 2. regenerates bindings/c/include/blocksieve.h and fails if it differs
#    from the committed one;
# 3. builds libblocksieve (debug), the publisher and the xlang example
#    (the workspace test build);
#    compiles bindings/c/tests/agent_test.c (the agent handle) and
#    bindings/c/tests/session_test.c (the sans-I/O session, driven over
#    libcurl) as C11 against the shared library and as C++17 against the
#    static one, warnings as errors;
# 4. starts a real publisher on 127.0.0.1:0 serving the xlang inputs'
#    feed (`xlang setup`), and runs both test programs' checks, both
#    builds, under valgrind (any error or definite leak fails), each with
#    its own directory (the agent's cache; the session's saved lists), and
#    the agent test's fork() checks without valgrind;
# 5. compares the C answers for every xlang input, from the agent handle
#    and from the session-driven host, with the Rust agent's (`xlang
#    reference`) as JSON values, line by line;
# 6. compiles and runs the C examples of README.md ("### C": the agent
#    handle, then a libcurl host driving the session).
#
#   bash .ci/bindings-c.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_INCREMENTAL=0
started_all=$(date +%s)
step() { echo "bindings-c: $1 ($(($(date +%s) - started_all)) s)"; }

cbindgen_version=0.29.4
if [ "$(cbindgen --version 2>/dev/null)" != "cbindgen $cbindgen_version" ]; then
    started=$(date +%s)
    cargo install cbindgen --locked --version "$cbindgen_version"
    echo "bindings-c: installed cbindgen $cbindgen_version in $(($(date +%s) - started)) s"
fi
# Debian 12 (bookworm) versions; the test needs only what any recent
# release has.
missing=()
command -v gcc >/dev/null || missing+=("gcc=4:12.2.0-3")
command -v g++ >/dev/null || missing+=("g++=4:12.2.0-3")
command -v valgrind >/dev/null || missing+=("valgrind=1:3.19.0-1")
command -v python3 >/dev/null || missing+=("python3=3.11.2-1+b1")
if ! command -v curl-config >/dev/null && ! pkg-config --exists libcurl 2>/dev/null; then
    missing+=("libcurl4-openssl-dev=7.88.1-10+deb12u15")
fi
if [ "${#missing[@]}" -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The committed header must be what cbindgen generates from the sources.
scratch="$(mktemp -d)"
publisher_pid=
cleanup() {
    if [ -n "$publisher_pid" ]; then
        kill "$publisher_pid" 2>/dev/null || true
        wait "$publisher_pid" 2>/dev/null || true
    fi
    rm -rf "$scratch"
}
trap cleanup EXIT
(cd bindings/c && cbindgen --quiet --config cbindgen.toml --crate blocksieve-c --output "$scratch/blocksieve.h")
if ! cmp -s "$scratch/blocksieve.h" bindings/c/include/blocksieve.h; then
    diff -u bindings/c/include/blocksieve.h "$scratch/blocksieve.h" || true
    echo "bindings-c: bindings/c/include/blocksieve.h is stale; regenerate it:"
    echo "  (cd bindings/c && cbindgen --config cbindgen.toml --crate blocksieve-c --output include/blocksieve.h)"
    exit 1
fi
step "header up to date"

# Exactly the build of `cargo test --workspace` (which .ci/run has just
# run, so this is quick): a `cargo build -p` of fewer packages resolves
# other features and would rebuild much of the workspace. It leaves the
# library in target/debug/deps (libblocksieve.so, libblocksieve.a), the
# publisher binary and the xlang example.
cargo test --workspace --no-run --quiet 2>/dev/null || cargo test --workspace --no-run
step "built"
lib=target/debug/deps
cflags=(-Ibindings/c/include -Wall -Wextra -Werror -pedantic -g)
gcc -std=c11 "${cflags[@]}" bindings/c/tests/agent_test.c -o "$scratch/agent_test_c" \
    -L"$lib" -Wl,-rpath,"$PWD/$lib" -lblocksieve -lpthread
g++ -std=c++17 -x c++ "${cflags[@]}" bindings/c/tests/agent_test.c -o "$scratch/agent_test_cpp" \
    -x none "$lib/libblocksieve.a" -lpthread -ldl -lm
gcc -std=c11 "${cflags[@]}" bindings/c/tests/session_test.c -o "$scratch/session_test_c" \
    -L"$lib" -Wl,-rpath,"$PWD/$lib" -lblocksieve -lcurl -lpthread
g++ -std=c++17 -x c++ "${cflags[@]}" bindings/c/tests/session_test.c -o "$scratch/session_test_cpp" \
    -x none "$lib/libblocksieve.a" -lcurl -lpthread -ldl -lm
step "compiled the test programs as C and as C++"

# A real publisher serving the xlang feed, on a free port.
xlang="$scratch/xlang"
target/debug/examples/xlang setup "$xlang"
target/debug/blocksieve-publisher serve --config "$xlang/config.toml" --listen 127.0.0.1:0 \
    >"$scratch/publisher.log" 2>&1 &
publisher_pid=$!
line=
for _ in $(seq 1 300); do
    line=$(grep -m1 'publisher listening' "$scratch/publisher.log" || true)
    [ -n "$line" ] && break
    kill -0 "$publisher_pid" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$line" ]; then
    cat "$scratch/publisher.log"
    echo "bindings-c: the publisher did not start"
    exit 1
fi
addr=$(sed -n 's/.*addr=\([^ ]*\).*/\1/p' <<<"$line")
key=$(sed -n 's/.*public_key=\([^ ]*\).*/\1/p' <<<"$line")
base="http://$addr"
# Ready once every list has its first snapshot.
python3 - "$base" <<'PY'
import sys, time, urllib.request
for _ in range(600):
    try:
        urllib.request.urlopen(sys.argv[1] + "/readyz", timeout=2)
        sys.exit(0)
    except Exception:
        time.sleep(0.1)
sys.exit("bindings-c: the publisher did not become ready")
PY
step "publisher ready at $base"

# The first listed URL with a plain host (the feed keeps its quirks, such as
# `http:///host/`).
listed=$(grep -m1 -E '^https?://[a-z0-9]' "$xlang/feed.txt")
benign=$(head -n1 tests/fixtures/benign-urls.txt)
golden=format/tests/data/golden/binary_fuse8.snapshot
valgrind=(valgrind --quiet --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=1)
for program in agent_test_c agent_test_cpp; do
    started=$(date +%s)
    mkdir -p "$scratch/cache-$program"
    "${valgrind[@]}" "$scratch/$program" test "$base" "$key" xlang "$listed" "$benign" "$golden" \
        "$scratch/cache-$program"
    echo "bindings-c: $program passed under valgrind in $(($(date +%s) - started)) s"
    # Without valgrind: the forked child holds what its parent's threads
    # owned, which valgrind counts as lost.
    "$scratch/$program" fork "$base" "$key" xlang "$listed"
done
for program in session_test_c session_test_cpp; do
    started=$(date +%s)
    mkdir -p "$scratch/saved-$program"
    "${valgrind[@]}" "$scratch/$program" test "$base" "$key" xlang "$listed" "$benign" \
        "$scratch/saved-$program"
    echo "bindings-c: $program passed under valgrind in $(($(date +%s) - started)) s"
done

# Cross-language identity: the C answers must be the Rust agent's.
started=$(date +%s)
target/debug/examples/xlang reference "$base" "$key" "$xlang" >"$scratch/reference.jsonl"
"$scratch/agent_test_c" xlang "$base" "$key" "$xlang" >"$scratch/c.jsonl"
"$scratch/session_test_c" xlang "$base" "$key" "$xlang" >"$scratch/session.jsonl"
python3 - "$scratch/reference.jsonl" "$scratch/c.jsonl" "$scratch/session.jsonl" <<'PY'
import json, sys
from collections import Counter
with open(sys.argv[1]) as f:
    reference = f.read().splitlines()
failed = False
for label, path in (("C agent", sys.argv[2]), ("C session host", sys.argv[3])):
    with open(path) as f:
        c = f.read().splitlines()
    if len(reference) != len(c):
        print(f"bindings-c: xlang: {label}: {len(c)} lines, {len(reference)} reference lines")
        failed = True
        continue
    differ = 0
    for number, (r, o) in enumerate(zip(reference, c), 1):
        if json.loads(r) != json.loads(o):
            differ += 1
            if differ <= 5:
                print(f"line {number}:\n  rust: {r}\n  c:    {o}")
    verdicts = Counter(json.loads(r)["verdict"] for r in reference)
    print(f"bindings-c: xlang: {label}: {len(c)} lines, {len(c) - differ} identical, {differ} different;",
          ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items())))
    failed = failed or differ > 0
sys.exit(1 if failed else 0)
PY
echo "bindings-c: cross-language comparison in $(($(date +%s) - started)) s"

# The C examples of README.md, section "### C", against the same publisher:
# the agent handle, then the libcurl host driving a session.
python3 - README.md "$scratch/readme_example.c" "$scratch/readme_session.c" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
section = text.split("\n### C\n", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
blocks = re.findall(r"```c\n(.*?)```", section, re.S)
if len(blocks) != 2:
    sys.exit(f"bindings-c: {len(blocks)} ```c blocks under ### C in README.md, 2 expected")
for block, path in zip(blocks, sys.argv[2:]):
    open(path, "w").write(block)
PY
gcc -std=c11 "${cflags[@]}" "$scratch/readme_example.c" -o "$scratch/readme_example" \
    -L"$lib" -Wl,-rpath,"$PWD/$lib" -lblocksieve
gcc -std=c11 "${cflags[@]}" "$scratch/readme_session.c" -o "$scratch/readme_session" \
    -L"$lib" -Wl,-rpath,"$PWD/$lib" -lblocksieve -lcurl
for example in readme_example readme_session; do
    out=$("$scratch/$example" "$base" "$key" xlang "$listed")
    echo "bindings-c: README $example: $out"
    [[ "$out" == "unsafe: "*" is on xlang" ]]
    out=$("$scratch/$example" "$base" "$key" xlang "$benign")
    echo "bindings-c: README $example on a benign URL: $out"
    [[ "$out" == "not blocked" ]]
    if "$scratch/$example" "$base" "$key" xlang "mailto:someone@example.com" 2>"$scratch/invalid.txt"; then
        echo "bindings-c: README $example accepted an invalid URL"
        exit 1
    fi
    echo "bindings-c: README $example on an invalid URL: $(cat "$scratch/invalid.txt")"
done
step "passed"
