#!/usr/bin/env bash
# The status page in real headless Chromium: the e2e tests `status::` with
# BLOCKSIEVE_REQUIRE_CHROMIUM=1, so that they fail rather than skip when no
# browser is found (under a plain `cargo test --workspace` on a machine
# without Chromium they say "SKIPPED" loudly and pass). A running publisher
# with a healthy, a stale and a refused list is loaded in Chromium, each
# state asserted in the DOM Chromium built, and a screenshot kept in
# target/status-page/status-page.png; the page of 100 lists with 1,000
# builds each is served in under 100 ms. (Its load time in Chromium is
# measured on the packaged release binary: .ci/deploy.sh.)
#
# Installs Debian's Chromium if missing (.ci/chromium.sh).
# Run after `cargo test --workspace` (the same build: no rebuild) and
# before target/debug is removed.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_INCREMENTAL=0
started=$(date +%s)
bash .ci/chromium.sh
echo "status page: tools ready in $(($(date +%s) - started)) s"
# `--workspace`, as .ci/run's `cargo test`, so the build is the same one.
BLOCKSIEVE_REQUIRE_CHROMIUM=1 BLOCKSIEVE_CHROMIUM="$(command -v chromium)" \
  cargo test --workspace --test e2e -- status:: --nocapture --test-threads=1
ls -l target/status-page/
echo "status page: passed in $(($(date +%s) - started)) s"
