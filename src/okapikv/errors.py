"""Exceptions raised by the okapikv client library."""

from __future__ import annotations


class OkapiError(Exception):
    """Base class of every okapikv client error."""


class InvalidArgument(OkapiError):
    """The server refused the request (empty or oversized key, oversized value, ...); nothing changed."""


class Unavailable(OkapiError):
    """No server for the key answered before the client's timeout (retries with backoff included)."""


class ProtocolMismatch(OkapiError):
    """The server speaks to another cluster or another version of the protocol."""
