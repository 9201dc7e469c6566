#!/usr/bin/env bash
# Installs moto's S3 API server (`moto_server`), which the object-store
# tests run against, into a virtual environment under target/, if it is
# not there yet. The tests find it there (tests/src/moto.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/moto-venv
version=5.2.5
if [ -x "$venv/bin/moto_server" ] && "$venv/bin/python" -c "import moto, sys; sys.exit(moto.__version__ != '$version')" 2>/dev/null; then
    exit 0
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "moto[server]==$version"
"$venv/bin/moto_server" --help >/dev/null
