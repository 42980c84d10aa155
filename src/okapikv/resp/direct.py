"""The commands a RESP connection sends without a coroutine: one request each, to a core or a hop.

GET, SET without options, DEL and EXISTS of one key, INCR, DECR, INCRBY and DECRBY on a key of the
server's own partition are each one core request whose reply is the command's reply. For these the
connection builds the request itself, with its session as it is (``plan``: the request and the
command's ``Direct``, one constant per command, so a command costs no object besides its request), the port's
``okapikv.resp.batch.CoreBatch`` hands it to the core together with the other connections'
requests of the same turn of the event loop, and ``Direct.answer`` encodes the core's reply as the
``Executor``'s handler of the command does (the same replies, the same errors).

GET, SET, DEL and EXISTS of a key of another partition of the DC are one operation of the
connection's forwarding client (``SessionOperations.forwarding``, once its first forwarded command
has made it): ``plan`` gives a ``Forward``, whose first attempt the connection sends with
``AsyncClient.attempt`` (the pipeline to that partition's server, batched with every other
operation of the loop turn, one hop) and whose result ``Forward.answer`` encodes. An attempt that
fails in any way (an error result, a broken or timed-out pipeline) hands the command to the
Executor, which sends it again with the client's retries and answers its error: a forwarded write
is at least once, as any client's retried write (docs/resp.md, "What differs from Redis"). The
counters are never forwarded this way: an increment is never sent twice.

Every other command, anything inside MULTI and a command whose arguments these checks do not take
(an INCRBY by something that is not an integer) go to the ``Executor``, which answers its error.

Why: the Executor runs a command as a coroutine chain (handler, session operation, the node's
unary call or the client's operation, their futures) in a task of the connection; for the commands
that make up nearly all of a Redis workload that chain is most of the port's per-command cost
(docs/resp.md, "How a command reaches the core").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from okapikv.client import operations as ops
from okapikv.client.operations import OperationKind
from okapikv.core.counters import parse_integer
from okapikv.core.messages import (
    ClientReply,
    ClientRequest,
    DeleteRequest,
    ErrorReply,
    GetReply,
    GetRequest,
    IncrReply,
    IncrRequest,
    PutRequest,
    WriteReply,
)
from okapikv.resp import replies
from okapikv.resp.operations import SessionOperations


class Direct(NamedTuple):
    """How a command that is one core request is answered: its kind (the node's latency
    histograms) and how the request's reply becomes the command's (``answer(reply, resp3)``:
    encoded RESP). One per command (``plan`` pairs it with the request)."""

    kind: str
    answer: Callable[[ClientReply, bool], bytes]


#: a command as one core request: the request and how it is answered
Planned = tuple[ClientRequest, Direct]


class Forward(NamedTuple):
    """A command as one operation of the forwarding client (``AsyncClient.attempt``): its kind,
    key and value (a PUT's; None otherwise), and how the reply becomes the command's
    (``answer(reply, resp3)``)."""

    kind: OperationKind
    key: bytes
    value: bytes | None
    answer: Callable[[Any, bool], bytes]


def _error(reply: ErrorReply) -> bytes:
    return replies.error(f"ERR {reply.message}")


def _get(reply: ClientReply, resp3: bool) -> bytes:
    if type(reply) is GetReply:
        return replies.bulk_or_null(reply.value, resp3)
    assert type(reply) is ErrorReply
    return _error(reply)


def _exists(reply: ClientReply, resp3: bool) -> bytes:
    if type(reply) is GetReply:
        return replies.ZERO if reply.value is None else replies.ONE
    assert type(reply) is ErrorReply
    return _error(reply)


def _set(reply: ClientReply, resp3: bool) -> bytes:
    if type(reply) is WriteReply:
        return replies.OK
    assert type(reply) is ErrorReply
    return _error(reply)


def _delete(reply: ClientReply, resp3: bool) -> bytes:
    if type(reply) is WriteReply:
        return replies.ONE if reply.found else replies.ZERO
    assert type(reply) is ErrorReply
    return _error(reply)


def _incr(reply: ClientReply, resp3: bool) -> bytes:
    if type(reply) is IncrReply:
        return replies.integer(reply.value)
    assert type(reply) is ErrorReply
    return _error(reply)


def _forwarded_get(reply: Any, resp3: bool) -> bytes:
    return replies.bulk_or_null(ops.decode_get(reply), resp3)


def _forwarded_found(reply: Any, resp3: bool) -> bytes:
    return replies.ONE if reply.found else replies.ZERO


def _forwarded_set(reply: Any, resp3: bool) -> bytes:
    return replies.OK


GET = Direct("get", _get)
EXISTS = Direct("get", _exists)
SET = Direct("put", _set)
DELETE = Direct("delete", _delete)
INCR = Direct("incr", _incr)

#: name -> (arguments with the name, the increment's sign for the counter commands, 0 otherwise)
_COMMANDS: dict[bytes, tuple[int, int]] = {
    b"GET": (2, 0), b"SET": (3, 0), b"DEL": (2, 0), b"EXISTS": (2, 0),
    b"INCR": (2, 1), b"DECR": (2, -1), b"INCRBY": (3, 1), b"DECRBY": (3, -1),
}


def plan(args: list[bytes], operations: SessionOperations, request_id: Callable[[], int]) -> Planned | Forward | None:
    """``args`` as one core request of this server (with its ``Direct``) or one forwarded
    operation, or None: the Executor runs it (module docstring). ``request_id``: the node's next
    request id."""
    name = args[0]
    shape = _COMMANDS.get(name)
    if shape is None:  # clients write names in capitals; any case is the same command
        name = name.upper()
        shape = _COMMANDS.get(name)
        if shape is None:
            return None
    if len(args) != shape[0]:
        return None
    key = args[1]
    if not operations.local(key):
        return _forward(name, args, operations)
    session = operations.state.current
    if name == b"GET":
        return GetRequest(request_id(), key, session), GET
    if name == b"SET":
        return PutRequest(request_id(), key, args[2], session), SET
    if name == b"DEL":
        return DeleteRequest(request_id(), key, session), DELETE
    if name == b"EXISTS":
        return GetRequest(request_id(), key, session), EXISTS
    by = shape[1]
    if len(args) == 3:
        amount = parse_integer(args[2])
        if amount is None or amount == -(1 << 63):  # the Executor answers Redis's error
            return None
        by *= amount
    return IncrRequest(request_id(), key, by, session), INCR


def _forward(name: bytes, args: list[bytes], operations: SessionOperations) -> Forward | None:
    if operations.forwarding is None:
        return None  # the Executor's first forwarded command makes the client
    key = args[1]
    if name == b"GET":
        return Forward(ops.GET, key, None, _forwarded_get)
    if name == b"SET":
        return Forward(ops.PUT, key, args[2], _forwarded_set)
    if name == b"DEL":
        return Forward(ops.DELETE, key, None, _forwarded_found)
    if name == b"EXISTS":
        return Forward(ops.GET, key, None, _forwarded_found)
    return None  # a counter: never sent twice (module docstring)


__all__ = ["Direct", "Forward", "Planned", "plan"]
