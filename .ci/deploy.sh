#!/usr/bin/env bash
# Deployment checks for CI (run by .ci/run after the tests, as root):
#
# 1. the Prometheus alert rules: `promtool check rules` and `promtool test
#    rules` (deploy/prometheus/); promtool is taken from Debian's
#    `prometheus` package if missing (only the promtool binary is
#    extracted, so no Prometheus server is installed or started);
# 2. the systemd unit: `systemd-analyze verify` where systemd-analyze is
#    installed (it needs no running systemd; SKIPPED loudly otherwise);
# 3. the .deb: built by `cargo deb` (installed with `cargo install
#    cargo-deb` if missing) from a release build of the publisher in
#    target/deploy/, installed with `dpkg -i`, then checked: the binary's
#    --version, `check-config /etc/blocksieve/publisher.toml`, the unit and
#    the conffile in place, a `build` of the sample configuration into a
#    temporary directory, a `serve` on 127.0.0.1:0 answering /healthz and
#    stopping cleanly on SIGTERM; the status page of 100 lists with 1,000
#    builds each served by the installed binary and loaded in headless
#    Chromium, its median load under 100 ms (tests/status-page/page-load.mjs:
#    not judged, every number printed, when the browser alone takes over
#    25 ms to load /healthz, and then failed only past 4 × 100 ms of the
#    page's own; Chromium, Node.js and playwright-core installed if
#    missing); then
#    `dpkg --purge`, after which nothing of the package is left.
#
# The machine is left as found, on failure too: the package is purged, the
# temporary files, the server and target/deploy/ are removed. The script
# refuses to run where blocksieve-publisher is already installed (it would
# replace and then purge an operator's package). Tools installed because
# they were missing (promtool, cargo-deb, Chromium, Node.js and npm, the
# extension test's node_modules) stay, as in the other CI scripts.
#
#   bash .ci/deploy.sh
#   DEPLOY_KEEP_BUILD=1 bash .ci/deploy.sh   # keep target/deploy for a rerun
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_INCREMENTAL=0

package=blocksieve-publisher
cargo_deb_version=3.6.2
target_dir="$PWD/target/deploy"
config=/etc/blocksieve/publisher.toml
work=$(mktemp -d)
server_pid=
installed=

cleanup() {
    status=$?
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    if [ -n "$installed" ]; then
        dpkg --purge "$package" >/dev/null 2>&1 || echo "deploy: WARNING: dpkg --purge $package failed" >&2
    fi
    rm -rf "$work"
    # DEPLOY_KEEP_BUILD=1 keeps the release build for a quicker rerun.
    [ -n "${DEPLOY_KEEP_BUILD:-}" ] || rm -rf "$target_dir"
    exit "$status"
}
trap cleanup EXIT

fail() {
    echo "deploy: FAILED: $*" >&2
    exit 1
}

step() { echo "deploy: $*"; }

if dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
    fail "$package is already installed on this machine; not replacing it"
fi
[ ! -e "$config" ] || fail "$config already exists; not overwriting it"

# --- tools, if missing ---
if ! command -v promtool >/dev/null; then
    step "installing promtool from Debian's prometheus package"
    apt-get update -qq
    (cd "$work" && apt-get download -qq -o APT::Sandbox::User=root prometheus)
    dpkg-deb --fsys-tarfile "$work"/prometheus_*.deb | tar -x -C "$work" ./usr/bin/promtool
    install -m 0755 "$work/usr/bin/promtool" /usr/local/bin/promtool
    rm -rf "$work"/prometheus_*.deb "$work/usr"
fi
promtool --version | head -n 1
if ! cargo deb --version >/dev/null 2>&1; then
    step "installing cargo-deb $cargo_deb_version"
    cargo install cargo-deb --version "$cargo_deb_version" --locked
fi
cargo deb --version
bash .ci/chromium.sh
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    step "installing nodejs and npm"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
# playwright-core: the extension test's pinned install.
playwright_dir=bindings/wasm/extension/test
if ! npm ls --prefix "$playwright_dir" playwright-core >/dev/null 2>&1; then
    (cd "$playwright_dir" && npm ci --no-audit --no-fund --loglevel=error)
fi

# --- alert rules ---
step "promtool check rules"
promtool check rules deploy/prometheus/blocksieve.rules.yml
step "promtool test rules"
(cd deploy/prometheus && promtool test rules blocksieve.rules.test.yml)

# --- the package ---
step "building the .deb (release build of the publisher)"
started=$(date +%s)
mkdir -p "$work/deb"
# Without debug information: a smaller build and a stripped binary.
CARGO_TARGET_DIR="$target_dir" cargo deb -p "$package" --override-debug none --output "$work/deb/"
echo "deploy: .deb built in $(($(date +%s) - started)) s"
deb=$(ls "$work"/deb/*.deb)
dpkg-deb --info "$deb" | sed -n '/Package:/,$p'
dpkg-deb --contents "$deb"
step "dpkg -i $(basename "$deb")"
installed=yes
dpkg -i "$deb"

step "checking the installed package"
[ "$(command -v blocksieve-publisher)" = /usr/bin/blocksieve-publisher ] \
    || fail "blocksieve-publisher is not /usr/bin/blocksieve-publisher"
version=$(blocksieve-publisher --version)
want_version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
[ "$version" = "blocksieve-publisher $want_version" ] || fail "--version printed '$version'"
echo "$version"
blocksieve-publisher check-config "$config" || fail "check-config $config"
unit=$(dpkg -L "$package" | grep '/systemd/system/blocksieve-publisher.service$') \
    || fail "the package installs no systemd unit"
[ -f "$unit" ] || fail "$unit is not in place"
cmp "$unit" deploy/blocksieve-publisher.service || fail "$unit is not deploy/blocksieve-publisher.service"
dpkg-query -W -f='${Conffiles}\n' "$package" | grep -q "^ *$config " || fail "$config is not a conffile"
for doc in README.md configuration.md prometheus/blocksieve.rules.yml; do
    [ -f "/usr/share/doc/$package/$doc" ] || fail "/usr/share/doc/$package/$doc is missing"
done
if command -v systemd-analyze >/dev/null; then
    step "systemd-analyze verify $unit"
    systemd-analyze verify "$unit"
else
    echo "deploy: SKIPPED: systemd-analyze is not installed; the unit was not verified"
fi

step "build with the installed configuration into a temporary data directory"
blocksieve-publisher build --config "$config" --out "$work/build" >"$work/build.txt" 2>"$work/build.log" \
    || { cat "$work/build.txt" "$work/build.log"; fail "build"; }
grep -q '^| phishing | yes |' "$work/build.txt" || { cat "$work/build.txt"; fail "the sample's list was not published"; }
[ -n "$(find "$work/build/lists/phishing" -name '*.snapshot')" ] || fail "no snapshot written"

step "serve on 127.0.0.1:0, /healthz, then SIGTERM"
sed "s|^data_dir = .*|data_dir = \"$work/serve\"|" "$config" >"$work/serve.toml"
blocksieve-publisher serve --config "$work/serve.toml" --listen 127.0.0.1:0 2>"$work/serve.log" &
server_pid=$!
addr=
for _ in $(seq 1 100); do
    addr=$(sed -n 's/.*publisher listening addr=\([0-9.:]*\).*/\1/p' "$work/serve.log" | head -n 1)
    [ -n "$addr" ] && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/serve.log"; fail "serve exited at start"; }
    sleep 0.1
done
[ -n "$addr" ] || { cat "$work/serve.log"; fail "serve did not say where it listens"; }
healthz=$(curl -fsS --max-time 10 "http://$addr/healthz") || { cat "$work/serve.log"; fail "GET /healthz"; }
echo "GET http://$addr/healthz: $healthz"
kill -TERM "$server_pid"
stop_status=0
wait "$server_pid" || stop_status=$?
server_pid=
[ "$stop_status" = 0 ] || { cat "$work/serve.log"; fail "serve exited $stop_status on SIGTERM"; }
grep -q 'publisher stopped' "$work/serve.log" || { cat "$work/serve.log"; fail "serve did not drain and stop"; }

step "the status page of 100 lists with 1,000 builds each, loaded in headless Chromium"
TMPDIR="$work" CHROMIUM="$(command -v chromium)" node tests/status-page/page-load.mjs /usr/bin/blocksieve-publisher 9 100 \
    || fail "the status page did not load in under 100 ms"

step "dpkg --purge $package"
dpkg --purge "$package"
installed=
# Purged: dpkg knows nothing of it, or only as "not-installed" (not
# "config-files", "half-installed", ...).
left=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
case "$left" in
    "" | *" not-installed") ;;
    *) fail "$package is still known to dpkg after the purge: $left" ;;
esac
for gone in /usr/bin/blocksieve-publisher "$unit" "$config" /etc/blocksieve "/usr/share/doc/$package"; do
    [ ! -e "$gone" ] || fail "$gone is left after the purge"
done
step "passed: the package installs, runs and purges cleanly"
