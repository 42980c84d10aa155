"""One operation's attempts in one DC: what a failed attempt means, and what to do next (sans I/O).

Why retries live in the client: a partition server can be restarted (the course's project 2 kills
and restarts servers mid-run) and the client must carry on once it is back, so an UNAVAILABLE
status is not an answer but a reason to try again later. The wait grows exponentially (so a long
outage costs few attempts) with jitter (so many clients that lost the same server do not come back in
lock step), and the whole operation is bounded by the client's ``timeout_s``, after which the caller
gets ``Unavailable``. A refusal that the same request would meet again is raised at once:
``InvalidArgument``, ``ClockOffsetExceeded`` (the maximum clock offset, docs/protocol.md,
"Timestamps and the HLC"), ``SnapshotTooOld`` (ABORTED: a snapshot read below the GC horizon,
docs/protocol.md, "Garbage collection"), ``ProtocolMismatch``. A snapshot read refused for load
(RESOURCE_EXHAUSTED beginning with ``OVERLOADED``: the server did no work) is retried until the
timeout and then raised as ``Overloaded``; gRPC's own RESOURCE_EXHAUSTED (a message over the size
limit) is final.

Retrying a write whose reply was lost can apply it twice; a retried PUT or DELETE then reports the
state its first attempt left (``found=True``), and a retried SWAP may return the value it wrote
itself. This at-least-once behaviour on a connection loss is the usual price of retries without
server-side request ids, and it is the default. The sync client can instead apply writes at most
once (``Client(at_most_once=True)``, ``okapi client --at-most-once``; ``okapi fuzz`` runs its
clients so, since a checker cannot tell a double application from a store bug): a write is then
retried only after a failure that proves the request never left the client (``Failure.sent`` False,
or gRPC's "failed to connect to all addresses": it had no connection to send it on, as while a
server is down), and any other failure of a write raises ``OutcomeUnknown``. Reads are always
retried: they have no effect to repeat.

What a killed server looks like from here (measured: five clients swapping through a 1-DC x
3-partition durable cluster whose partition 1 was killed with SIGKILL and restarted five times):
the calls in flight fail with ``UNAVAILABLE: Stream removed (Socket closed)`` or ``(recvmsg:
Connection reset by peer)``, about two per kill; every call made while the server is down fails at
once with ``UNAVAILABLE: failed to connect to all addresses; ...``, which is safe to retry.

Sans I/O: ``Attempts`` is told the time (``now``, seconds on the driver's clock) and each failure
(``Failure``, whatever the transport), and answers with a decision as a value: ``Send``, ``Wait``,
``FAIL_OVER``, or the ``OkapiError`` the operation ends with, for the driver to raise (its
``__cause__`` is the failure that ended it). It never sleeps, reads a clock or touches a
connection, and its jitter comes from the random source it is given. The clients (``sync.py``,
``aio.py``) carry the decisions out; ``okapikv.client.policy`` builds the ``Attempts`` of an
operation from the client's settings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from random import Random

from okapikv.core.backoff import Backoff
from okapikv.core.messages import OVERLOADED
from okapikv.errors import (
    ClockOffsetExceeded,
    InvalidArgument,
    OkapiError,
    OutcomeUnknown,
    Overloaded,
    ProtocolMismatch,
    SnapshotTooOld,
    Unavailable,
)

#: Statuses (gRPC status names) after which the same request may succeed later: the server is down
#: or restarting, or it cut the stream (a server shutting down cancels its calls, which reaches us
#: as CANCELLED); ``BROKEN``: the connection failed outside gRPC (an ``OSError``).
BROKEN = ""
RETRYABLE_CODES = frozenset({"UNAVAILABLE", "CANCELLED", BROKEN})
DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"

#: Failures after which a write may have been applied though no reply came: those that are retried
#: (the stream went away), and a deadline that passed while the request was out.
MAYBE_APPLIED_CODES = RETRYABLE_CODES | {DEADLINE_EXCEEDED}

#: How gRPC begins the details of a call it failed before sending it: the channel had no connection
#: (the server is down or refusing connections). Any other failure may have reached the server.
NOT_SENT_DETAILS = "failed to connect to all addresses"

#: The final errors of the statuses that are not retried (any other status: ``OkapiError``).
_FINAL: dict[str, type[OkapiError]] = {
    "ABORTED": SnapshotTooOld,  # a snapshot read that lost its snapshot would lose it again
    "INVALID_ARGUMENT": InvalidArgument,
    "OUT_OF_RANGE": ClockOffsetExceeded,  # the maximum clock offset (``okapikv.core.server``)
}

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


class Failure(Exception):
    """What one attempt failed with: ``code``, the status its transport or the server's result gave
    (a gRPC status name, ``BROKEN`` for a connection that failed outside gRPC), ``details``, and
    ``sent``: False when the request certainly never left the client (it may then be retried even
    at most once). The transports raise it; ``Attempts.judge`` reads it."""

    def __init__(self, code: str, details: str, *, sent: bool = True) -> None:
        super().__init__(f"{code}: {details}" if code else details)
        self.code = code
        self.details = details
        self.sent = sent

    def with_sent(self, sent: bool) -> Failure:
        return Failure(self.code, self.details, sent=sent)

    @property
    def refused_for_load(self) -> bool:
        """A server's refusal of a snapshot read for its load: it did no work, the DC is up."""
        return self.code == RESOURCE_EXHAUSTED and self.details.startswith(OVERLOADED)

    @property
    def retryable(self) -> bool:
        return self.code in RETRYABLE_CODES or self.refused_for_load

    @property
    def maybe_applied(self) -> bool:
        """Whether the request may have reached a server and taken effect. Conservative: only a
        request never taken by its transport (``sent`` False) or gRPC's "failed to connect to all
        addresses" certainly did not; a broken stream, a reset connection, a server cancelling its
        calls at shutdown or a deadline may all follow the request's arrival."""
        if not self.sent or self.code not in MAYBE_APPLIED_CODES:
            return False
        return not (self.code == "UNAVAILABLE" and self.details.startswith(NOT_SENT_DETAILS))

    def final_error(self) -> OkapiError:
        """The error this failure is when it is not retried."""
        if self.code == "UNIMPLEMENTED":
            return ProtocolMismatch(f"the server does not implement this call ({self.details})")
        if self.code == DEADLINE_EXCEEDED:
            return Unavailable(f"no reply before the timeout ({self.details})")
        final = _FINAL.get(self.code)
        return final(self.details) if final is not None else OkapiError(str(self))




@dataclass(frozen=True, slots=True)
class Send:
    """Send the request (again) to ``addresses[server]``, by ``deadline`` (the driver's clock),
    that is within ``timeout_s``."""

    server: int
    deadline: float
    timeout_s: float


@dataclass(frozen=True, slots=True)
class Wait:
    """Wait ``delay_s``, then ask ``next``."""

    delay_s: float


class FailOver:
    """The DC has not answered for ``failover_after_s``: move the session to another DC
    (``okapikv.client.failover``), then ask ``moved``. One value, ``FAIL_OVER``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "FAIL_OVER"


FAIL_OVER = FailOver()


class Attempts:
    """The decisions of one operation (or one RPC) after its first attempt failed.

    ``addresses`` are the servers it may go to (one per partition of the DC); attempt n goes to
    ``start``, or with ``rotate`` (any server of the DC can coordinate a RO-TX or a SCAN) to
    ``(start + n) % len(addresses)``. The operation started at ``started`` and may take until
    ``started + timeout_s``; with ``after_s`` (a client with fallback DCs), a DC that has not
    answered for ``after_s`` is left (``FAIL_OVER``) while time is left, and each DC has ``after_s``
    from when the session arrived there (at least ``MIN_WINDOW_S``). A DC that refuses for load is
    up: the operation stays and retries until ``timeout_s``, then raises ``Overloaded``.
    """

    #: the least time an operation has in the DC it just moved to: one attempt
    MIN_WINDOW_S = 0.001

    __slots__ = ("_what", "_addresses", "_start", "_rotate", "_at_most_once", "_backoff", "_rng",
                 "_timeout_s", "_deadline", "_after_s", "_window_end", "_number", "_server", "_last",
                 "_final_wait")

    def __init__(self, what: str, addresses: Sequence[str], *, started: float, timeout_s: float,
                 backoff: Backoff, rng: Random, start: int = 0, rotate: bool = False,
                 at_most_once: bool = False, after_s: float | None = None) -> None:
        self._what = what
        self._addresses = addresses
        self._start = start
        self._rotate = rotate
        self._at_most_once = at_most_once
        self._backoff = backoff
        self._rng = rng
        self._timeout_s = timeout_s
        self._deadline = started + timeout_s
        self._after_s = after_s
        self._window_end = started + (timeout_s if after_s is None else min(timeout_s, after_s))
        self._number = 0  # attempts that failed in this DC
        self._server = start
        self._last: Failure | None = None  # the last retryable failure
        self._final_wait = False  # the last wait ran to the end of the window

    @property
    def address(self) -> str:
        """The server of the current (or last) attempt."""
        return self._addresses[self._server]

    def judge(self, failure: Failure, now: float) -> Wait | OkapiError | FailOver | Send:
        """The attempt sent to ``address`` failed with ``failure`` at ``now``."""
        if self._at_most_once and failure.maybe_applied:
            return _raise(OutcomeUnknown(f"{self._what} via {self.address}: {failure}; the write may or may not "
                                         "have taken effect (not retried: at most once)"), failure)
        if failure.code == DEADLINE_EXCEEDED:  # the attempt had until the end of the window
            return self._ended(max(now, self._window_end), failure)
        if not failure.retryable:
            return _raise(failure.final_error(), failure)
        self._last = failure
        self._number += 1
        delay = self._backoff.delay_s(self._number, self._rng)
        remaining = self._window_end - now
        if delay >= remaining:
            self._final_wait = True
            return Wait(max(remaining, 0.0))
        return Wait(delay)

    def next(self, now: float) -> Send | OkapiError | FailOver:
        """After a ``Wait``: the next attempt, or what ends the window."""
        if self._final_wait:  # a wait to the end of the window ends it, whatever the clock says
            return self._ended(max(now, self._window_end), self._last)
        if now >= self._window_end:
            return self._ended(now, self._last)
        return self._send(now)

    def moved(self, now: float, addresses: Sequence[str]) -> Send:
        """The session moved to another DC (after ``FAIL_OVER``): its first attempt there."""
        assert self._after_s is not None, "only an operation with fallback DCs moves"
        self._addresses = addresses
        self._number = 0
        self._last = None
        self._window_end = max(min(self._deadline, now + self._after_s), now + self.MIN_WINDOW_S)
        return self._send(now)

    def _send(self, now: float) -> Send:
        self._final_wait = False
        self._server = (self._start + self._number) % len(self._addresses) if self._rotate else self._start
        return Send(self._server, self._window_end, self._window_end - now)

    def _ended(self, now: float, cause: Failure | None) -> OkapiError | FailOver | Send:
        """The window is over at ``now``: retry on (a DC that refuses for load is up: it gets
        another window, up to the timeout), fail over, or raise."""
        last = self._last
        if now < self._deadline:
            if last is not None and last.refused_for_load:
                after = self._timeout_s if self._after_s is None else self._after_s
                self._window_end = min(self._deadline, now + after)
                return self._send(now)
            if self._after_s is not None:
                return FAIL_OVER
        reason = f"; last error: {last}" if last is not None else ""
        error: OkapiError
        if last is not None and last.refused_for_load:
            error = Overloaded(f"{self._what} via {self.address}: refused for load until the "
                               f"{self._timeout_s:g} s timeout{reason}")
        else:
            error = Unavailable(f"{self._what} via {self.address}: no answer within {self._timeout_s:g} s{reason}")
        return _raise(error, cause)


def _raise(error: OkapiError, cause: Failure | None) -> OkapiError:
    error.__cause__ = cause
    return error
