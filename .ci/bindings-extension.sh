#!/usr/bin/env bash
# The WASM agent in real headless Chromium against a real publisher: the
# browser-extension example (bindings/wasm/extension), then the agent in a
# web page (bindings/wasm/tests/chromium.test.mjs: every cross-language
# input answered as the Rust agent answers it, and the README's JavaScript
# example as written). Run after .ci/bindings-wasm.sh, which writes the
# agent's wasm-bindgen package for browsers (--target web) to
# target/wasm-pkg/web (or $BLOCKSIEVE_WASM_WEB_PKG), and before target/debug
# is removed (the tests run target/debug/blocksieve-publisher and
# target/debug/examples/xlang).
#
# Without that package (no wasm32 target on this machine), prints
# "EXTENSION SKIPPED: ..." and exits 0. Otherwise installs what is missing:
# Debian's Chromium (.ci/chromium.sh), Node.js and npm (Debian's, when the
# machine has none; Node.js 20 or newer is required), the extension test's
# pinned npm packages (npm ci: playwright-core, no other dependency; the page
# test uses the same install), then makes sure the publisher and the xlang
# example are built, puts the package into the extension (build.sh) and runs
# both tests, then the feed fixtures as Chromium writes their entries
# (tests/examples/browser_forms.rs). Screenshots are left in
# target/extension-test/.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_INCREMENTAL=0
started=$(date +%s)
pkg="${BLOCKSIEVE_WASM_WEB_PKG:-target/wasm-pkg/web}"
if [ ! -f "$pkg/blocksieve_wasm.js" ] || [ ! -f "$pkg/blocksieve_wasm_bg.wasm" ]; then
  echo "=================================================================="
  echo "EXTENSION SKIPPED: no WASM package in $pkg (blocksieve_wasm.js and"
  echo "blocksieve_wasm_bg.wasm); .ci/bindings-wasm.sh builds it when the"
  echo "wasm32-unknown-unknown target and wasm-bindgen are available. Neither"
  echo "the extension nor the WASM agent in a Chromium page is tested."
  echo "=================================================================="
  exit 0
fi

bash .ci/chromium.sh
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "extension: installing nodejs and npm"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 20 ]; then
  echo "extension: Node.js $(node --version) is too old, the test needs 20 or newer" >&2
  exit 1
fi
echo "extension: node $(node --version), npm $(npm --version)"

test_dir=bindings/wasm/extension/test
if ! npm ls --prefix "$test_dir" playwright-core >/dev/null 2>&1; then
  (cd "$test_dir" && npm ci --no-audit --no-fund --loglevel=error)
fi
echo "extension: tools ready in $(($(date +%s) - started)) s"

# The same build as .ci/run's `cargo test --workspace`, so after it this is
# a no-op (under a second) that only makes sure target/debug holds the
# publisher and the xlang example. `cargo build -p blocksieve-publisher` would resolve other
# features for shared dependencies and rebuild them (about ten minutes).
cargo test -q --workspace --no-run
bindings/wasm/extension/build.sh "$pkg"
echo "extension: publisher and extension built in $(($(date +%s) - started)) s"

(cd "$test_dir" && npm test)
echo "extension: passed in $(($(date +%s) - started)) s"

page_started=$(date +%s)
BLOCKSIEVE_WASM_WEB_PKG="$pkg" \
  BLOCKSIEVE_PUBLISHER=target/debug/blocksieve-publisher \
  BLOCKSIEVE_XLANG=target/debug/examples/xlang \
  node --test --test-reporter=spec bindings/wasm/tests/chromium.test.mjs
echo "extension: the agent in a Chromium page (cross-language inputs, README example) passed in $(($(date +%s) - page_started)) s"
echo "extension: all done in $(($(date +%s) - started)) s"

# Real feed fixtures as Chromium writes each entry on a visit
# (tests/examples/browser_forms.rs): every form hits what its line
# publishes; the same run, on the whole feeds, made
# tests/fixtures/browser-forms.jsonl. Then the URL fixtures' entries
# rewritten the ways a URL can be written otherwise (--mutate SEED), each
# variant a feed line of its own.
forms_started=$(date +%s)
for feed in "phishing-urls.txt urls" "phishing-urls-union-quirks.txt urls" "phishing-hosts.txt hosts" \
  "urlhaus-filter.txt adblock-hosts" "phishing-urls.txt urls --mutate 1" "phishing-urls.txt urls --mutate 2" \
  "phishing-urls-union-quirks.txt urls --mutate 3"; do
  set -- $feed
  target/debug/examples/browser_forms "tests/fixtures/$1" "${@:2}"
done
echo "extension: fixture entries as Chromium writes them checked in $(($(date +%s) - forms_started)) s"
