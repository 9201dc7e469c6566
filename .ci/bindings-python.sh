#!/usr/bin/env bash
# The Python binding (bindings/python) for CI, run by .ci/run after
# `cargo test --workspace`: builds the abi3 wheel with maturin, installs it
# into a fresh virtual environment and runs its pytest tests there, against
# real publishers started from target/debug/blocksieve-publisher, including
# the cross-language identity test (tests/examples/xlang.rs).
#
#   bash .ci/bindings-python.sh
#
# Tools, installed if missing (pinned): python3 with venv (Debian 12
# packages), maturin and pytest (pip, in virtual environments under
# target/; the tests need nothing else).
#
# The wheel is built with the dev profile, as the workspace's tests are: it
# reuses the debug build of the agent and its dependencies in target/debug,
# so only pyo3 and the binding are compiled again (maturin sets
# PYO3_BUILD_EXTENSION_MODULE, which changes pyo3's build configuration).
# A release wheel (`maturin build --release`, for publishing) compiles the
# whole dependency tree again. Stripped of symbols, the test wheel is 5 MB
# instead of 14 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_INCREMENTAL=0
maturin_version=1.16.0
pytest_version=9.2.0
build_venv="$PWD/target/py-build-venv"
test_venv="$PWD/target/py-test-venv"
wheels="$PWD/target/wheels/python"
step() { echo "bindings-python: $1 in $(($(date +%s) - started)) s"; started=$(date +%s); }
started=$(date +%s)

# Debian 12 (bookworm)'s Python; any CPython 3.9+ with venv will do.
python_deb=3.11.2-1+b1
if ! python3 -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 9))' 2>/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "python3=$python_deb" "python3-venv=$python_deb" >/dev/null
fi
if [ "$("$build_venv/bin/maturin" --version 2>/dev/null)" != "maturin $maturin_version" ]; then
    rm -rf "$build_venv"
    python3 -m venv "$build_venv"
    "$build_venv/bin/pip" install --quiet --disable-pip-version-check "maturin==$maturin_version"
fi
step "maturin $maturin_version ready"

# The publisher and the cross-language reference the tests run, as
# `cargo test --workspace` builds them: a no-op right after it (.ci/run),
# whereas `cargo build -p` of either alone unifies dependency features
# differently and recompiles part of the tree.
cargo test --workspace --no-run --quiet
export BLOCKSIEVE_PUBLISHER="$PWD/target/debug/blocksieve-publisher"
export BLOCKSIEVE_XLANG="$PWD/target/debug/examples/xlang"
step "workspace debug build present"

rm -rf "$wheels"
"$build_venv/bin/maturin" build --quiet --manifest-path bindings/python/Cargo.toml \
    --profile dev --strip --interpreter "$build_venv/bin/python" --out "$wheels"
wheel=$(ls "$wheels"/blocksieve-*-abi3-*.whl)
step "built $(basename "$wheel") ($(du -h "$wheel" | cut -f1))"

# A fresh environment every time: the test sees only what the wheel ships.
rm -rf "$test_venv"
python3 -m venv "$test_venv"
"$test_venv/bin/pip" install --quiet --disable-pip-version-check "pytest==$pytest_version" "$wheel"
step "installed the wheel and pytest $pytest_version into a fresh venv"

cd bindings/python
PYTHONDONTWRITEBYTECODE=1 "$test_venv/bin/python" -m pytest -p no:cacheprovider -q -s tests
step "pytest passed"
