"""Retrying while a server is unreachable, and turning gRPC statuses into okapikv errors.

Why retries live in the client: a partition server can be restarted (the course's project 2 kills
and restarts servers mid-run) and the client must carry on once it is back, so an UNAVAILABLE
status is not an answer but a reason to try again later. The wait grows exponentially (so a long
outage costs few attempts) with jitter (so many clients that lost the same server do not come back in
lock step), and the whole operation is bounded by the client's ``timeout_s``, after which the caller
gets ``Unavailable``.

Retrying a write whose reply was lost can apply it twice; a retried PUT or DELETE then reports the
state its first attempt left (``found=True``), and a retried SWAP may return the value it wrote
itself. This at-least-once behaviour on a connection loss is the usual price of retries without
server-side request ids, and it is the default. The sync client can instead apply writes at most
once (``Client(at_most_once=True)``, ``okapi client --at-most-once``; ``okapi fuzz`` runs its
clients so, since a checker cannot tell a double application from a store bug): a write is then
retried only after a failure that proves the request never left the client (``never_sent``: gRPC
had no connection to send it on, as while a server is down), and any other failure of a write
raises ``OutcomeUnknown``. Reads are always retried: they have no effect to repeat.

What a killed server looks like from here (measured: five clients swapping through a 1-DC x
3-partition durable cluster whose partition 1 was killed with SIGKILL and restarted five times):
the calls in flight fail with ``UNAVAILABLE: Stream removed (Socket closed)`` or ``(recvmsg:
Connection reset by peer)``, about two per kill; every call made while the server is down fails at
once with ``UNAVAILABLE: failed to connect to all addresses; ...``, which is safe to retry.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import grpc

from okapikv.core.messages import OVERLOADED
from okapikv.errors import (
    ClockOffsetExceeded,
    InvalidArgument,
    OkapiError,
    Overloaded,
    ProtocolMismatch,
    SnapshotTooOld,
    Unavailable,
)

# Statuses after which the same request may succeed later: the server is down or restarting, or it
# cut the stream (a server shutting down cancels its calls, which reaches us as CANCELLED). A
# server's refusal of a snapshot read for its load (RESOURCE_EXHAUSTED, its message beginning with
# ``OVERLOADED``: it did no work) is retried too (``classify``), while gRPC's own RESOURCE_EXHAUSTED
# (a message over the size limit) is final; ABORTED is a snapshot read that lost its snapshot (``SnapshotTooOld``),
# which the same request would lose again.
RETRYABLE_CODES = frozenset({
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.CANCELLED,
})

# Options of every channel the clients open. gRPC's default reconnect backoff grows to 120 s, so a
# client whose server was down for a minute would stay disconnected long after the server is back;
# we cap it at one second and let our own backoff (below) pace the attempts instead. Scans may
# return large replies: the default 4 MiB receive limit is too low for a 1 MiB value limit.
CHANNEL_OPTIONS: list[tuple[str, int]] = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1_000),
    ("grpc.enable_retries", 0),
    ("grpc.max_receive_message_length", 256 * 1024 * 1024),
    ("grpc.max_send_message_length", 256 * 1024 * 1024),
]


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with "equal jitter": attempt n waits in [d/2, d], d = min(cap, base * 2^n).

    Half the delay is fixed so retries never spin; the other half is random so clients spread out.
    """

    base_s: float = 0.02
    cap_s: float = 1.0
    multiplier: float = 2.0

    def delay_s(self, attempt: int, rng: random.Random | None = None) -> float:
        """The wait before retry number ``attempt`` (1 for the first retry)."""
        ceiling = min(self.cap_s, self.base_s * self.multiplier ** max(attempt - 1, 0))
        draw = (rng or random).random()
        return ceiling / 2 + draw * ceiling / 2


DEFAULT_BACKOFF = Backoff()


class RetryableError(Exception):
    """A failure after which the operation may be retried (the server or the stream went away)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details


#: Failures after which a write may have been applied though no reply came: those that are retried
#: (the stream went away), and a deadline that passed while the request was out.
MAYBE_APPLIED_CODES = RETRYABLE_CODES | {grpc.StatusCode.DEADLINE_EXCEEDED}

#: How gRPC begins the details of a call it failed before sending it: the channel had no connection
#: (the server is down or refusing connections). Any other failure may have reached the server.
NOT_SENT_DETAILS = "failed to connect to all addresses"


def never_sent(code: grpc.StatusCode, details: str) -> bool:
    """Whether a failed call certainly never reached a server (so retrying a write cannot apply it
    twice). Conservative: only gRPC's "failed to connect to all addresses" qualifies; a broken
    stream, a reset connection, a server cancelling its calls at shutdown or a deadline may all
    follow the request's arrival."""
    return code == grpc.StatusCode.UNAVAILABLE and details.startswith(NOT_SENT_DETAILS)


def classify(code: grpc.StatusCode, details: str) -> Exception:
    """The exception a failed attempt turns into: a ``RetryableError`` or a final ``OkapiError``."""
    if code in RETRYABLE_CODES or (code == grpc.StatusCode.RESOURCE_EXHAUSTED and details.startswith(OVERLOADED)):
        return RetryableError(code, details)
    if code == grpc.StatusCode.ABORTED:
        return SnapshotTooOld(details)
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return InvalidArgument(details)
    if code == grpc.StatusCode.OUT_OF_RANGE:  # the maximum clock offset (``okapikv.core.server``)
        return ClockOffsetExceeded(details)
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return ProtocolMismatch(f"the server does not implement this call ({details})")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return Unavailable(f"no reply before the timeout ({details})")
    return OkapiError(f"{code.name}: {details}")


def unavailable(what: str, address: str, timeout_s: float, last: Exception | None) -> Unavailable | Overloaded:
    """The error of an operation whose retries ran out of time: ``Overloaded`` when the last
    attempt was refused for load (the DC is up), else ``Unavailable``."""
    reason = f"; last error: {last}" if last is not None else ""
    if isinstance(last, RetryableError) and last.code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return Overloaded(f"{what} via {address}: refused for load until the {timeout_s:g} s timeout{reason}")
    return Unavailable(f"{what} via {address}: no answer within {timeout_s:g} s{reason}")
