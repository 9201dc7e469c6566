"""Fixtures: a real blocksieve publisher on 127.0.0.1, built with cargo.

The publisher binary is `target/debug/blocksieve-publisher` of this
workspace (built here with `cargo build -p blocksieve-publisher`, a no-op
when up to date), or the one named by BLOCKSIEVE_PUBLISHER; likewise the
cross-language reference, `target/debug/examples/xlang` or BLOCKSIEVE_XLANG
(CI passes those `cargo test --workspace` built). Each publisher
runs `serve --config CONFIG --listen 127.0.0.1:0` in a temporary
directory; the fixture reads its address and public key from the
`publisher listening addr=... public_key=...` log line and waits until
every threat list is published.
"""

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests" / "fixtures"
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))

LISTENING = re.compile(r"publisher listening addr=(\S+) public_key=(\S+)")
PUBLISHED = re.compile(r"published snapshot list=(\S+)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")

# The feed of the threat list `phishing`: 299 real phishing URLs (MIT, see
# tests/fixtures/README.md), and URLs on it and off it.
PHISHING_FEED = FIXTURES / "phishing-urls.txt"
LISTED_URL = "http://565caipiao.com/"
LISTED_EXPRESSION = "565caipiao.com/"
BENIGN_URL = "https://umcutrecht.nl/nl/"


def cargo(*args, **kwargs):
    """Runs cargo in the workspace; its output goes to the test log."""
    return subprocess.run(["cargo", *args], cwd=REPO, check=True, **kwargs)


@pytest.fixture(scope="session")
def publisher_bin():
    """The path of the publisher binary, built if needed."""
    explicit = os.environ.get("BLOCKSIEVE_PUBLISHER")
    if explicit:
        return Path(explicit)
    cargo("build", "--quiet", "-p", "blocksieve-publisher")
    return TARGET / "debug" / "blocksieve-publisher"


@pytest.fixture(scope="session")
def xlang_bin():
    """The path of the cross-language reference (tests/examples/xlang.rs),
    built if needed."""
    explicit = os.environ.get("BLOCKSIEVE_XLANG")
    if explicit:
        return Path(explicit)
    cargo("build", "--quiet", "-p", "blocksieve-tests", "--example", "xlang")
    return TARGET / "debug" / "examples" / "xlang"


class Publisher:
    """A running `blocksieve-publisher serve`: its base URL and key."""

    def __init__(self, binary, config, log):
        self.log_path = log
        self._log = open(log, "w")
        self.process = subprocess.Popen(
            [str(binary), "serve", "--config", str(config), "--listen", "127.0.0.1:0"],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=Path(config).parent,
            env={**os.environ, "RUST_LOG": "info", "NO_COLOR": "1"},
        )
        self.url = None
        self.key = None

    def wait_ready(self, lists, timeout=120.0):
        """Waits for the listening line and a published snapshot of every
        list in `lists`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = ANSI.sub("", self.log_path.read_text(errors="replace"))
            listening = LISTENING.search(text)
            if listening:
                self.url = "http://" + listening.group(1)
                self.key = listening.group(2)
                if set(lists) <= set(PUBLISHED.findall(text)):
                    return self
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"publisher not ready; its log:\n{self.log_path.read_text(errors='replace')}")

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


def write_config(path, data_dir, lists):
    """A publisher config serving `lists` (name -> feed path of URLs),
    built once at start (the schedule's next build is a year away)."""
    text = f'data_dir = "{data_dir}"\nlisten = "127.0.0.1:0"\nschedule = "0 0 0 1 1 *"\n'
    for name, feed in lists.items():
        text += f'\n[[lists]]\nname = "{name}"\nsources = [{{ path = "{feed}", format = "urls" }}]\n'
    Path(path).write_text(text)


def start_publisher(binary, directory, lists):
    """Starts a publisher in `directory` serving `lists`; waits until ready."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "config.toml"
    write_config(config, directory / "blocksieve-data", lists)
    return Publisher(binary, config, directory / "publisher.log").wait_ready(lists)


@pytest.fixture(scope="session")
def publisher(publisher_bin, tmp_path_factory):
    """A publisher serving the threat list `phishing`."""
    running = start_publisher(publisher_bin, tmp_path_factory.mktemp("publisher"), {"phishing": PHISHING_FEED})
    yield running
    running.stop()
