"""The blocking and asyncio agents against a real publisher."""

import asyncio
import base64
import datetime
import hashlib
import os
import socket
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import blocksieve
from conftest import BENIGN_URL, LISTED_EXPRESSION, LISTED_URL


def sha256_hex(text):
    return hashlib.sha256(text.encode()).hexdigest()


def agent_for(publisher, **options):
    return blocksieve.Agent(publisher.url, ["phishing"], publisher.key, **options)


def closed_port_url():
    """A loopback URL nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_stubs_and_marker_ship_in_the_package():
    package = Path(blocksieve.__file__).parent
    assert (package / "__init__.pyi").is_file()
    assert (package / "py.typed").is_file()
    assert blocksieve.__version__


def test_stubs_name_every_public_member():
    import ast

    stub = ast.parse((Path(blocksieve.__file__).parent / "__init__.pyi").read_text())
    classes = {n.name: n for n in stub.body if isinstance(n, ast.ClassDef)}
    names = set(classes) | {n.name for n in stub.body if isinstance(n, ast.FunctionDef)}
    names |= {n.target.id for n in stub.body if isinstance(n, ast.AnnAssign)}
    # `blocksieve.blocksieve` is the extension module the package re-exports.
    public = {n for n in dir(blocksieve) if not n.startswith("_")} - {"blocksieve"} | {"__version__"}
    assert public == names - {"VerdictKind"}
    for name, node in classes.items():
        members = {
            n.name
            for n in node.body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and not n.name.startswith("_")
        }
        actual = {m for m in dir(getattr(blocksieve, name)) if not m.startswith("_")}
        if issubclass(getattr(blocksieve, name), BaseException):
            continue
        assert actual == members, name


def test_canonicalize_expressions_and_full_hashes():
    assert blocksieve.canonicalize("HTTP://Evil.Example") == "http://evil.example/"
    assert blocksieve.expressions("http://a.b.c/1/2.html?param=1") == [
        "a.b.c/1/2.html?param=1",
        "a.b.c/1/2.html",
        "a.b.c/",
        "a.b.c/1/",
        "b.c/1/2.html?param=1",
        "b.c/1/2.html",
        "b.c/",
        "b.c/1/",
    ]
    url = "http://a.b.c/1/2.html?param=1"
    assert blocksieve.full_hashes(url) == [sha256_hex(e) for e in blocksieve.expressions(url)]


@pytest.mark.parametrize("bad", ["", "mailto:someone@example.com", "http://", "http:///path", "\x00"])
def test_invalid_url_raises_never_crashes(bad):
    for function in (blocksieve.canonicalize, blocksieve.expressions, blocksieve.full_hashes):
        with pytest.raises(blocksieve.InvalidUrlError):
            function(bad)
    assert issubclass(blocksieve.InvalidUrlError, blocksieve.BlocksieveError)


def test_an_invalid_url_is_cut_in_its_error_message():
    url = "mailto:" + "a" * (1 << 20)
    for function in (blocksieve.canonicalize, blocksieve.expressions, blocksieve.full_hashes):
        with pytest.raises(blocksieve.InvalidUrlError) as raised:
            function(url)
        message = str(raised.value)
        assert len(message) < 400, len(message)
        assert message.endswith('aaa"...'), message[-20:]


def test_wrong_argument_types_raise_type_error():
    with pytest.raises(TypeError, match="a URL is a str or bytes, not int"):
        blocksieve.canonicalize(1)
    with pytest.raises(TypeError):
        blocksieve.Agent("http://127.0.0.1:1", "phishing", "key")


def test_a_url_as_bytes_or_with_surrogates_is_read_as_the_c_api_and_browsers_read_it():
    # Bytes that are not UTF-8, as bytes or as a `surrogateescape` decode
    # made them (os.fsdecode, sys.argv, WSGI): each byte percent-escaped.
    raw = b"http://a.example/caf\xe9?\xff"
    escaped = raw.decode("utf-8", "surrogateescape")
    for url in (raw, escaped):
        assert blocksieve.canonicalize(url) == "http://a.example/caf%E9?%FF"
        assert blocksieve.full_hashes(url) == blocksieve.full_hashes("http://a.example/caf%E9?%FF")
    # Any other lone surrogate (an emoji cut in two) is U+FFFD, as a
    # browser's URL parser takes it.
    assert blocksieve.canonicalize("http://a.example/\ud83d") == "http://a.example/%EF%BF%BD"
    assert blocksieve.canonicalize("http://a.example/\ud83d\ude00") == "http://a.example/%F0%9F%98%80"
    # Bytes over 2 MiB are an invalid URL, not memory (each escape is
    # three), refused at their own length before any is escaped, as the C
    # API refuses them.
    raw = b"http://a.example/" + b"\xff" * (3 << 20)
    for url in (raw, raw.decode("utf-8", "surrogateescape")):
        with pytest.raises(blocksieve.InvalidUrlError, match=f"URL is {len(raw)} bytes long, the maximum is 2097152"):
            blocksieve.canonicalize(url)


def test_not_ready_before_update(publisher):
    with agent_for(publisher) as agent:
        with pytest.raises(blocksieve.NotReadyError):
            agent.check(LISTED_URL)
        assert not agent.status().ready


def test_check_many_answers_each_url_while_a_list_has_no_snapshot(publisher):
    # `absent` is not published: it never gets a snapshot, and the URLs
    # the other list does not confirm unsafe are not ready.
    urls = [LISTED_URL, BENIGN_URL, "http://"]

    def expect_each(answers):
        unsafe, not_ready, invalid = answers
        assert unsafe.is_unsafe and unsafe.list == "phishing"
        assert isinstance(not_ready, blocksieve.NotReadyError) and "absent" in str(not_ready)
        assert isinstance(invalid, blocksieve.InvalidUrlError)

    with blocksieve.Agent(publisher.url, ["phishing", "absent"], publisher.key) as agent:
        with pytest.raises(blocksieve.TransportError, match="absent"):
            agent.update()
        with pytest.raises(blocksieve.NotReadyError):
            agent.check_many(urls)
        expect_each(agent.check_many(urls, return_exceptions=True))
        assert agent.check(LISTED_URL).is_unsafe

    async def main():
        async with blocksieve.AsyncAgent(publisher.url, ["phishing", "absent"], publisher.key) as agent:
            with pytest.raises(blocksieve.TransportError, match="absent"):
                await agent.update()
            with pytest.raises(blocksieve.NotReadyError):
                await agent.check_many(urls)
            expect_each(await agent.check_many(urls, return_exceptions=True))

    asyncio.run(main())


def test_update_then_safe_and_unsafe(publisher):
    with agent_for(publisher) as agent:
        report = agent.update()
        assert report.complete
        (entry,) = report.lists
        assert (entry.list, entry.outcome, entry.previous, entry.error) == ("phishing", "updated", None, None)
        assert entry.version > 0

        verdict = agent.check(LISTED_URL)
        assert verdict.kind == "unsafe" and verdict.is_unsafe and verdict.block
        assert verdict.list == "phishing"
        assert verdict.expression == LISTED_EXPRESSION
        assert verdict.full_hash == sha256_hex(LISTED_EXPRESSION)
        assert verdict.full_hash in blocksieve.full_hashes(LISTED_URL)
        assert not verdict.stale

        verdict = agent.check(BENIGN_URL)
        assert verdict.kind == "safe" and verdict.is_safe and not verdict.block
        assert (verdict.list, verdict.expression, verdict.full_hash) == (None, None, None)

        kinds = [v.kind for v in agent.check_many([BENIGN_URL, LISTED_URL, BENIGN_URL])]
        assert kinds == ["safe", "unsafe", "safe"]
        # A URL with a surrogate beside a listed one: each answered (such a
        # str raised UnicodeEncodeError for the whole batch); a listed URL
        # as bytes is unsafe.
        odd = "http://a.example/caf\udce9"
        kinds = [v.kind for v in agent.check_many([odd, LISTED_URL.encode()], return_exceptions=True)]
        assert kinds == ["safe", "unsafe"]
        assert agent.check(LISTED_URL.encode()).is_unsafe
        with pytest.raises(TypeError, match="not one URL"):
            agent.check_many(LISTED_URL.encode())
        assert agent.check_many(iter([])) == []
        # One URL is not an iterable of URLs (its characters).
        with pytest.raises(TypeError, match="not one URL"):
            agent.check_many(LISTED_URL)

        with pytest.raises(blocksieve.InvalidUrlError, match="mailto:someone@example.com"):
            agent.check("mailto:someone@example.com")
        with pytest.raises(blocksieve.InvalidUrlError, match='"http://"'):
            agent.check_many([LISTED_URL, "http://"])

        again = agent.update()
        assert again.get("phishing").outcome == "unchanged"
        assert again.get("phishing").version == entry.version
        assert again.get("other") is None


def test_a_forked_child_gets_an_error_not_a_hang(publisher):
    """The runtime's threads do not survive fork(): a child that uses an
    agent made in its parent is told so at once."""
    import os

    with agent_for(publisher) as agent:
        agent.update()
        pid = os.fork()
        if pid == 0:
            code = 3
            try:
                agent.check(LISTED_URL)
            except blocksieve.BlocksieveError as err:
                code = 0 if "fork" in str(err) else 4
            except BaseException:
                code = 5
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert agent.check(LISTED_URL).is_unsafe  # the parent is unaffected


def test_a_forked_child_makes_agents_of_its_own(publisher):
    """A child of a process that has used agents (a pre-fork server's
    worker, a multiprocessing pool's) creates its own, blocking and asyncio,
    as the README advises; only its parent's agents are refused."""
    import os
    import signal

    with agent_for(publisher) as agent:
        agent.update()
        agent.start_updates()
        pid = os.fork()
        if pid == 0:
            signal.alarm(60)  # a hang ends the child by SIGALRM
            code = 3
            try:
                with pytest.raises(blocksieve.BlocksieveError, match="fork"):
                    agent.check(LISTED_URL)
                with agent_for(publisher) as own:
                    own.update()
                    assert own.check(LISTED_URL).is_unsafe
                    assert own.check(BENIGN_URL).is_safe

                async def main():
                    async with blocksieve.AsyncAgent(publisher.url, ["phishing"], publisher.key) as own:
                        await own.update()
                        return (await own.check(LISTED_URL)).is_unsafe

                assert asyncio.run(main())
                agent.close()  # the parent's agent: closed in the child without waiting
                code = 0
            except BaseException as err:  # reported through the exit code
                print(f"child: {type(err).__name__}: {err}", flush=True)
                code = 4
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert agent.check(LISTED_URL).is_unsafe  # the parent is unaffected
        assert agent.status().updates_running


def test_a_url_over_2_mib_is_invalid_whatever_its_host(publisher):
    """As the error table says: a listed host does not make an over-long URL
    checkable; it is InvalidUrlError (never to be read as safe), not a verdict."""
    with agent_for(publisher) as agent:
        agent.update()
        with pytest.raises(blocksieve.InvalidUrlError, match="maximum is 2097152"):
            agent.check(LISTED_URL + "?q=" + "a" * (2 << 20))


def test_status(publisher):
    with agent_for(publisher) as agent:
        version = agent.update().lists[0].version
        agent.check(LISTED_URL)
        agent.check(BENIGN_URL)
        status = agent.status()
        assert status.ready and not status.stale and not status.updates_running
        (phishing,) = status.lists
        assert status.list("phishing").name == phishing.name == "phishing"
        assert status.list("other") is None
        assert phishing.version == phishing.base_version == version
        assert phishing.source == "network"
        assert phishing.consecutive_failures == 0 and phishing.last_error is None
        now = datetime.datetime.now(datetime.timezone.utc)
        assert phishing.created_at <= now < phishing.expires_at
        assert phishing.last_success <= now
        assert isinstance(phishing.age, datetime.timedelta)
        assert status.stats["lookups"] == 2
        assert status.stats["confirmed_unsafe"] == 1
        assert agent.lists == ["phishing"]


def test_cache_dir_restart(publisher, tmp_path):
    cache = tmp_path / "cache"
    with agent_for(publisher, cache_dir=cache) as agent:
        version = agent.update().lists[0].version

    # Against a publisher that is gone: the cached snapshot answers at once.
    gone = closed_port_url()
    with blocksieve.Agent(gone, ["phishing"], publisher.key, cache_dir=str(cache), request_timeout=5) as agent:
        status = agent.status()
        assert status.ready
        assert status.lists[0].source == "cache"
        assert status.lists[0].version == version
        assert agent.check(BENIGN_URL).kind == "safe"
        # A filter hit needs full hashes, which cannot be had: unverified,
        # not blocked under the default fail-open policy.
        verdict = agent.check(LISTED_URL)
        assert verdict.kind == "unverified" and not verdict.block
        assert verdict.lists == ["phishing"] and verdict.reason

    with blocksieve.Agent(
        gone, ["phishing"], publisher.key, cache_dir=cache, failure_policy="closed", request_timeout=5
    ) as agent:
        verdict = agent.check(LISTED_URL)
        assert verdict.kind == "unverified" and verdict.block

    # And with the publisher back, the restarted agent confirms from the cache.
    with agent_for(publisher, cache_dir=cache) as agent:
        assert agent.check(LISTED_URL).kind == "unsafe"
        assert agent.update().lists[0].outcome == "unchanged"


def test_one_agent_per_cache_dir(publisher, tmp_path):
    cache = tmp_path / "cache"
    with agent_for(publisher, cache_dir=cache):
        with pytest.raises(blocksieve.MisconfiguredError, match="in use") as refused:
            agent_for(publisher, cache_dir=cache)
        assert str(cache) in str(refused.value)
        assert f"process {os.getpid()}" in str(refused.value)
        with pytest.raises(blocksieve.MisconfiguredError, match="in use"):
            blocksieve.AsyncAgent(publisher.url, ["phishing"], publisher.key, cache_dir=cache)
    # Closed, it holds the directory no more.
    with agent_for(publisher, cache_dir=cache) as again:
        assert not again.closed


HOLDER = """
import sys, time, blocksieve
agent = blocksieve.Agent(sys.argv[1], ["phishing"], sys.argv[2], cache_dir=sys.argv[3])
print("locked", flush=True)
time.sleep(60)
"""


def test_a_cache_dir_held_by_another_process_is_free_once_it_is_killed(publisher, tmp_path):
    cache = tmp_path / "cache"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, publisher.url, publisher.key, str(cache)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(blocksieve.MisconfiguredError, match=f"in use by another agent \\(process {holder.pid}\\)"):
            agent_for(publisher, cache_dir=cache)
    finally:
        holder.kill()  # SIGKILL: nothing of it runs after
        holder.wait()
        holder.stdout.close()
    with agent_for(publisher, cache_dir=cache) as agent:
        assert not agent.closed


def test_transport_error_before_any_snapshot(publisher):
    with blocksieve.Agent(closed_port_url(), ["phishing"], publisher.key, request_timeout=5) as agent:
        with pytest.raises(blocksieve.TransportError):
            agent.update()
        assert agent.status().lists[0].consecutive_failures == 1


@pytest.mark.parametrize(
    "change, message",
    [
        ({"key": "not a key"}, "key"),
        ({"lists": ["Phishing"]}, "Phishing"),
        ({"lists": []}, "list"),
        ({"publisher": "http://publisher.example"}, "http"),
        ({"failure_policy": "maybe"}, "maybe"),
        ({"request_timeout": -1.0}, "request_timeout must be a non-negative number of seconds, got -1"),
        ({"request_timeout": float("inf")}, "request_timeout must be a finite number of seconds under 2\\^64, got inf"),
        ({"update_interval": 1e300}, "update_interval must be a finite number of seconds under 2\\^64, got 1e300$"),
        ({"cache_dir": ""}, "the path is empty"),
    ],
)
def test_misconfigured(publisher, change, message):
    arguments = {"publisher": publisher.url, "lists": ["phishing"], "key": publisher.key}
    options = {k: v for k, v in change.items() if k not in arguments}
    arguments.update({k: v for k, v in change.items() if k in arguments})
    with pytest.raises(blocksieve.MisconfiguredError, match=message):
        blocksieve.Agent(arguments["publisher"], arguments["lists"], arguments["key"], **options)


def test_a_key_in_hex_is_read_as_in_base64(publisher):
    hex_key = base64.b64decode(publisher.key).hex()
    with blocksieve.Agent(publisher.url, ["phishing"], hex_key) as agent:
        agent.update()
        assert agent.check(LISTED_URL).is_unsafe


def test_background_updates_and_close(publisher):
    agent = agent_for(publisher)
    agent.update()
    agent.start_updates()
    assert agent.status().updates_running
    with pytest.raises(blocksieve.MisconfiguredError):
        agent.start_updates()
    agent.close()
    agent.close()
    assert agent.closed
    with pytest.raises(blocksieve.BlocksieveError, match="closed"):
        agent.check(LISTED_URL)
    with pytest.raises(blocksieve.BlocksieveError, match="closed"):
        agent.status()


def test_threads_share_one_agent(publisher):
    with agent_for(publisher) as agent:
        agent.update()
        urls = [LISTED_URL, BENIGN_URL] * 20
        with ThreadPoolExecutor(max_workers=8) as pool:
            kinds = list(pool.map(lambda url: agent.check(url).kind, urls))
        assert kinds == ["unsafe", "safe"] * 20


def test_blocking_calls_release_the_gil(publisher):
    # A Python thread keeps counting while the main thread waits on a
    # full-hash request that the publisher never answers (a listening
    # socket that accepts nothing).
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = "http://127.0.0.1:%d" % silent.getsockname()[1]
        counted = []
        stop = threading.Event()

        def count():
            while not stop.is_set():
                counted.append(1)

        thread = threading.Thread(target=count)
        thread.start()
        try:
            with blocksieve.Agent(url, ["phishing"], publisher.key, request_timeout=1, snapshot_timeout=1) as agent:
                with pytest.raises(blocksieve.TransportError):
                    agent.update()
        finally:
            stop.set()
            thread.join()
        assert len(counted) > 1000


def test_asyncio_agent(publisher, tmp_path):
    async def main():
        async with blocksieve.AsyncAgent(publisher.url, ["phishing"], publisher.key, cache_dir=tmp_path) as agent:
            with pytest.raises(blocksieve.NotReadyError):
                await agent.check(LISTED_URL)
            report = await agent.update()
            assert report.lists[0].outcome == "updated"
            verdicts = await asyncio.gather(*(agent.check(u) for u in [LISTED_URL, BENIGN_URL] * 10))
            assert [v.kind for v in verdicts] == ["unsafe", "safe"] * 10
            assert verdicts[0].expression == LISTED_EXPRESSION
            many = await agent.check_many([BENIGN_URL, LISTED_URL])
            assert [v.kind for v in many] == ["safe", "unsafe"]
            with pytest.raises(blocksieve.InvalidUrlError):
                await agent.check("mailto:someone@example.com")
            agent.start_updates()
            assert agent.status().updates_running
            assert agent.lists == ["phishing"]
        assert agent.closed
        with pytest.raises(blocksieve.BlocksieveError, match="closed"):
            await agent.check(LISTED_URL)

        agent = blocksieve.AsyncAgent(publisher.url, ["phishing"], publisher.key, cache_dir=tmp_path)
        assert agent.status().lists[0].source == "cache"
        assert (await agent.check(LISTED_URL)).is_unsafe
        await agent.close()

    asyncio.run(main())


def test_regression_a_surrogateescape_byte_is_that_byte_whatever_else_the_url_holds():
    # README: a lone surrogate that a `surrogateescape` decode made of a
    # byte is that byte again, any other is U+FFFD. A listed path
    # (`evil.example/caf%E9`) must not turn "safe" because another lone
    # surrogate elsewhere in the URL (a query parameter) changed how the
    # path's byte is read.
    path = b"http://evil.example/caf\xe9".decode("utf-8", "surrogateescape")
    assert "evil.example/caf%E9" in blocksieve.expressions(path)
    mixed = path + "?q=\ud83d"
    assert blocksieve.canonicalize(mixed) == "http://evil.example/caf%E9?q=%EF%BF%BD"
    assert "evil.example/caf%E9" in blocksieve.expressions(mixed)
    assert blocksieve.full_hashes(path)[0] in blocksieve.full_hashes(mixed)


def test_regression_a_listed_path_with_a_surrogateescape_byte_stays_unsafe_beside_another_surrogate(
    publisher_bin, tmp_path
):
    # The feed lists one path (not its host). The URL a host holds names it
    # with the byte as `surrogateescape` decoded it (os.fsdecode, sys.argv)
    # and carries any other lone surrogate in its query.
    from conftest import start_publisher

    feed = tmp_path / "feed.txt"
    feed.write_text("http://evil.example/caf%E9\n")
    running = start_publisher(publisher_bin, tmp_path / "pub", {"phishing": feed})
    try:
        with agent_for(running) as agent:
            agent.update()
            path = b"http://evil.example/caf\xe9".decode("utf-8", "surrogateescape")
            assert agent.check(path).is_unsafe
            verdict = agent.check(path + "?q=\ud83d")
            assert verdict.is_unsafe, f"{verdict!r} for a URL whose path is listed"
    finally:
        running.stop()


EXIT_WHILE_CHECKING = r"""
import asyncio, sys, threading, time
import blocksieve

agent = blocksieve.AsyncAgent("http://127.0.0.1:1", ["phishing"], sys.argv[1])


def churn():
    async def main():
        while True:
            urls = ("http://a.example/" for _ in range(500))
            await asyncio.gather(*(agent.check(u) for u in urls), return_exceptions=True)

    asyncio.run(main())


# An event loop on a thread of its own (a synchronous host that runs its
# async work there), checking URLs when the process exits.
threading.Thread(target=churn, daemon=True).start()
time.sleep(0.5)
print("exiting", flush=True)
"""


def test_regression_the_process_exits_cleanly_while_asyncio_checks_are_in_flight(tmp_path):
    # Awaitables complete on the binding's runtime threads, which attach to
    # the interpreter to hand over their results: one that does so while
    # the interpreter is finalizing crashed the process (SIGSEGV, or
    # "Fatal Python error: PyGILState_Release") at its exit.
    script = tmp_path / "exit_while_checking.py"
    script.write_text(EXIT_WHILE_CHECKING)
    key = "nWvOekJdEzTQcC5NcsI44gNmSxPCHZaVCyu8MbimuOA="
    for _ in range(5):
        run = subprocess.run([sys.executable, str(script), key], capture_output=True, text=True, timeout=60)
        assert (run.returncode, run.stdout) == (0, "exiting\n"), run.stderr[-2000:]
