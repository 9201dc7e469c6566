#!/usr/bin/env bash
# Row 4 of BENCHMARKS.md: the publisher's full-hash and snapshot endpoints
# against nginx serving the same bytes as static files, in the same run.
#
# Run from the repository root:   bash bench/http.sh
# Environment: BLOCKSIEVE_DATA (default ../shared/data), BENCH_SECONDS (per
# measurement, default 5), BENCH_ROUNDS (default 3: publisher and nginx
# alternate this many times per endpoint, so drift on a shared machine hits
# both alike), BENCH_CONNECTIONS (default 32), BENCH_PROFILE=0
# to skip the callgrind profile of the publisher serving full-hash requests.
# Writes target/bench/rows/4-http.md (table rows) and
# target/bench/notes/4-http.md (every measurement, commands, profile).
# Takes about 3 minutes after the release build.
#
# Loopback only: the publisher and nginx listen on 127.0.0.1 ports picked at
# start; wrk (Debian package) sends a fixed number of connections for a fixed
# time and stops by itself. Both servers get the machine's 2 cores: the
# publisher serves on one current-thread tokio runtime per core, nginx gets
# `worker_processes 2`. Installs wrk and nginx with apt-get when missing.
set -euo pipefail
trap 'echo "$0: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
cd "$(dirname "$0")/.."
ROOT=$PWD
DATA=${BLOCKSIEVE_DATA:-../shared/data}
DATA=$(cd "$DATA" 2>/dev/null && pwd || echo "$DATA")
FEED=$DATA/feeds/phishing-urls-union-2018-2020.txt.gz
SECONDS_EACH=${BENCH_SECONDS:-5}
ROUNDS=${BENCH_ROUNDS:-3}
CONNECTIONS=${BENCH_CONNECTIONS:-32}
ROWS=target/bench/rows/4-http.md
NOTES=target/bench/notes/4-http.md
mkdir -p target/bench/rows target/bench/notes

if [ ! -f "$FEED" ]; then
    echo "bench/http.sh: $FEED not found (set BLOCKSIEVE_DATA); skipping row 4" >&2
    echo "| 4 | HTTP endpoints vs nginx | skipped: $FEED not found | | | | |" >"$ROWS"
    echo "Row 4 skipped: the data set was not found at $FEED." >"$NOTES"
    exit 0
fi
FEED=$(cd "$(dirname "$FEED")" && pwd)/$(basename "$FEED")

need() { # need COMMAND DEBIAN_PACKAGE
    command -v "$1" >/dev/null 2>&1 && return 0
    echo "installing $2" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2") >/dev/null
}
need wrk wrk
need nginx nginx
need curl curl
need python3 python3
NGINX=$(command -v nginx)

cargo build --release -q -p blocksieve-publisher --bin blocksieve-publisher
BIN=$ROOT/target/release/blocksieve-publisher

WORK=$(mktemp -d)
chmod 755 "$WORK" # nginx workers run as nobody
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PUB_PORT=$(free_port)
NGX_PORT=$(free_port)
while [ "$NGX_PORT" = "$PUB_PORT" ]; do NGX_PORT=$(free_port); done
PUB=http://127.0.0.1:$PUB_PORT
NGX=http://127.0.0.1:$NGX_PORT

wait_ready() { # wait_ready URL SECONDS
    for _ in $(seq 1 $(($2 * 10))); do
        curl -fs -o /dev/null "$1" && return 0
        sleep 0.1
    done
    echo "bench/http.sh: $1 not ready after $2 s" >&2
    return 1
}

# The publisher: one list from the 854k-URL feed; no rebuild during the run.
cat >"$WORK/publisher.toml" <<EOF
data_dir = "$WORK/data"
schedule = "0 0 0 1 1 *"
[[lists]]
name = "phishing"
sources = [ { path = "$FEED", format = "urls" } ]
EOF
echo "starting the publisher on $PUB (first build of the 854k feed)" >&2
RUST_LOG=warn "$BIN" serve --config "$WORK/publisher.toml" --listen "127.0.0.1:$PUB_PORT" \
    2>"$WORK/publisher.log" &
PUB_PID=$!
PIDS+=("$PUB_PID")
wait_ready "$PUB/readyz" 120

# The same bytes as static files: the snapshot, and one JSON file per
# prefix fetched from the publisher itself.
mkdir -p "$WORK/www/v1/lists/phishing" "$WORK/www/v1/hashes" "$WORK/nginx-tmp"
cp "$WORK"/data/lists/phishing/builds/*.snapshot "$WORK/www/v1/lists/phishing/snapshot"
python3 - "$WORK" "$PUB_PORT" <<'PY'
import http.client, random, sys
work, port = sys.argv[1], int(sys.argv[2])
raw = open(next(__import__("glob").iglob(f"{work}/data/lists/phishing/builds/*.hashes")), "rb").read()
listed = sorted({raw[i:i + 4].hex() for i in range(0, len(raw), 32)})
rng = random.Random(7)
sets = {"listed": rng.sample(listed, 1000),
        "random": [f"{rng.getrandbits(32):08x}" for _ in range(1000)]}
conn = http.client.HTTPConnection("127.0.0.1", port)
for name, prefixes in sets.items():
    with open(f"{work}/paths-{name}.txt", "w") as paths:
        for p in prefixes:
            conn.request("GET", f"/v1/hashes/{p}")
            r = conn.getresponse()
            body = r.read()
            assert r.status == 200, (p, r.status, body)
            open(f"{work}/www/v1/hashes/{p}", "wb").write(body)
            paths.write(f"/v1/hashes/{p}\n")
PY
chmod -R a+rX "$WORK/www"

cat >"$WORK/nginx.conf" <<EOF
worker_processes 2;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    # nginx closes a keep-alive connection after 1,000 requests by default;
    # the publisher does not: keep the comparison about serving, not reconnecting.
    keepalive_requests 100000000;
    keepalive_timeout 75s;
    client_body_temp_path $WORK/nginx-tmp/body;
    proxy_temp_path $WORK/nginx-tmp/proxy;
    fastcgi_temp_path $WORK/nginx-tmp/fastcgi;
    uwsgi_temp_path $WORK/nginx-tmp/uwsgi;
    scgi_temp_path $WORK/nginx-tmp/scgi;
    server {
        listen 127.0.0.1:$NGX_PORT;
        root $WORK/www;
        location /v1/hashes/ { default_type application/json; }
        location /v1/lists/ { default_type application/octet-stream; etag on; }
    }
}
EOF
"$NGINX" -c "$WORK/nginx.conf" -p "$WORK" 2>"$WORK/nginx.log" &
NGX_PID=$!
PIDS+=("$NGX_PID")
wait_ready "$NGX/v1/lists/phishing/snapshot" 20

# The same bytes: compare one answer of each kind.
for path in "$(head -n1 "$WORK/paths-listed.txt")" /v1/lists/phishing/snapshot; do
    cmp <(curl -fs "$PUB$path") <(curl -fs "$NGX$path") || { echo "bytes differ for $path" >&2; exit 1; }
done
etag() { curl -fsI "$1/v1/lists/phishing/snapshot" | tr -d '\r' | awk 'tolower($1)=="etag:" {print $2}'; }
PUB_ETAG=$(etag "$PUB")
NGX_ETAG=$(etag "$NGX")

# wrk script: random paths from a list, or one path with If-None-Match; the
# summary as one JSON line (latencies in microseconds).
cat >"$WORK/bench.lua" <<'EOF'
local paths = {}
local list = os.getenv("BENCH_PATHS")
if list and list ~= "" then
    for line in io.lines(list) do paths[#paths + 1] = line end
end
local etag = os.getenv("BENCH_ETAG")
local counter = 0
function setup(thread) counter = counter + 1; thread:set("id", counter) end
function init(args)
    math.randomseed(7 * (id or 1))
    if etag and etag ~= "" then wrk.headers["If-None-Match"] = etag end
end
function request()
    if #paths > 0 then return wrk.format("GET", paths[math.random(#paths)]) end
    return wrk.format("GET")
end
function done(summary, latency, requests)
    local e = summary.errors
    io.write(string.format(
        'BENCH {"requests": %d, "duration_us": %d, "bytes": %d, "p50_us": %d, "p99_us": %d, "errors": %d}\n',
        summary.requests, summary.duration, summary.bytes, latency:percentile(50), latency:percentile(99),
        e.connect + e.read + e.write + e.status + e.timeout))
end
EOF

# CPU time (user + system, in clock ticks) of processes: the publisher's
# threads, or nginx's worker processes.
cpu_ticks() {
    local t=0 p f
    for p in "$@"; do
        read -r -a f <"/proc/$p/stat" || continue
        t=$((t + f[13] + f[14]))
    done
    echo "$t"
}
server_pids() { # server_pids publisher|nginx
    if [ "$1" = publisher ]; then echo "$PUB_PID"; else pgrep -P "$NGX_PID" | tr '\n' ' '; fi
}

# run NAME SERVER BASE PATH PATHS_FILE ETAG: a warm-up second, then the
# measurement, with the CPU time the server spent during it.
run() {
    local name=$1 server=$2 base=$3 path=$4 paths=$5 etag=$6
    BENCH_PATHS=$paths BENCH_ETAG=$etag wrk -t1 -c"$CONNECTIONS" -d1s -s "$WORK/bench.lua" "$base$path" >/dev/null
    echo "  $name: wrk -t1 -c$CONNECTIONS -d${SECONDS_EACH}s $base$path" >&2
    local pids before
    pids=$(server_pids "$server")
    # shellcheck disable=SC2086 # one word per process id
    before=$(cpu_ticks $pids)
    BENCH_PATHS=$paths BENCH_ETAG=$etag wrk -t1 -c"$CONNECTIONS" -d"${SECONDS_EACH}s" --latency \
        -s "$WORK/bench.lua" "$base$path" >"$WORK/$name.wrk"
    # shellcheck disable=SC2086
    echo $(($(cpu_ticks $pids) - before)) >"$WORK/$name.cpu"
    grep '^BENCH ' "$WORK/$name.wrk" | sed 's/^BENCH //' >"$WORK/$name.json"
}
for endpoint in random listed 304 200; do
    echo "endpoint $endpoint" >&2
    for round in $(seq 1 "$ROUNDS"); do
        for server in publisher nginx; do
            if [ $server = publisher ]; then base=$PUB etag=$PUB_ETAG; else base=$NGX etag=$NGX_ETAG; fi
            name=$endpoint-$server-$round
            case $endpoint in
            random | listed) run "$name" $server "$base" /v1/hashes/00000000 "$WORK/paths-$endpoint.txt" "" ;;
            304) run "$name" $server "$base" /v1/lists/phishing/snapshot "" "$etag" ;;
            200) run "$name" $server "$base" /v1/lists/phishing/snapshot "" "" ;;
            esac
        done
    done
done
PUB_RSS=$(awk '/VmHWM/ {print $2}' "/proc/$PUB_PID/status")

# Profile: the publisher under callgrind, counting only while it answers
# full-hash requests. It serves the same snapshot from a copy of the data
# directory; its start-up build reads a 777-line feed instead (fast under
# valgrind), which the shrink gate refuses, so the 854k list keeps serving.
PROFILE=""
if [ "${BENCH_PROFILE:-1}" != 0 ]; then
    need valgrind valgrind
    P_PORT=$(free_port)
    sed -e "s#$WORK/data#$WORK/pdata#" -e "s#$FEED#$DATA/feeds/phishunt-urls.txt#" \
        "$WORK/publisher.toml" >"$WORK/profile.toml"
    cp -r "$WORK/data" "$WORK/pdata"
    echo "profiling the publisher under callgrind (full-hash requests)" >&2
    RUST_LOG=warn valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$WORK/callgrind.out" \
        "$BIN" serve --config "$WORK/profile.toml" --listen "127.0.0.1:$P_PORT" 2>"$WORK/callgrind.log" &
    VG_PID=$!
    PIDS+=("$VG_PID")
    wait_ready "http://127.0.0.1:$P_PORT/readyz" 300
    # Let the start-up build finish before counting.
    for _ in $(seq 1 600); do
        curl -fs "http://127.0.0.1:$P_PORT/v1/lists" | grep -q '"last_build":{' && break
        sleep 0.5
    done
    P_ETAG=$(etag "http://127.0.0.1:$P_PORT")
    callgrind_control -i on "$VG_PID" >/dev/null
    BENCH_PATHS=$WORK/paths-listed.txt wrk -t1 -c4 -d10s -s "$WORK/bench.lua" \
        "http://127.0.0.1:$P_PORT/v1/hashes/00000000" >"$WORK/profile-listed.wrk"
    callgrind_control -d "$VG_PID" >/dev/null # counts so far -> callgrind.out.1
    BENCH_ETAG=$P_ETAG wrk -t1 -c4 -d10s -s "$WORK/bench.lua" \
        "http://127.0.0.1:$P_PORT/v1/lists/phishing/snapshot" >"$WORK/profile-304.wrk"
    callgrind_control -i off "$VG_PID" >/dev/null
    kill -INT "$VG_PID"
    wait "$VG_PID" || true # the rest -> callgrind.out
    PROFILE=$WORK/callgrind.profile
    top() { grep -E '^ *[0-9,]+ \(' "$1" | head -n "$2" | cut -c1-200 || true; }
    : >"$PROFILE"
    for part in "listed:callgrind.out.1:full-hash requests, listed prefixes" "304:callgrind.out:snapshot 304s"; do
        IFS=: read -r key file title <<<"$part"
        callgrind_annotate --inclusive=yes "$WORK/$file" >"$WORK/$key.incl" 2>/dev/null
        callgrind_annotate "$WORK/$file" >"$WORK/$key.self" 2>/dev/null
        {
            echo "#### $title"
            echo
            echo "wrk summary: $(grep '^BENCH ' "$WORK/profile-$key.wrk" | sed 's/^BENCH //')"
            echo
            echo "Inclusive (function and what it calls), top 40:"
            echo '```'
            top "$WORK/$key.incl" 40
            echo '```'
            echo "Self, top 25:"
            echo '```'
            top "$WORK/$key.self" 25
            echo '```'
        } >>"$PROFILE"
    done
fi

python3 - "$WORK" "$ROWS" "$NOTES" "$SECONDS_EACH" "$CONNECTIONS" "$PROFILE" "$PUB_RSS" "$ROUNDS" "$(getconf CLK_TCK)" <<'PY'
import json, os, statistics, sys
work, rows_path, notes_path, secs, conns, profile, pub_rss, rounds, clk_tck = sys.argv[1:10]
rounds = int(rounds)

def load(name):
    """All rounds of one endpoint and server: requests/s over their summed
    time; p50 and p99 the median of the rounds' (histograms do not add)."""
    runs = [json.load(open(f"{work}/{name}-{r}.json")) for r in range(1, rounds + 1)]
    j = {k: sum(run[k] for run in runs) for k in ("requests", "duration_us", "bytes", "errors")}
    j["p50_us"] = statistics.median(run["p50_us"] for run in runs)
    j["p99_us"] = statistics.median(run["p99_us"] for run in runs)
    j["rps"] = j["requests"] / (j["duration_us"] / 1e6)
    ticks = sum(int(open(f"{work}/{name}-{r}.cpu").read()) for r in range(1, rounds + 1))
    j["cpu_us"] = ticks / int(clk_tck) * 1e6 / max(j["requests"], 1)
    j["rounds"] = [run["requests"] / (run["duration_us"] / 1e6) for run in runs]
    return j

def ms(us):
    return f"{us / 1000:.2f}" if us < 100_000 else f"{us / 1000:.0f}"

snapshot_bytes = os.path.getsize(f"{work}/www/v1/lists/phishing/snapshot")
labels = {
    "random": ("4.1", "`GET /v1/hashes/{prefix}`, 1,000 random 32-bit prefixes (almost all empty)"),
    "listed": ("4.2", "`GET /v1/hashes/{prefix}`, 1,000 listed 32-bit prefixes (one match each)"),
    "304": ("4.3", "`GET /v1/lists/phishing/snapshot` with a matching `If-None-Match` (304)"),
    "200": ("4.4", f"`GET /v1/lists/phishing/snapshot`, full download ({snapshot_bytes:,} bytes)"),
}
rows, notes = [], []
notes.append("## Row 4: HTTP endpoints, publisher vs nginx\n")
notes.append(f"wrk 1 thread, {conns} keep-alive connections, {secs} s per measurement after a 1 s warm-up, "
             f"loopback; per endpoint, publisher and nginx alternate {rounds} times in one run (requests/s over "
             "the summed time; p50/p99 the median of the rounds). "
             "The publisher serves the 854k-URL feed's list (release build, one current-thread tokio "
             "runtime per core, each with its own `SO_REUSEPORT` listener: 2 on 2 cores); nginx (Debian package) serves the same bytes as static files "
             "with `worker_processes 2`, `access_log off`, `sendfile on`, keep-alive without a request cap: "
             "the snapshot file copied from the publisher's data directory (nginx's own ETag for the 304s), "
             "and one JSON file per prefix fetched from the publisher. wrk runs on the same 2 cores. "
             f"Publisher peak RSS after the run: {int(pub_rss) / 1024:.0f} MiB.\n")
notes.append("| endpoint | server | requests/s | each round | p50 ms | p99 ms | requests | MB/s | server CPU µs/request | errors |")
notes.append("|---|---|---|---|---|---|---|---|---|---|")
for key, (num, label) in labels.items():
    p, n = load(f"{key}-publisher"), load(f"{key}-nginx")
    for server, j in (("publisher", p), ("nginx", n)):
        each = ", ".join(f"{r:,.0f}" for r in j["rounds"])
        notes.append(f"| {label} | {server} | {j['rps']:,.0f} | {each} | {ms(j['p50_us'])} | {ms(j['p99_us'])} "
                     f"| {j['requests']:,} | {j['bytes'] / (j['duration_us'] / 1e6) / 1e6:,.1f} | {j['cpu_us']:,.1f} | {j['errors']} |")
    ratio = p["rps"] / n["rps"]
    errors = "" if p["errors"] + n["errors"] == 0 else f"; errors: publisher {p['errors']}, nginx {n['errors']}"
    rows.append(f"| {num} | {label}: requests/s (p50 / p99) | {p['rps']:,.0f}/s "
                f"({ms(p['p50_us'])} / {ms(p['p99_us'])} ms){errors} | nginx, same bytes: {n['rps']:,.0f}/s "
                f"({ms(n['p50_us'])} / {ms(n['p99_us'])} ms) | {ratio:.2f}× | ≥ 1.0× | "
                f"{'yes' if ratio >= 1.0 else 'no'} |")
notes.append("")
notes.append("Commands (from the repository root; `$WORK` is a temporary directory, ports picked free):\n")
notes.append("```sh\ncargo build --release -p blocksieve-publisher --bin blocksieve-publisher\n"
             "target/release/blocksieve-publisher serve --config $WORK/publisher.toml --listen 127.0.0.1:$PUB_PORT\n"
             "nginx -c $WORK/nginx.conf -p $WORK\n"
             f"wrk -t1 -c{conns} -d{secs}s --latency -s $WORK/bench.lua http://127.0.0.1:$PORT/v1/hashes/00000000   "
             "# BENCH_PATHS=paths file: a random path per request\n"
             f"wrk -t1 -c{conns} -d{secs}s --latency -s $WORK/bench.lua http://127.0.0.1:$PORT/v1/lists/phishing/snapshot"
             "   # BENCH_ETAG=the server's ETag for the 304 rows\n```\n")
notes.append("The scripts (`bench.lua`, `nginx.conf`, the publisher's config) are written by `bench/http.sh`.\n")
notes.append("""### Reading the numbers

Requests/s move by a third between rounds on this shared 2-core machine (wrk, both servers and
other builds share the cores; alternating rounds spread the drift over both servers), so one run
can put a row on either side of the target; the CPU time each server spends per request (the
table's "server CPU" column: user and system time of the publisher's process, or of nginx's
worker processes, during the measurement, over its requests) is the steadier comparison. Most of either server's time is the kernel's
(loopback TCP, wake-ups): about 60% of the publisher's CPU when it answers 304s. Its own
per-request work is one tower layer for the limits and the request metrics (`server/layer.rs`),
header values made once per snapshot, metric handles resolved once per route, and a full-hash
bucket found through a table of where each 16-bit prefix starts. The snapshot is sent as nginx
sends a file: with `sendfile` from a sealed anonymous file holding its bytes, the response head
before it with `MSG_MORE` (`publisher/src/sendfile.rs`; nginx: `sendfile on`, `tcp_nopush on`).
""")
if profile:
    notes.append("### Profile: the publisher under callgrind\n")
    notes.append("Instrumentation on only while wrk (1 thread, 4 connections, 10 s each) sent requests, so "
                 "start-up and builds are not counted; divide by the requests in the wrk summary for "
                 "instructions per request. Instruction counts (Ir):\n")
    notes.append(open(profile).read())
open(rows_path, "w").write("\n".join(rows) + "\n")
open(notes_path, "w").write("\n".join(notes) + "\n")
PY
cat "$ROWS"
