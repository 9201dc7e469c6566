#!/usr/bin/env bash
# Installs Debian's Chromium and its WebDriver (chromium, chromium-driver)
# if either is missing, then prints the browser's version. Idempotent; other
# CI scripts call it before any test that drives a real browser.
#
# Headless runs as root need --no-sandbox. On a machine without outside
# network access, also pass --disable-gpu --disable-quic --no-first-run
# --disable-background-networking --disable-component-update --disable-sync
# and a fresh --user-data-dir: without them Chromium keeps opening
# connections that are refused.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  echo "chromium: installing chromium and chromium-driver"
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
fi
# (The Debian launcher script may complain on stderr about /dev/shm; harmless.)
chromium --version 2>/dev/null
