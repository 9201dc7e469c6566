#!/usr/bin/env bash
# Puts the agent's wasm-bindgen build into the extension: copies
# blocksieve_wasm.js and blocksieve_wasm_bg.wasm from the package directory
# (the first argument, else $BLOCKSIEVE_WASM_WEB_PKG, else
# target/wasm-pkg/web, where .ci/bindings-wasm.sh writes the
# `wasm-bindgen --target web` output)
# into pkg/ beside manifest.json. pkg/ is generated, not committed.
#
#   bindings/wasm/extension/build.sh [PKG_DIR]
#
# Then write config.json (see config.example.json) or use the options page,
# and load the directory as an unpacked extension.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
pkg="${1:-${BLOCKSIEVE_WASM_WEB_PKG:-$here/../../../target/wasm-pkg/web}}"
for file in blocksieve_wasm.js blocksieve_wasm_bg.wasm; do
  if [ ! -f "$pkg/$file" ]; then
    echo "build.sh: $pkg/$file is missing: build the WASM package first (.ci/bindings-wasm.sh)" >&2
    exit 1
  fi
done
rm -rf "$here/pkg"
mkdir -p "$here/pkg"
cp "$pkg/blocksieve_wasm.js" "$pkg/blocksieve_wasm_bg.wasm" "$here/pkg/"
echo "build.sh: pkg/ from $pkg ($(wc -c <"$here/pkg/blocksieve_wasm_bg.wasm") bytes of wasm)"
