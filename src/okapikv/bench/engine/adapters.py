"""The systems a benchmark drives, behind one small async interface.

The load generator, concurrency and measurement are identical for every system; only how an
operation is sent differs. That is what makes the Redis reference line (the course suite) a fair
comparison: same keys, same mix, same closed loop, same number of sessions per process.

- ``okapi``: ``okapikv.client.AsyncClient``, one root client per DC (clients are collocated with
  a DC, as in the paper), one ``fork()``-ed causal session per benchmark client, all sharing the
  root's pipelined connections.
- ``redis``: redis-py's asyncio client against a local redis-server. Redis has no ordered range
  over plain keys, so SCAN uses a lexicographic sorted-set index maintained on insert
  (ZRANGE BYLEX + MGET), the standard Redis idiom; SWAP is ``SET key value GET``.
- ``memory``: an in-process dict, no network: the ceiling of the load generator itself (what the
  driver costs per operation), useful to tell a slow store from a slow benchmark.

Targets are described by a frozen, picklable ``TargetSpec`` because they are built inside the
spawned load processes (connections cannot cross a process boundary).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
from abc import ABC, abstractmethod
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Protocol

REDIS_INDEX_KEY = b"okapi:bench:index"


@dataclass(frozen=True, slots=True)
class TargetSpec:
    """Which system to drive: ``kind`` and, per DC, the address of a server to connect to."""

    kind: str  # okapi | redis | memory | lean (okapi, driven by okapikv.bench.engine.lean)
    addresses: tuple[str, ...] = ()
    timeout_s: float = 10.0
    native: bool = True  # okapi: pipeline over the servers' native ports (False: gRPC streams)
    coordinator: str = "session"  # okapi: who coordinates RO-TX and SCAN (client.policy.COORDINATORS)

    @property
    def num_dcs(self) -> int:
        return max(1, len(self.addresses))


class BenchSession(Protocol):
    """What a benchmark session can do. Results are only what the driver needs (a read's value);
    writes may return anything (the driver ignores it), so an adapter can hand back the client's
    own coroutine instead of wrapping it in one more."""

    def get(self, key: bytes) -> Awaitable[bytes | None]: ...

    def put(self, key: bytes, value: bytes) -> Awaitable[object]: ...

    def swap(self, key: bytes, value: bytes) -> Awaitable[object]: ...

    async def scan(self, start: bytes, end: bytes, limit: int) -> int: ...

    def read_tx(self, keys: tuple[bytes, ...]) -> Awaitable[object]: ...

    def incr(self, key: bytes) -> Awaitable[object]: ...

    def put_ttl(self, key: bytes, value: bytes, ttl_ms: int) -> Awaitable[object]: ...


class Target(ABC):
    """A connected system: hands out sessions, one per benchmark client."""

    @abstractmethod
    async def open(self) -> None: ...

    @abstractmethod
    def session(self, index: int) -> BenchSession:
        """A fresh session; ``index`` picks its DC (round-robin over DCs)."""

    @abstractmethod
    async def close(self) -> None: ...


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


# ---------------------------------------------------------------------------------------- okapi


class _OkapiSession:
    """Adapts an ``AsyncClient`` session to ``BenchSession``: the client's own coroutines, except
    SCAN (the driver wants the count)."""

    __slots__ = ("client", "get", "incr", "put", "swap")

    def __init__(self, client: Any) -> None:
        self.client = client
        self.get = client.get
        self.put = client.put
        self.swap = client.swap
        self.incr = client.incr

    def put_ttl(self, key: bytes, value: bytes, ttl_ms: int) -> Awaitable[object]:
        return self.client.put(key, value, ttl=ttl_ms / 1000)  # type: ignore[no-any-return]

    async def scan(self, start: bytes, end: bytes, limit: int) -> int:
        return len(await self.client.scan(start, end, limit))

    def read_tx(self, keys: tuple[bytes, ...]) -> Awaitable[object]:
        return self.client.read_tx(list(keys))  # type: ignore[no-any-return]


class OkapiTarget(Target):
    def __init__(self, spec: TargetSpec) -> None:
        self.spec = spec
        self.roots: list[Any] = []

    async def open(self) -> None:
        from okapikv.client import AsyncClient

        for address in self.spec.addresses:
            client = AsyncClient(address, timeout_s=self.spec.timeout_s, native=self.spec.native,
                                 coordinator=self.spec.coordinator)
            connect = getattr(client, "connect", None)
            if connect is not None:
                await _maybe_await(connect())
            self.roots.append(client)

    def session(self, index: int) -> BenchSession:
        return _OkapiSession(self.roots[index % len(self.roots)].fork())

    async def close(self) -> None:
        for client in self.roots:
            await _maybe_await(client.close())
        self.roots.clear()


# ---------------------------------------------------------------------------------------- redis


class _RedisSession:
    __slots__ = ("redis",)

    def __init__(self, redis: Any) -> None:
        self.redis = redis

    async def get(self, key: bytes) -> bytes | None:
        value: bytes | None = await self.redis.get(key)
        return value

    async def put(self, key: bytes, value: bytes) -> None:
        # A new key must also enter the scan index; one pipelined round trip for both.
        pipe = self.redis.pipeline(transaction=False)
        pipe.set(key, value)
        pipe.zadd(REDIS_INDEX_KEY, {key: 0})
        await pipe.execute()

    async def put_ttl(self, key: bytes, value: bytes, ttl_ms: int) -> None:
        pipe = self.redis.pipeline(transaction=False)
        pipe.set(key, value, px=ttl_ms)
        pipe.zadd(REDIS_INDEX_KEY, {key: 0})
        await pipe.execute()

    async def incr(self, key: bytes) -> None:
        await self.redis.incr(key)

    async def swap(self, key: bytes, value: bytes) -> None:
        await self.redis.set(key, value, get=True)

    async def scan(self, start: bytes, end: bytes, limit: int) -> int:
        keys = await self.redis.zrange(
            REDIS_INDEX_KEY, b"[" + start, b"[" + end, bylex=True, offset=0, num=limit
        )
        if not keys:
            return 0
        values = await self.redis.mget(keys)
        return len(values)

    async def read_tx(self, keys: tuple[bytes, ...]) -> None:
        await self.redis.mget(list(keys))


class RedisTarget(Target):
    """One connection per session (``single_connection_client``), opened before the run starts.

    RESP has no multiplexing, so "many concurrent clients" means many connections. A shared pool
    was tried first: redis-py's asyncio pools hand connections out through a lock and condition
    whose wake-ups stalled sessions for hundreds of milliseconds, which measured redis-py rather
    than Redis.
    """

    def __init__(self, spec: TargetSpec, sessions: int) -> None:
        self.spec = spec
        self.sessions = max(1, sessions)
        self.clients: list[Any] = []

    async def open(self) -> None:
        # Imported by name: redis-py is an optional extra (``bench``) without type stubs here.
        redis_asyncio: Any = importlib.import_module("redis.asyncio")

        host, _, port = self.spec.addresses[0].rpartition(":")
        self.clients = [
            redis_asyncio.Redis(host=host, port=int(port), single_connection_client=True,
                                socket_timeout=self.spec.timeout_s, socket_connect_timeout=self.spec.timeout_s)
            for _ in range(self.sessions)
        ]
        # Connect every session now, so connection set-up is not measured.
        await asyncio.gather(*(client.ping() for client in self.clients))

    def session(self, index: int) -> BenchSession:
        return _RedisSession(self.clients[index % len(self.clients)])

    async def close(self) -> None:
        clients, self.clients = self.clients, []
        for client in clients:
            with contextlib.suppress(Exception):
                await client.aclose()


# ---------------------------------------------------------------------------------------- memory


class _MemorySession:
    __slots__ = ("store",)

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    async def get(self, key: bytes) -> bytes | None:
        await asyncio.sleep(0)
        return self.store.data.get(key)

    async def put(self, key: bytes, value: bytes) -> None:
        await asyncio.sleep(0)
        if key not in self.store.data:
            self.store.keys.add(key)
        self.store.data[key] = value

    async def swap(self, key: bytes, value: bytes) -> None:
        await self.put(key, value)

    async def put_ttl(self, key: bytes, value: bytes, ttl_ms: int) -> None:
        await self.put(key, value)  # a ceiling for the store's work: the expiry itself is not kept

    async def incr(self, key: bytes) -> None:
        await asyncio.sleep(0)
        self.store.counts[key] = self.store.counts.get(key, 0) + 1

    async def scan(self, start: bytes, end: bytes, limit: int) -> int:
        await asyncio.sleep(0)
        keys = self.store.keys
        found = 0
        for _key in keys.irange(start, end):
            if found >= limit:
                break
            found += 1
        return found

    async def read_tx(self, keys: tuple[bytes, ...]) -> None:
        await asyncio.sleep(0)
        for key in keys:
            self.store.data.get(key)


class MemoryStore:
    def __init__(self) -> None:
        from sortedcontainers import SortedSet

        self.data: dict[bytes, bytes] = {}
        self.counts: dict[bytes, int] = {}
        self.keys = SortedSet()


class MemoryTarget(Target):
    """Per-process store: with several load processes each sees its own copy (fine for a ceiling)."""

    def __init__(self) -> None:
        self.store = MemoryStore()

    async def open(self) -> None:
        return None

    def session(self, index: int) -> BenchSession:
        return _MemorySession(self.store)

    async def close(self) -> None:
        return None


def build_target(spec: TargetSpec, sessions: int) -> Target:
    if spec.kind == "okapi":
        return OkapiTarget(spec)
    if spec.kind == "redis":
        return RedisTarget(spec, sessions)
    if spec.kind == "memory":
        return MemoryTarget()
    raise ValueError(f"unknown benchmark target {spec.kind!r}")
