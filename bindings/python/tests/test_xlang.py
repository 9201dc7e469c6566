"""Cross-language identity: the Python binding answers every input of the
reference (tests/examples/xlang.rs: the conformance vectors and 10,000 real
phishing URLs) exactly as the Rust agent does, against the same publisher."""

import json
import subprocess

import blocksieve
from conftest import Publisher


def python_line(agent, text):
    """One input's line, as xlang.rs writes the Rust agent's."""
    try:
        canonical = blocksieve.canonicalize(text)
        full_hashes = blocksieve.full_hashes(text)
    except blocksieve.InvalidUrlError:
        canonical, full_hashes = None, []
    out = {"canonical": canonical, "full_hashes": full_hashes}
    try:
        verdict = agent.check(text)
    except blocksieve.InvalidUrlError:
        out["verdict"] = "invalid"
        return out
    if verdict.kind == "unsafe":
        out["list"] = verdict.list
        out["expression"] = verdict.expression
    out["verdict"] = verdict.kind
    return out


def test_same_answers_as_the_rust_agent(publisher_bin, xlang_bin, tmp_path):
    directory = tmp_path / "xlang"
    xlang = xlang_bin
    subprocess.run([str(xlang), "setup", str(directory)], check=True)
    config = directory / "config.toml"
    publisher = Publisher(publisher_bin, config, directory / "publisher.log").wait_ready(["xlang"])
    try:
        reference = subprocess.run(
            [str(xlang), "reference", publisher.url, publisher.key, str(directory)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.splitlines()
        inputs = [bytes.fromhex(h).decode() for h in (directory / "inputs.txt").read_text().splitlines()]
        assert len(reference) == len(inputs)

        with blocksieve.Agent(publisher.url, ["xlang"], publisher.key) as agent:
            agent.update()
            mismatches = []
            counts = {}
            for text, expected in zip(inputs, reference):
                ours = python_line(agent, text)
                counts[ours["verdict"]] = counts.get(ours["verdict"], 0) + 1
                if ours != json.loads(expected):
                    mismatches.append((text, expected, json.dumps(ours)))
    finally:
        publisher.stop()
    print(f"xlang: {len(inputs)} inputs, {len(inputs) - len(mismatches)} identical; verdicts {counts}")
    assert not mismatches, "\n".join(f"{t!r}\n  rust:   {e}\n  python: {o}" for t, e, o in mismatches[:20])
