"""The Redis commands the RESP port serves, what each one is in okapikv, and those it refuses.

``COMMANDS`` is the table (name, arity in Redis's convention: n exact, -n at least n; flags; key
positions; the okapikv operation and its causal meaning, which ``COMMAND DOCS`` serves as each
command's summary). ``REFUSED`` names every Redis command the port recognises but cannot honour,
with the reason, answered as ``-ERR <NAME> is not supported: <reason>``: a command okapikv cannot
give Redis's meaning is never approximated. The README's command table is this module's content.

``Executor`` runs one connection's commands in order (``okapikv.resp.operations`` says why in order)
and keeps the connection's state: the protocol version (``HELLO``), the client's name and library,
and a ``MULTI`` block being queued. A ``MULTI ... EXEC`` block may hold only reads of keys (GET,
MGET, EXISTS): EXEC runs all of them as one read-only transaction, one causal snapshot of the DC.
A queued write is refused at once and the block then fails at EXEC with ``EXECABORT``, as Redis
aborts a block with a queueing error.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from okapikv import __version__
from okapikv.resp import replies
from okapikv.resp.counter_commands import COUNTER_COMMANDS, COUNTER_SUMMARY, NO_FLOAT, CounterCommands
from okapikv.resp.cursors import CursorTable
from okapikv.resp.expiry_commands import EXPIRY_COMMANDS, ExpiryCommands, parse_set_options
from okapikv.resp.glob import compile_pattern
from okapikv.resp.operations import CommandError, SessionOperations
from okapikv.resp.replies import Simple, Value
from okapikv.resp.tokens import TokenError, decode_token

#: the Redis protocol level the port speaks (HELLO 3, RESP3): what ``HELLO`` and ``INFO`` report
#: as the version, for client libraries that enable features by it
REDIS_COMPATIBLE_VERSION = "7.2.0"
#: SCAN ... COUNT: default and largest (each SCAN call is one snapshot read of that many keys)
SCAN_DEFAULT_COUNT = 10
SCAN_MAX_COUNT = 1_000
#: KEYS and OKAPI.RANGE without LIMIT read at most this many keys (else an error says to page)
KEYS_LIMIT = 10_000
DBSIZE_PAGE = 1_000


@dataclass(frozen=True, slots=True)
class Spec:
    name: str
    arity: int
    flags: tuple[str, ...]
    first_key: int
    last_key: int
    step: int
    group: str
    since: str
    #: the okapikv operation and its causal meaning (COMMAND DOCS, README)
    summary: str
    in_multi: bool = False


def _spec(name: str, arity: int, flags: str, keys: tuple[int, int, int], group: str, since: str, summary: str,
          in_multi: bool = False) -> Spec:
    return Spec(name, arity, tuple(flags.split()), *keys, group, since, summary, in_multi)


_NO_KEYS = (0, 0, 0)
COMMANDS: dict[bytes, Spec] = {spec.name.upper().encode(): spec for spec in (
    _spec("get", 2, "readonly fast", (1, 1, 1), "string", "1.0.0",
          "GET at the key's server: the newest version visible to the session (its own writes included)",
          in_multi=True),
    _spec("set", -3, "write denyoom", (1, 1, 1), "string", "1.0.0",
          "PUT (with GET: SWAP, the old value): a causal write after everything the session saw"),
    _spec("getset", 3, "write denyoom fast", (1, 1, 1), "string", "1.0.0",
          "SWAP: writes the value and returns the one it replaced, atomically at the key's server"),
    _spec("del", -2, "write", (1, -1, 1), "keyspace", "1.0.0",
          "DELETE of each key in order (a tombstone per key; not atomic across keys)"),
    _spec("exists", -2, "readonly fast", (1, -1, 1), "keyspace", "3.0.3",
          "one key: GET; several: one RO-TX (one causal snapshot); counts present keys", in_multi=True),
    _spec("mget", -2, "readonly fast", (1, -1, 1), "string", "1.0.0",
          "one RO-TX: all values from one causal snapshot of the DC", in_multi=True),
    _spec("scan", -2, "readonly", _NO_KEYS, "keyspace", "2.8.0",
          "SCAN of up to COUNT keys after the cursor (one snapshot per call); the cursor encodes the last key"),
    _spec("keys", 2, "readonly", _NO_KEYS, "keyspace", "1.0.0",
          f"one SCAN snapshot of the pattern's prefix range, at most {KEYS_LIMIT} keys"),
    _spec("okapi.range", -3, "readonly", _NO_KEYS, "okapi", "0.1.0",
          "OKAPI.RANGE start end [LIMIT n]: SCAN, the keys start <= k <= end and values from one causal snapshot"),
    _spec("okapi.session", -1, "fast", _NO_KEYS, "okapi", "0.1.0",
          "OKAPI.SESSION [token]: export the connection's causal session as a token, or adopt one"),
    _spec("multi", 1, "fast", _NO_KEYS, "transactions", "1.2.0",
          "starts a block of reads (GET, MGET, EXISTS) that EXEC runs as one RO-TX"),
    _spec("exec", 1, "", _NO_KEYS, "transactions", "1.2.0",
          "one RO-TX over every key of the block: one causal snapshot"),
    _spec("discard", 1, "fast", _NO_KEYS, "transactions", "2.0.0", "drops the queued block"),
    _spec("ping", -1, "fast", _NO_KEYS, "connection", "1.0.0", "no operation"),
    _spec("echo", 2, "fast", _NO_KEYS, "connection", "1.0.0", "no operation"),
    _spec("select", 2, "fast", _NO_KEYS, "connection", "2.0.0", "database 0 only: okapikv has one key space"),
    _spec("quit", -1, "fast", _NO_KEYS, "connection", "1.0.0", "closes the connection (its session ends)"),
    _spec("hello", -1, "fast", _NO_KEYS, "connection", "6.0.0", "HELLO 2 or 3: RESP2 or RESP3 replies"),
    _spec("client", -2, "", _NO_KEYS, "connection", "2.4.0", "CLIENT SETNAME / GETNAME / SETINFO / ID / INFO"),
    _spec("command", -1, "", _NO_KEYS, "server", "2.8.13", "COMMAND / COMMAND COUNT / DOCS / INFO / LIST"),
    _spec("info", -1, "", _NO_KEYS, "server", "1.0.0",
          "server, clients and replication sections: okapikv's DC, protocol and stable-vector lag per DC"),
    _spec("dbsize", 1, "readonly", _NO_KEYS, "server", "1.0.0",
          f"keys with a value, counted by SCAN pages of {DBSIZE_PAGE} (each page one snapshot)"),
    _spec("config", -2, "", _NO_KEYS, "server", "2.0.0",
          "CONFIG GET of what clients probe (save, appendonly, databases, ...); read-only"),
    *(_spec(name, arity, "write denyoom fast", (1, 1, 1), "string", "1.0.0", COUNTER_SUMMARY)
      for name, arity, _, _ in COUNTER_COMMANDS),
    *(_spec(name, arity, "write fast" if name not in ("ttl", "pttl") else "readonly fast", (1, 1, 1),
            "keyspace" if name != "getex" and not name.endswith("setex") else "string", "2.0.0", summary)
      for name, arity, summary in EXPIRY_COMMANDS),
)}

_KEEPTTL = "a SET writes the value and its expiry together (one version); give the expiry again"
_EXPIRE_TIME = "okapikv reports the time left (TTL, PTTL), which its key's server's clock decides"
_NO_MULTI_KEY_WRITE = "okapikv has no atomic multi-key writes; send one SET or DEL per key"
_NO_CONDITIONAL = ("okapikv has no conditional writes: an always-available, replicated write cannot check a "
                   "condition that another DC may be changing at the same time")
_NO_READ_MODIFY_WRITE = ("okapikv has no read-modify-write but SWAP and counters: edits made concurrently in "
                         "two DCs would be lost under last-writer-wins")
_NO_FLUSH = "a flush is not one causal operation; DEL the keys"
_NO_PUBSUB = "okapikv has no publish/subscribe"
_DURABLE = "durability is the cluster's data directory (every write is committed before it is acknowledged)"
REFUSED: dict[bytes, str] = {
    b"MSET": _NO_MULTI_KEY_WRITE, b"MSETNX": _NO_MULTI_KEY_WRITE, b"RENAME": _NO_MULTI_KEY_WRITE,
    b"RENAMENX": _NO_MULTI_KEY_WRITE, b"COPY": _NO_MULTI_KEY_WRITE,
    b"SETNX": _NO_CONDITIONAL,
    b"INCRBYFLOAT": NO_FLOAT, b"APPEND": _NO_READ_MODIFY_WRITE, b"SETRANGE": _NO_READ_MODIFY_WRITE,
    b"GETDEL": _NO_READ_MODIFY_WRITE,
    b"EXPIRETIME": _EXPIRE_TIME, b"PEXPIRETIME": _EXPIRE_TIME,
    b"WATCH": ("optimistic transactions need one global order of writes, which a causally consistent store "
               "does not have; MULTI ... EXEC of reads is one causal snapshot"),
    b"UNWATCH": "WATCH is not supported",
    b"FLUSHDB": _NO_FLUSH, b"FLUSHALL": _NO_FLUSH,
    b"AUTH": ("the RESP port has no passwords; with a [tls] section in the cluster config it speaks TLS and "
              "demands client certificates when client_auth is on"),
    b"SUBSCRIBE": _NO_PUBSUB, b"PSUBSCRIBE": _NO_PUBSUB, b"PUBLISH": _NO_PUBSUB,
    b"SAVE": _DURABLE, b"BGSAVE": _DURABLE,
}
#: SET's options okapikv cannot honour, with the reason
SET_REFUSED: dict[bytes, str] = {b"NX": _NO_CONDITIONAL, b"XX": _NO_CONDITIONAL, b"KEEPTTL": _KEEPTTL}
EXECABORT = replies.error("EXECABORT Transaction discarded because of previous errors.")


@dataclass(frozen=True, slots=True)
class ServerFacts:
    """What INFO, HELLO and CONFIG GET report about the server (``okapikv.resp.service``)."""

    dc: int
    dc_names: tuple[str, ...]
    partition: int
    partitions: int
    protocol: str
    cluster_id: str
    port: int
    durable: bool
    max_bulk_bytes: int
    max_key_bytes: int
    started_at: float


class Executor(CounterCommands, ExpiryCommands):
    """Runs one connection's commands (module docstring). ``execute`` returns the encoded reply;
    ``closing`` turns true after QUIT."""

    def __init__(self, operations: SessionOperations, facts: ServerFacts, connection_id: int, peer: str,
                 local: str, *, stable_lag_ms: Callable[[], list[float | None]],
                 connected_clients: Callable[[], int], adopt_wait_s: float, max_key_bytes: int,
                 max_read_keys: int, cursors: CursorTable) -> None:
        self.operations = operations
        self.facts = facts
        self.id = connection_id
        self.peer = peer
        self.local = local
        self.resp3 = False
        self.name = b""
        self.library = (b"", b"")
        self.closing = False
        self._block: list[list[bytes]] | None = None
        self._block_failed = False
        self._block_keys = 0
        self._stable_lag_ms = stable_lag_ms
        self._connected_clients = connected_clients
        self._adopt_wait_s = adopt_wait_s
        self._max_key = b"\xff" * max_key_bytes
        self._max_key_bytes = max_key_bytes
        self._max_read_keys = max_read_keys
        self._cursors = cursors
        self._handlers: dict[bytes, Callable[[list[bytes]], Awaitable[bytes]]] = {
            name: getattr(self, "_" + spec.name.replace(".", "_")) for name, spec in COMMANDS.items()
        }

    @property
    def in_block(self) -> bool:
        """A MULTI block is being queued: every command goes to ``execute`` (``okapikv.resp.direct``)."""
        return self._block is not None

    async def execute(self, args: list[bytes]) -> bytes:
        name = args[0].upper()
        if self._block is not None and name not in (b"EXEC", b"DISCARD", b"QUIT"):
            return self._enqueue(name, args)
        spec = COMMANDS.get(name)
        if spec is None:
            return self._unknown(name, args)
        if not _arity_ok(spec.arity, len(args)):
            return replies.error(f"ERR wrong number of arguments for '{spec.name}' command")
        try:
            return await self._handlers[name](args)
        except CommandError as error:
            return replies.error(str(error))

    # ------------------------------------------------------------------ keys

    async def _get(self, args: list[bytes]) -> bytes:
        return replies.bulk_or_null(await self.operations.get(args[1]), self.resp3)

    async def _set(self, args: list[bytes]) -> bytes:
        parsed = parse_set_options(args[3:], SET_REFUSED)
        if isinstance(parsed, bytes):
            return parsed
        swap, expiry = parsed
        if swap and expiry is not None:
            return replies.error("ERR SET GET with an expiry is not supported: use SET with the expiry, then GET")
        if swap:
            return replies.bulk_or_null(await self.operations.swap(args[1], args[2]), self.resp3)
        await self.operations.put(args[1], args[2], expiry)
        return replies.OK

    async def _getset(self, args: list[bytes]) -> bytes:
        return replies.bulk_or_null(await self.operations.swap(args[1], args[2]), self.resp3)

    async def _del(self, args: list[bytes]) -> bytes:
        found = 0
        for key in args[1:]:
            found += await self.operations.delete(key)
        return replies.integer(found)

    async def _exists(self, args: list[bytes]) -> bytes:
        keys = args[1:]
        if len(keys) == 1:
            return replies.ONE if await self.operations.get(keys[0]) is not None else replies.ZERO
        values = await self._snapshot(keys)
        return replies.integer(sum(values[key] is not None for key in keys))

    async def _mget(self, args: list[bytes]) -> bytes:
        values = await self._snapshot(args[1:])
        return replies.bulk_array((values[key] for key in args[1:]), self.resp3)

    async def _snapshot(self, keys: list[bytes]) -> dict[bytes, bytes | None]:
        unique = list(dict.fromkeys(keys))
        return dict(zip(unique, await self.operations.read_tx(unique), strict=True))

    # ------------------------------------------------------------------ ranges

    async def _scan(self, args: list[bytes]) -> bytes:
        start = self._cursors.decode(args[1])
        if start is None:
            return replies.error("ERR invalid cursor")
        if isinstance(start, str):
            return replies.error(f"ERR {start}")
        count, pattern, type_name = SCAN_DEFAULT_COUNT, None, None
        options = args[2:]
        if len(options) % 2:
            return replies.error("ERR syntax error")
        for option, value in zip(options[::2], options[1::2], strict=True):
            upper = option.upper()
            if upper == b"COUNT":
                parsed = _integer(value)
                if parsed is None:
                    return replies.error("ERR value is not an integer or out of range")
                if parsed < 1:
                    return replies.error("ERR syntax error")
                count = min(parsed, SCAN_MAX_COUNT)
            elif upper == b"MATCH":
                pattern = compile_pattern(value)
            elif upper == b"TYPE":
                type_name = value.lower()
            else:
                return replies.error("ERR syntax error")
        end = self._max_key
        if pattern is not None and pattern.prefix:
            start = max(start, pattern.prefix)
            end = pattern.prefix + b"\xff" * (self._max_key_bytes - len(pattern.prefix))
        items = await self.operations.scan(start, end, count)
        cursor = b"0" if len(items) < count else self._cursors.encode(items[-1][0])
        keys = [key for key, _ in items if pattern is None or pattern.matches(key)]
        if type_name is not None and type_name != b"string":
            keys = []  # every okapikv value is a string
        return replies.array([replies.bulk(cursor), replies.bulk_array(keys, self.resp3)])

    async def _keys(self, args: list[bytes]) -> bytes:
        pattern = compile_pattern(args[1])
        start, end = pattern.prefix, pattern.prefix + b"\xff" * (self._max_key_bytes - len(pattern.prefix))
        items = await self.operations.scan(start, end, KEYS_LIMIT + 1)
        if len(items) > KEYS_LIMIT:
            return replies.error(f"ERR KEYS would read more than {KEYS_LIMIT} keys: use SCAN with MATCH")
        return replies.bulk_array((key for key, _ in items if pattern.matches(key)), self.resp3)

    async def _okapi_range(self, args: list[bytes]) -> bytes:
        limit: int | None = None
        if len(args) == 5 and args[3].upper() == b"LIMIT":
            limit = _integer(args[4])
            if limit is None or limit < 1:
                return replies.error("ERR LIMIT must be a positive integer")
        elif len(args) != 3:
            return replies.error("ERR syntax error: OKAPI.RANGE start end [LIMIT n]")
        items = await self.operations.scan(args[1], args[2], min(limit, KEYS_LIMIT) if limit else KEYS_LIMIT + 1)
        if limit is None and len(items) > KEYS_LIMIT:
            return replies.error(f"ERR the range holds more than {KEYS_LIMIT} keys: pass LIMIT n and continue "
                                 "after the last key returned")
        return replies.bulk_array((part for item in items for part in item), self.resp3)

    async def _dbsize(self, args: list[bytes]) -> bytes:
        total, start = 0, b""
        while True:
            items = await self.operations.scan(start, self._max_key, DBSIZE_PAGE)
            total += len(items)
            if len(items) < DBSIZE_PAGE:
                return replies.integer(total)
            start = items[-1][0] + b"\x00"

    # ------------------------------------------------------------------ MULTI ... EXEC

    async def _multi(self, args: list[bytes]) -> bytes:
        self._block, self._block_failed, self._block_keys = [], False, 0
        return replies.OK

    def _enqueue(self, name: bytes, args: list[bytes]) -> bytes:
        spec = COMMANDS.get(name)
        if name == b"MULTI":
            return replies.error("ERR MULTI calls can not be nested")
        failure: bytes | None = None
        if spec is None:
            failure = self._unknown(name, args)
        elif not _arity_ok(spec.arity, len(args)):
            failure = replies.error(f"ERR wrong number of arguments for '{spec.name}' command")
        elif not spec.in_multi:
            failure = replies.error(
                f"ERR {spec.name.upper()} inside MULTI is not supported: a MULTI ... EXEC block is one read-only "
                "transaction (one causal snapshot) and may hold only GET, MGET and EXISTS")
        elif self._block_keys + len(args) - 1 > self._max_read_keys:
            failure = replies.error(f"ERR a MULTI ... EXEC block may read at most {self._max_read_keys} keys "
                                    "(one read-only transaction)")
        if failure is not None:
            self._block_failed = True
            return failure
        assert self._block is not None
        self._block.append(args)
        self._block_keys += len(args) - 1
        return replies.QUEUED

    async def _exec(self, args: list[bytes]) -> bytes:
        queued, failed = self._block, self._block_failed
        if queued is None:
            return replies.error("ERR EXEC without MULTI")
        self._block, self._block_failed = None, False
        if failed:
            return EXECABORT
        keys = [key for command in queued for key in command[1:]]
        values = await self._snapshot(keys) if keys else {}
        results: list[bytes] = []
        for command in queued:
            name = command[0].upper()
            if name == b"GET":
                results.append(replies.bulk_or_null(values[command[1]], self.resp3))
            elif name == b"MGET":
                results.append(replies.bulk_array((values[key] for key in command[1:]), self.resp3))
            else:  # EXISTS
                results.append(replies.integer(sum(values[key] is not None for key in command[1:])))
        return replies.array(results)

    async def _discard(self, args: list[bytes]) -> bytes:
        if self._block is None:
            return replies.error("ERR DISCARD without MULTI")
        self._block, self._block_failed = None, False
        return replies.OK

    # ------------------------------------------------------------------ sessions

    async def _okapi_session(self, args: list[bytes]) -> bytes:
        if len(args) == 1:
            return replies.bulk(self.operations.export())
        if len(args) != 2:
            return replies.error("ERR syntax error: OKAPI.SESSION [token]")
        facts = self.facts
        try:
            token = decode_token(args[1], cluster_id=facts.cluster_id, num_dcs=len(facts.dc_names))
        except TokenError as error:
            return replies.error(f"ERR {error}")
        await self.operations.adopt(token, self._adopt_wait_s)
        return replies.OK

    # ------------------------------------------------------------------ connection

    async def _ping(self, args: list[bytes]) -> bytes:
        if len(args) > 2:
            return replies.error("ERR wrong number of arguments for 'ping' command")
        return replies.PONG if len(args) == 1 else replies.bulk(args[1])

    async def _echo(self, args: list[bytes]) -> bytes:
        return replies.bulk(args[1])

    async def _select(self, args: list[bytes]) -> bytes:
        database = _integer(args[1])
        if database is None:
            return replies.error("ERR value is not an integer or out of range")
        if database != 0:
            return replies.error("ERR DB index is out of range: okapikv has one key space (database 0)")
        return replies.OK

    async def _quit(self, args: list[bytes]) -> bytes:
        self.closing = True
        return replies.OK

    async def _hello(self, args: list[bytes]) -> bytes:
        resp3 = self.resp3
        name = self.name
        if len(args) > 1:
            version = _integer(args[1])
            if version is None:
                return replies.error("ERR Protocol version is not an integer or out of range")
            if version not in (2, 3):
                return replies.error("NOPROTO unsupported protocol version")
            resp3 = version == 3
            options = args[2:]
            while options:
                option = options[0].upper()
                if option == b"AUTH":
                    return replies.error(f"ERR AUTH is not supported: {REFUSED[b'AUTH']}")
                if option == b"SETNAME" and len(options) >= 2:
                    if not _valid_name(options[1]):
                        return replies.error("ERR Client names cannot contain spaces, newlines or special characters.")
                    name = options[1]
                    options = options[2:]
                else:
                    return replies.error(f"ERR Syntax error in HELLO option '{option.decode(errors='replace')}'")
        self.resp3, self.name = resp3, name
        facts = self.facts
        reply: dict[str, Value] = {
            "server": "okapikv", "version": REDIS_COMPATIBLE_VERSION, "proto": 3 if resp3 else 2, "id": self.id,
            "mode": "standalone", "role": "master", "modules": [], "okapikv_version": __version__,
            "okapi_dc": facts.dc_names[facts.dc], "okapi_protocol": facts.protocol,
        }
        return replies.encode(reply, resp3)

    async def _client(self, args: list[bytes]) -> bytes:
        sub = args[1].upper()
        if sub == b"SETNAME" and len(args) == 3:
            if not _valid_name(args[2]):
                return replies.error("ERR Client names cannot contain spaces, newlines or special characters.")
            self.name = args[2]
            return replies.OK
        if sub == b"GETNAME" and len(args) == 2:
            return replies.bulk(self.name) if self.name else replies.null(self.resp3)
        if sub == b"ID" and len(args) == 2:
            return replies.integer(self.id)
        if sub == b"SETINFO" and len(args) == 4:
            attribute = args[2].upper()
            if attribute not in (b"LIB-NAME", b"LIB-VER"):
                return replies.error(f"ERR Unrecognized option '{args[2].decode(errors='replace')}'")
            if not _valid_name(args[3]):
                return replies.error("ERR lib-name and lib-ver cannot contain spaces, newlines or special characters.")
            name, version = self.library
            self.library = (args[3], version) if attribute == b"LIB-NAME" else (name, args[3])
            return replies.OK
        if sub == b"INFO" and len(args) == 2:
            return replies.bulk(self.client_line().encode())
        return replies.error("ERR unknown subcommand or wrong number of arguments for "
                             f"'{args[1].decode(errors='replace')}'. Try CLIENT HELP.")

    def client_line(self) -> str:
        name, version = (part.decode(errors="replace") for part in self.library)
        multi = -1 if self._block is None else len(self._block)
        return (f"id={self.id} addr={self.peer} laddr={self.local} name={self.name.decode(errors='replace')} db=0 "
                f"multi={multi} resp={3 if self.resp3 else 2} lib-name={name} lib-ver={version}\n")

    # ------------------------------------------------------------------ server

    async def _command(self, args: list[bytes]) -> bytes:
        resp3 = self.resp3
        if len(args) == 1:
            return replies.encode([_command_info(spec) for spec in COMMANDS.values()], resp3)
        sub = args[1].upper()
        if sub == b"COUNT" and len(args) == 2:
            return replies.integer(len(COMMANDS))
        if sub == b"LIST" and len(args) == 2:
            return replies.encode([spec.name for spec in COMMANDS.values()], resp3)
        if sub == b"INFO":
            specs = [COMMANDS.get(name.upper()) for name in args[2:]] if len(args) > 2 else list(COMMANDS.values())
            return replies.encode([None if spec is None else _command_info(spec) for spec in specs], resp3)
        if sub == b"DOCS":
            names = [name.upper() for name in args[2:]] if len(args) > 2 else list(COMMANDS)
            docs: dict[str, Value] = {}
            for name in names:
                spec = COMMANDS.get(name)
                if spec is not None:
                    docs[spec.name] = {"summary": spec.summary, "since": spec.since, "group": spec.group}
            return replies.encode(docs, resp3)
        return replies.error(f"ERR unknown subcommand '{args[1].decode(errors='replace')}'. Try COMMAND HELP.")

    async def _info(self, args: list[bytes]) -> bytes:
        wanted = {arg.lower() for arg in args[1:]} or {b"default"}
        everything = bool(wanted & {b"all", b"everything", b"default"})
        facts = self.facts
        sections: list[str] = []
        if everything or b"server" in wanted:
            sections.append("\r\n".join([
                "# Server", f"redis_version:{REDIS_COMPATIBLE_VERSION}", f"okapikv_version:{__version__}",
                "redis_mode:standalone", f"os:{platform.system()} {platform.release()} {platform.machine()}",
                "arch_bits:64", f"process_id:{os.getpid()}", f"tcp_port:{facts.port}",
                f"uptime_in_seconds:{int(time.monotonic() - facts.started_at)}",
            ]))
        if everything or b"clients" in wanted:
            sections.append(f"# Clients\r\nconnected_clients:{self._connected_clients()}")
        if everything or b"replication" in wanted:
            names = facts.dc_names
            lags = self._stable_lag_ms()
            lag_text = ",".join(f"{names[dc]}={'none' if lag is None else f'{lag:.1f}'}"
                                for dc, lag in enumerate(lags) if dc != facts.dc)
            sections.append("\r\n".join([
                "# Replication", "role:master", f"okapi_cluster_id:{facts.cluster_id}",
                f"okapi_dc:{names[facts.dc]}", f"okapi_dcs:{','.join(names)}", f"okapi_partition:{facts.partition}",
                f"okapi_partitions:{facts.partitions}", f"okapi_protocol:{facts.protocol}",
                f"okapi_stable_lag_ms:{lag_text}",
            ]))
        return replies.bulk(("\r\n\r\n".join(sections) + "\r\n").encode())

    async def _config(self, args: list[bytes]) -> bytes:
        sub = args[1].upper()
        if sub != b"GET":
            return replies.error(f"ERR CONFIG {sub.decode(errors='replace')} is not supported: okapikv's settings "
                                 "come from the cluster config file")
        if len(args) < 3:
            return replies.error("ERR wrong number of arguments for 'config|get' command")
        facts = self.facts
        settings = {
            "save": "", "appendonly": "yes" if facts.durable else "no",
            "appendfsync": "always" if facts.durable else "no",
            "databases": "1", "maxmemory": "0", "maxmemory-policy": "noeviction", "timeout": "0",
            "port": str(facts.port), "proto-max-bulk-len": str(facts.max_bulk_bytes), "cluster-enabled": "no",
        }
        patterns = [compile_pattern(arg.lower()) for arg in args[2:]]
        found: dict[str, Value] = {name: value for name, value in settings.items()
                                   if any(pattern.matches(name.encode()) for pattern in patterns)}
        return replies.encode(found, self.resp3)

    # ------------------------------------------------------------------ helpers

    def _unknown(self, name: bytes, args: list[bytes]) -> bytes:
        reason = REFUSED.get(name)
        if reason is not None:
            return replies.error(f"ERR {name.decode()} is not supported: {reason}")
        shown = ""
        for arg in args[1:]:
            part = f"'{arg[:128].decode(errors='replace')}' "
            if len(shown) + len(part) > 128:
                break
            shown += part
        return replies.error(f"ERR unknown command '{args[0][:128].decode(errors='replace')}', "
                             f"with args beginning with: {shown}")


def _arity_ok(arity: int, count: int) -> bool:
    return count == arity if arity > 0 else count >= -arity


def _integer(text: bytes) -> int | None:
    digits = text[1:] if text[:1] == b"-" else text
    if not digits.isdigit() or len(digits) > 18:
        return None
    return int(text)


def _valid_name(name: bytes) -> bool:
    return all(33 <= char <= 126 for char in name)


def _command_info(spec: Spec) -> list[Value]:
    flags: list[Value] = [Simple(flag) for flag in spec.flags]
    return [spec.name, spec.arity, flags, spec.first_key, spec.last_key, spec.step, [], [], [], []]


__all__ = ["COMMANDS", "REFUSED", "SET_REFUSED", "Executor", "ServerFacts"]
