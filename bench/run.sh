#!/usr/bin/env bash
# blocksieve's benchmark suite (issue 7): runs the measurements and writes
# BENCHMARKS.md at the repository root.
#
#   bench/run.sh                          # every section
#   bench/run.sh url probe swap footprint # only these (any of: url probe build http swap footprint)
#   bench/run.sh table                    # no measurement: BENCHMARKS.md from the rows there are
#
# Sections: url (row 1: agent URL check vs SHA-256), probe (row 2: our filter
# probe vs raw xorf), build (row 3, bench/build.sh), http (row 4,
# bench/http.sh), swap (row 5: lookup p99 under snapshot swaps), footprint
# (row 6: agent RSS, start-up to the first lookup). Each section writes its
# table rows to target/bench/rows/<N>-<name>.md and its notes to
# target/bench/notes/<N>-<name>.md; a section not run keeps the files of its
# last run, and BENCHMARKS.md says when each section was measured. Human
# findings (profiles, causes) live in bench/findings/<N>-<name>.md and are
# appended to that section's notes. Rows measured by hand (rows 7-9: see
# their notes for the commands) live in bench/manual/<N>-<name>.{rows.md,
# notes.md,stamp} and are written into the table in their place.
#
# Needs the shared data at ../shared/data beside the repository, or
# BLOCKSIEVE_DATA=DIR; a section without its data is skipped with a message.
# Takes about 7 minutes for url, probe, swap and footprint on 2 cores after
# the release build; build and http add about 3 minutes each.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
OUT=$TARGET/bench
DATA=${BLOCKSIEVE_DATA:-$ROOT/../shared/data}
DATA=$(cd "$DATA" 2>/dev/null && pwd || echo "$DATA")
export BLOCKSIEVE_DATA=$DATA
FEED=$DATA/feeds/phishing-urls-union-2018-2020.txt.gz
ALL="url probe build http swap footprint"
SECTIONS=${*:-$ALL}
for s in $SECTIONS; do
    case " $ALL table " in *" $s "*) ;; *) echo "bench/run.sh: unknown section $s (expected: $ALL, or table)" >&2; exit 2 ;; esac
done
want() { case " $SECTIONS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
mkdir -p "$OUT/rows" "$OUT/notes" "$OUT/stamps"

need() { # need COMMAND DEBIAN_PACKAGE
    command -v "$1" >/dev/null 2>&1 && return 0
    echo "installing $2" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2") >/dev/null
}
need python3 python3

have_data() { # have_data SECTION: the feed is there, or the section is skipped
    [ -f "$FEED" ] && return 0
    echo "bench/run.sh: $FEED not found (set BLOCKSIEVE_DATA); skipping $1" >&2
    return 1
}
# commit_id: the commit measured, and whether the tree differed from it
# (BENCHMARKS.md aside: it is this script's output, rewritten as it runs).
commit_id() {
    echo "$(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- . ':(exclude)BENCHMARKS.md' 2>/dev/null || echo ' + uncommitted changes')"
}
stamp() { # stamp SECTION: when, at which commit and on which processor it was measured
    local cpu
    cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null || true)
    echo "$(date -u '+%Y-%m-%d %H:%M UTC'), commit $(commit_id), ${cpu:-unknown processor}" >"$OUT/stamps/$1"
}

if [ "$SECTIONS" != table ]; then
    # How busy the machine was when the run started (other processes on the
    # same cores), for the table's Machine section.
    cut -d' ' -f1 /proc/loadavg >"$OUT/load-at-start"
    echo "== building (release)" >&2
    cargo build --release -q -p blocksieve-bench -p blocksieve-publisher
fi
BENCH=$TARGET/release/blocksieve-bench

# The criterion benches also time each comparison interleaved and write it
# to $OUT/interleaved/, which the table uses (see bench/src/criterion_rows.rs).
export BLOCKSIEVE_BENCH_OUT=$OUT

if want url && have_data url; then
    echo "== row 1: URL check (criterion)" >&2
    rm -f "$OUT"/interleaved/url-check-*.json
    cargo bench -q -p blocksieve-agent --bench lookup
    cargo bench -q -p blocksieve-format --bench canonicalize
    "$BENCH" rows url --criterion "$TARGET/criterion" --out "$OUT"
    stamp 1-url
fi

if want probe; then
    echo "== row 2: filter probe (criterion)" >&2
    rm -f "$OUT"/interleaved/probe-*.json
    cargo bench -q -p blocksieve-format --bench probe
    "$BENCH" rows probe --criterion "$TARGET/criterion" --out "$OUT"
    stamp 2-probe
fi

for part in build http; do
    if want $part && [ -f "bench/$part.sh" ]; then
        echo "== bench/$part.sh" >&2
        bash "bench/$part.sh"
        [ $part = build ] && stamp 3-build || stamp 4-http
    fi
done

# Rows 5 and 6 run on the 854k list as the publisher builds it.
if { want swap || want footprint; } && have_data "swap and footprint"; then
    echo "== publishing the 854k list" >&2
    PUBDIR=$OUT/publisher
    rm -rf "$PUBDIR"
    mkdir -p "$PUBDIR"
    cat >"$PUBDIR/phishing.toml" <<EOF
data_dir = "$PUBDIR/data"
# Valid for 30 days: the snapshot must not expire while it is measured.
snapshot_ttl_s = 2592000
[[lists]]
name = "phishing"
sources = [ { path = "$FEED", format = "urls" } ]
EOF
    RUST_LOG=warn "$TARGET/release/blocksieve-publisher" build --config "$PUBDIR/phishing.toml" >"$PUBDIR/build.txt"
    SNAPSHOT=$(ls "$PUBDIR"/data/lists/phishing/builds/*.snapshot | tail -n 1)
    KEY=$PUBDIR/data/signing.key
    if want swap; then
        echo "== row 5: swap under load" >&2
        "$BENCH" swap --snapshot "$SNAPSHOT" --signing-key "$KEY" --out "$OUT"
        stamp 5-swap
    fi
    if want footprint; then
        echo "== row 6: agent footprint" >&2
        "$BENCH" footprint --snapshot "$SNAPSHOT" --signing-key "$KEY" --out "$OUT"
        stamp 6-footprint
    fi
fi

echo "== writing BENCHMARKS.md" >&2
cpu=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
if grep -qw sha_ni /proc/cpuinfo; then shani=yes; else shani=no; fi

# Profiles name files by where they were built; the table speaks only of the
# project: paths become repository-relative, dependencies `crate-x.y.z/...`,
# the standard library `std/...`.
sanitize() {
    sed -E \
        -e "s#$(pwd)/##g" \
        -e 's#(/[^ /\[]+)*/\.cargo/registry/src/[^/ ]+/##g' \
        -e 's#/rustc/[0-9a-f]+/library/#std/#g' \
        -e 's#(/[^ /\[]+)+/target/#target/#g' \
        -e 's#\[/[^] ]*$#[…]#'
}

{
    cat <<EOF
# Benchmarks

What blocksieve's hot paths cost, each as a **ratio measured in one run**
against a reference doing the unavoidable part of the same work: these
machines are shared and noisy, so absolute times drift from run to run while
the ratios hold. Regenerate this file with \`bench/run.sh\` (see "Commands").

## Machine

| | |
|---|---|
| cores | $(nproc) |
| CPU (this run; each section's below) | $cpu |
| SHA-NI | $shani |
| kernel | $(uname -r) |
| rustc | $(rustc --version) |
| written | $(date -u '+%Y-%m-%d %H:%M UTC') |
| commit | $(commit_id) |

Load average (1 min) when the last run of \`bench/run.sh\` started: $(cat "$OUT/load-at-start" 2>/dev/null || echo unknown)
(other processes on the same cores; the ratios are measured within one run,
so load shifts both sides alike, but it costs parallel builds their second
core).

Sections and when they were measured:

EOF
    for f in "$OUT"/rows/*.md; do
        name=$(basename "$f" .md)
        when=$(cat "$OUT/stamps/$name" 2>/dev/null || date -u -r "$f" '+%Y-%m-%d %H:%M UTC (rows file written)')
        echo "- \`$name\`: $when"
    done
    for f in bench/manual/*.stamp; do
        echo "- \`$(basename "$f" .stamp)\`: $(cat "$f")"
    done
    cat <<'EOF'

## Commands

From the repository root, with the shared data at `../shared/data` (or
`BLOCKSIEVE_DATA=DIR`):

```sh
bench/run.sh                          # everything, then BENCHMARKS.md
bench/run.sh url probe swap footprint # some sections only
bench/run.sh table                    # only rewrite this file from target/bench
```

Each section by hand (`BLOCKSIEVE_BENCH_OUT` makes the criterion benches
write their interleaved ratios where `rows` reads them):

```sh
export BLOCKSIEVE_BENCH_OUT=$PWD/target/bench
cargo bench -p blocksieve-agent --bench lookup          # row 1
cargo bench -p blocksieve-format --bench canonicalize   # row 1.4
cargo bench -p blocksieve-format --bench probe          # row 2
bash bench/build.sh                                     # row 3
bash bench/http.sh                                      # row 4
# rows 5 and 6 need the 854k list as the publisher builds it (bench/run.sh
# writes the config to target/bench/publisher/phishing.toml):
cargo build --release -p blocksieve-bench -p blocksieve-publisher
target/release/blocksieve-publisher build --config target/bench/publisher/phishing.toml
S=$(ls target/bench/publisher/data/lists/phishing/builds/*.snapshot | tail -n 1)
K=target/bench/publisher/data/signing.key
target/release/blocksieve-bench swap --snapshot $S --signing-key $K --out target/bench       # row 5
target/release/blocksieve-bench footprint --snapshot $S --signing-key $K --out target/bench  # row 6
# rows 1 and 2 as table rows, from the benches' interleaved ratios
# (and criterion's medians, for the notes):
target/release/blocksieve-bench rows url --criterion target/criterion --out target/bench
target/release/blocksieve-bench rows probe --criterion target/criterion --out target/bench
```

## Results

| # | measurement | measured | reference | ratio | target | met |
|---|---|---:|---:|---:|---|---|
EOF
    cat "$OUT"/rows/*.md bench/manual/*.rows.md
    for f in "$OUT"/notes/*.md; do
        echo
        cat "$f"
        finding=bench/findings/$(basename "$f")
        if [ -f "$finding" ]; then
            echo
            cat "$finding"
        fi
    done
    for f in bench/manual/*.notes.md; do
        echo
        cat "$f"
    done
} | sanitize >BENCHMARKS.md
echo "wrote BENCHMARKS.md" >&2
