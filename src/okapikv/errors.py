"""Exceptions raised by the okapikv client library."""

from __future__ import annotations


class OkapiError(Exception):
    """Base class of every okapikv client error."""


class InvalidArgument(OkapiError):
    """The server refused the request (empty or oversized key, oversized value, ...); nothing changed."""


class ClockOffsetExceeded(OkapiError):
    """The server refused the request and changed nothing: it depends on a timestamp further ahead of
    the server's clock than the cluster's maximum clock offset (a server's clock is ahead, or this
    one's is behind; docs/operations.md, "Clocks: the maximum offset"). Not retried: the same
    request meets the same clocks until an operator fixes them or the clock catches up."""


class Unavailable(OkapiError):
    """No server for the key answered before the client's timeout (retries with backoff included)."""


class FailoverTimeout(Unavailable):
    """The client's DC is unreachable and no fallback DC received, within the client's
    ``failover_wait_s``, every write its session depends on (writes that had not left the old DC):
    moving there would break read-your-writes, so the client stays and reports it."""


class OutcomeUnknown(OkapiError):
    """A write reached the network but its reply was lost (the connection to the server broke
    mid-call, or the reply did not come before the timeout), and the client did not retry it
    because it was asked to apply writes at most once (``Client(at_most_once=True)``,
    ``okapi client --at-most-once``): the write may or may not have taken effect. Not an
    ``Unavailable``, so failover does not retry it in another DC either."""


class Overloaded(OkapiError):
    """The servers of the DC kept refusing a snapshot read (RO-TX or SCAN) because they already
    coordinate as many as their limits allow (``max_concurrent_reads``, ``max_read_items``), until
    the client's timeout (it retries with backoff meanwhile). Nothing was read; retry later or
    read less at once. Not an ``Unavailable``: the DC is up, so failover does not move for it."""


class SnapshotTooOld(OkapiError):
    """A snapshot read could not keep its snapshot: the garbage collector had passed it (every
    retry of a RO-TX, or a SCAN between pages more often than the client starts it over, or a paged
    ``iter_scan``, which cannot start over), or a SCAN's client moved to another DC mid-scan.
    Nothing is wrong with the data; retry (docs/operations.md, "Read limits and paging")."""


class ProtocolMismatch(OkapiError):
    """The server speaks to another cluster or another version of the protocol."""


class BulkLoadFailed(OkapiError):
    """A bulk load (``bulk_put``) stopped at a failure: ``written`` PUTs had been acknowledged (they
    are durable where the servers are), the others may or may not have been applied. ``cause`` is
    the error of the first failure. Loading the same pairs again is safe."""

    def __init__(self, message: str, written: int, cause: OkapiError) -> None:
        super().__init__(message)
        self.written = written
        self.cause = cause
