#!/usr/bin/env bash
# The status page in real headless Chromium: the e2e tests `status::` with
# BLOCKSIEVE_REQUIRE_CHROMIUM=1, so that they fail rather than skip when no
# browser is found (under a plain `cargo test --workspace` on a machine
# without Chromium they say "SKIPPED" loudly and pass). A running publisher
# with a healthy, a stale and a refused list is loaded in Chromium, each
# state asserted in the DOM Chromium built, and a screenshot kept in
# target/status-page/status-page.png; the page of 100 lists with 1,000
# builds each is loaded five times and its Navigation Timing printed.
#
# Installs what is missing: Debian's Chromium (.ci/chromium.sh), Node.js
# and npm, and playwright-core (the extension test's pinned install, npm
# ci in bindings/wasm/extension/test), which reads the Navigation Timing.
# Run after `cargo test --workspace` (the same build: no rebuild) and
# before target/debug is removed.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_INCREMENTAL=0
started=$(date +%s)
bash .ci/chromium.sh
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "status page: installing nodejs and npm"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
test_dir=bindings/wasm/extension/test
if ! npm ls --prefix "$test_dir" playwright-core >/dev/null 2>&1; then
  (cd "$test_dir" && npm ci --no-audit --no-fund --loglevel=error)
fi
echo "status page: tools ready in $(($(date +%s) - started)) s"
# `--workspace`, as .ci/run's `cargo test`, so the build is the same one.
BLOCKSIEVE_REQUIRE_CHROMIUM=1 BLOCKSIEVE_CHROMIUM="$(command -v chromium)" \
  cargo test --workspace --test e2e -- status:: --nocapture --test-threads=1
ls -l target/status-page/
echo "status page: passed in $(($(date +%s) - started)) s"
