"""Handler registration by message type (``PartitionServer``'s dispatch).

A table keyed by type whose values are typed by their key: ``register(GetRequest, on_get)`` type-checks
only when ``on_get`` takes a ``GetRequest`` (the type variable ties the two), so the table needs no
cast and no ``type: ignore``, and a handler registered for the wrong message is a mypy error. The
lookup is one dict access by ``type(message)``, as the plain dict it replaces (a message of a
subclass is not dispatched to its base's handler: every message type is registered by itself).

Invariants (tested in ``tests/unit/test_core_dispatch.py``):
- a type is registered at most once (a second registration raises ``ValueError``);
- a message of an unregistered type raises ``TypeError`` naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from okapikv.core.messages import Message

M = TypeVar("M", bound=Message)
R = TypeVar("R")


class Handlers(Generic[R]):
    """Message type -> handler ``(message, now_us) -> R``."""

    __slots__ = ("_table", "of_type")

    def __init__(self) -> None:
        # Any: each value takes exactly its key's type, which ``register`` checks
        self._table: dict[type, Callable[[Any, int], R]] = {}
        #: the handler of a message type, or None: the table's own lookup (no Python call per message)
        self.of_type: Callable[[type], Callable[[Any, int], R] | None] = self._table.get

    def register(self, kind: type[M], handler: Callable[[M, int], R]) -> None:
        if kind in self._table:
            raise ValueError(f"a handler for {kind.__name__} is registered already")
        self._table[kind] = handler

    def __call__(self, message: Message, now_us: int) -> R:
        """Run the handler of ``message``'s type."""
        handler = self._table.get(type(message))
        if handler is None:
            raise TypeError(f"unknown message type {type(message).__name__}")
        return handler(message, now_us)
