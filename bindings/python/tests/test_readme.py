"""The Python example of the root README.md ("Other languages", "Python")
runs as written against a publisher of the README's default threat list,
and prints what its comments say."""

import re
import subprocess
import sys

from conftest import REPO, start_publisher


def readme_example():
    """The ```python block of the README's "### Python" section and the
    output its trailing comment lines promise."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("\n### Python\n", 1)[1]
    section = re.split(r"\n##+ ", section, maxsplit=1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    expected = [line[2:] for line in code.splitlines() if line.startswith("# ")]
    return code, expected


def test_readme_python_example(publisher_bin, tmp_path):
    code, expected = readme_example()
    assert len(expected) == 3
    # The README's publisher: the list `phishing` from the shipped feed,
    # its data (and public.key) in ./blocksieve-data of the working directory.
    publisher = start_publisher(publisher_bin, tmp_path, {"phishing": REPO / "publisher" / "data" / "phishunt-urls.txt"})
    try:
        assert '"http://127.0.0.1:8080"' in code
        code = code.replace('"http://127.0.0.1:8080"', repr(publisher.url))
        run = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
    finally:
        publisher.stop()
    assert run.returncode == 0, run.stderr
    printed = run.stdout.splitlines()
    assert printed[:2] == expected[:2]
    assert expected[2] == "invalid ..."
    assert len(printed) == 3 and printed[2].startswith("invalid ")
    assert (tmp_path / "agent-cache").is_dir()
