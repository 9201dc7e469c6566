"""Safe-Browsing-style URL checks against a blocksieve publisher.

The agent keeps a verified (Ed25519-signed) snapshot of each subscribed
threat list's filter over 32-bit hash prefixes, checks URLs locally, and
confirms every hash prefix hit with the publisher's full hashes: a prefix
hit alone is never reported unsafe. Only short hash prefixes reach the
publisher.
"""

import builtins
import os
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import Literal, Optional, Union, overload

__version__: str

VerdictKind = Literal["safe", "unsafe", "unverified"]

class BlocksieveError(Exception):
    """Base class of every error the agent raises."""

class BadDataError(BlocksieveError):
    """The publisher sent malformed, forged, rolled-back or oversized data;
    the current filter was kept."""

class TransportError(BlocksieveError):
    """A request to the publisher failed or got an HTTP error; retry later."""

class NotReadyError(BlocksieveError):
    """A threat list has no snapshot yet (and the others do not confirm the URL unsafe); run ``update()`` first."""

class InvalidUrlError(BlocksieveError):
    """The URL cannot be canonicalized (it names no host, or is over 2 MiB); neither safe nor unsafe."""

class StorageError(BlocksieveError):
    """The cache directory failed; the agent keeps working from memory."""

class MisconfiguredError(BlocksieveError):
    """The agent's settings are invalid, or its cache directory is in use by another agent; fail at start."""

class Verdict:
    """The answer of a URL check (immutable)."""

    @property
    def kind(self) -> VerdictKind:
        """``"safe"``, ``"unsafe"`` or ``"unverified"``."""
    @property
    def list(self) -> Optional[str]:
        """The threat list of an unsafe URL, else ``None``."""
    @property
    def expression(self) -> Optional[str]:
        """The matching expression of an unsafe URL, e.g. ``"evil.example/"``."""
    @property
    def full_hash(self) -> Optional[str]:
        """The SHA-256 full hash of that expression, 64 lowercase hex digits."""
    @property
    def lists(self) -> builtins.list[str]:
        """The threat lists whose filters hit (unsafe: its list; unverified:
        the unconfirmed ones; safe: none)."""
    @property
    def reason(self) -> Optional[str]:
        """Why an unverified URL could not be confirmed, else ``None``."""
    @property
    def stale(self) -> bool:
        """Whether a snapshot used had expired."""
    @property
    def block(self) -> bool:
        """Whether to block: unsafe, or unverified under ``failure_policy="closed"``."""
    @property
    def is_unsafe(self) -> bool: ...
    @property
    def is_safe(self) -> bool: ...
    @property
    def is_unverified(self) -> bool: ...

class ListUpdate:
    """What one update round did to one threat list."""

    @property
    def list(self) -> str: ...
    @property
    def outcome(self) -> Literal["updated", "unchanged", "failed"]: ...
    @property
    def version(self) -> Optional[int]:
        """The snapshot version in use after the round, or ``None``."""
    @property
    def previous(self) -> Optional[int]:
        """The version an update replaced, or ``None``."""
    @property
    def error(self) -> Optional[str]: ...
    @property
    def error_kind(self) -> Optional[str]:
        """``"bad_data"``, ``"transport"``, ``"storage"``, ... or ``None``."""

class UpdateReport:
    """What ``update()`` did: one entry per threat list, in subscription order."""

    @property
    def lists(self) -> builtins.list[ListUpdate]: ...
    @property
    def complete(self) -> bool:
        """Whether no threat list failed to update."""
    def get(self, list: str) -> Optional[ListUpdate]: ...

class ListStatus:
    """The state of one subscribed threat list."""

    @property
    def name(self) -> str: ...
    @property
    def version(self) -> Optional[int]: ...
    @property
    def base_version(self) -> Optional[int]: ...
    @property
    def additions(self) -> int:
        """32-bit hash prefixes added by deltas since the base snapshot."""
    @property
    def created_at(self) -> Optional[datetime]:
        """When the base snapshot was built (UTC)."""
    @property
    def expires_at(self) -> Optional[datetime]:
        """Until when the state is fresh (UTC)."""
    @property
    def age(self) -> Optional[timedelta]: ...
    @property
    def stale(self) -> bool: ...
    @property
    def source(self) -> Optional[Literal["network", "cache"]]: ...
    @property
    def version_floor(self) -> Optional[int]: ...
    @property
    def last_success(self) -> Optional[datetime]: ...
    @property
    def last_error(self) -> Optional[str]: ...
    @property
    def consecutive_failures(self) -> int: ...
    @property
    def last_storage_error(self) -> Optional[str]: ...

class Status:
    """The agent's health, as of the call."""

    @property
    def lists(self) -> builtins.list[ListStatus]: ...
    @property
    def ready(self) -> bool:
        """Whether every threat list has a snapshot."""
    @property
    def stale(self) -> bool:
        """Whether any snapshot in use has expired."""
    @property
    def updates_running(self) -> bool: ...
    @property
    def full_hash_paused_for(self) -> Optional[timedelta]:
        """How long full-hash requests stay paused after failures (backoff)."""
    @property
    def stats(self) -> dict[str, int]:
        """Counters: lookups, prefix_hits, full_hash_requests,
        full_hash_failures, cache_hits, confirmed_unsafe, false_prefix_hits,
        unverified."""
    def list(self, name: str) -> Optional[ListStatus]: ...

class Agent:
    """A blocking agent. Every call releases the GIL while it waits; one
    agent may be shared by any number of threads."""

    def __init__(
        self,
        publisher: str,
        lists: Sequence[str],
        key: Union[str, Sequence[str]],
        *,
        cache_dir: Union[str, os.PathLike[str], None] = None,
        failure_policy: Literal["open", "closed"] = "open",
        mirrors: Sequence[str] = (),
        request_timeout: Optional[float] = None,
        snapshot_timeout: Optional[float] = None,
        update_interval: Optional[float] = None,
        full_hash_cache_bytes: Optional[int] = None,
        user_agent: Optional[str] = None,
    ) -> None:
        """Configures an agent; no request is sent.

        Raises ``MisconfiguredError`` for an invalid publisher URL, threat
        list name, key, policy or limit, or a ``cache_dir`` that another
        agent holds (one agent per directory, until it is closed or its
        process ends).
        """
    def update(self) -> UpdateReport:
        """Brings every threat list up to date now.

        Raises the error of a list that still has no snapshot afterwards
        (``TransportError``, ``BadDataError``, ...).
        """
    def check(self, url: Union[str, bytes]) -> Verdict:
        """Checks one URL. Raises ``InvalidUrlError``, ``NotReadyError``.

        A ``str`` is read as it is, a character a ``surrogateescape``
        decode made of a byte that is not UTF-8 as that byte, any other
        lone surrogate as U+FFFD (as a browser reads it); ``bytes`` as the
        C API reads them. Each byte that is not UTF-8 is percent-escaped, as
        the canonicalizer escapes a raw byte (``caf\\xe9`` is ``caf%E9``)."""
    @overload
    def check_many(self, urls: Iterable[Union[str, bytes]], return_exceptions: Literal[False] = False) -> builtins.list[Verdict]:
        """Checks URLs together, answering in order. Raises the first URL's
        error, if any; with ``return_exceptions=True`` each URL's error is
        its item in the list instead (as with ``asyncio.gather``), so that
        a URL confirmed unsafe is answered while another is, e.g., a
        ``NotReadyError`` because a list has no snapshot yet."""
    @overload
    def check_many(
        self, urls: Iterable[Union[str, bytes]], return_exceptions: Literal[True]
    ) -> builtins.list[Union[Verdict, BlocksieveError]]: ...
    def status(self) -> Status: ...
    def start_updates(self) -> None:
        """Starts the background updates. Raises ``MisconfiguredError`` if
        already running."""
    def close(self) -> None:
        """Stops the background updates and closes the agent (idempotent); its
        ``cache_dir`` is free for another agent once no call of it is still
        running."""
    @property
    def lists(self) -> builtins.list[str]: ...
    @property
    def closed(self) -> bool: ...
    def __enter__(self) -> "Agent": ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

class AsyncAgent:
    """The asyncio agent: the same agent, with awaitable network calls."""

    def __init__(
        self,
        publisher: str,
        lists: Sequence[str],
        key: Union[str, Sequence[str]],
        *,
        cache_dir: Union[str, os.PathLike[str], None] = None,
        failure_policy: Literal["open", "closed"] = "open",
        mirrors: Sequence[str] = (),
        request_timeout: Optional[float] = None,
        snapshot_timeout: Optional[float] = None,
        update_interval: Optional[float] = None,
        full_hash_cache_bytes: Optional[int] = None,
        user_agent: Optional[str] = None,
    ) -> None: ...
    async def update(self) -> UpdateReport: ...
    async def check(self, url: Union[str, bytes]) -> Verdict: ...
    @overload
    async def check_many(
        self, urls: Iterable[Union[str, bytes]], return_exceptions: Literal[False] = False
    ) -> builtins.list[Verdict]: ...
    @overload
    async def check_many(
        self, urls: Iterable[Union[str, bytes]], return_exceptions: Literal[True]
    ) -> builtins.list[Union[Verdict, BlocksieveError]]: ...
    def status(self) -> Status: ...
    def start_updates(self) -> None: ...
    async def close(self) -> None: ...
    @property
    def lists(self) -> builtins.list[str]: ...
    @property
    def closed(self) -> bool: ...
    async def __aenter__(self) -> "AsyncAgent": ...
    async def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

def canonicalize(url: Union[str, bytes]) -> str:
    """The Safe Browsing canonical URL. Raises ``InvalidUrlError``. The URL
    is read as ``Agent.check`` reads it."""

def expressions(url: Union[str, bytes]) -> builtins.list[str]:
    """The host-suffix/path-prefix expressions, exact URL first. Raises
    ``InvalidUrlError``."""

def full_hashes(url: Union[str, bytes]) -> builtins.list[str]:
    """The SHA-256 full hash (hex) of each expression, in expression order.
    Raises ``InvalidUrlError``."""
