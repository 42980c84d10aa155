"""Exceptions raised by the okapikv client library."""

from __future__ import annotations


class OkapiError(Exception):
    """Base class of every okapikv client error."""


class InvalidArgument(OkapiError):
    """The server refused the request (empty or oversized key, oversized value, ...); nothing changed."""


class Unavailable(OkapiError):
    """No server for the key answered before the client's timeout (retries with backoff included)."""


class FailoverTimeout(Unavailable):
    """The client's DC is unreachable and no fallback DC received, within the client's
    ``failover_wait_s``, every write its session depends on (writes that had not left the old DC):
    moving there would break read-your-writes, so the client stays and reports it."""


class ProtocolMismatch(OkapiError):
    """The server speaks to another cluster or another version of the protocol."""
