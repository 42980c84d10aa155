"""Typed handler registration (``okapikv.core.dispatch``) and the server's table."""

from __future__ import annotations

import typing

import pytest

from okapikv.core.config import CoreConfig
from okapikv.core.dispatch import Handlers
from okapikv.core.messages import GetRequest, Message, PutRequest, ServerId, Session
from okapikv.core.server import PartitionServer


def message_types(union: object) -> set[type]:
    """The classes of a union of message types, unions of unions included."""
    found: set[type] = set()
    for member in typing.get_args(union):
        found |= message_types(member) if typing.get_args(member) else {member}
    return found


def test_a_message_goes_to_the_handler_of_its_type_and_a_type_is_registered_once() -> None:
    handlers: Handlers[str] = Handlers()
    handlers.register(GetRequest, lambda message, now_us: f"get {message.key!r} at {now_us}")
    handlers.register(PutRequest, lambda message, now_us: f"put {message.value!r}")
    session = Session((0,), 0)
    assert handlers(GetRequest(1, b"k", session), 7) == "get b'k' at 7"
    assert handlers(PutRequest(2, b"k", b"v", session), 7) == "put b'v'"
    assert handlers.of_type(GetRequest) is not None and handlers.of_type(ServerId) is None
    with pytest.raises(ValueError, match="GetRequest is registered already"):
        handlers.register(GetRequest, lambda message, now_us: "again")
    assert handlers(GetRequest(1, b"k", session), 7) == "get b'k' at 7"  # the first one stays


def test_an_unregistered_message_type_is_a_type_error_naming_it() -> None:
    handlers: Handlers[str] = Handlers()
    request = GetRequest(1, b"k", Session((0,), 0))
    assert handlers.of_type(GetRequest) is None
    with pytest.raises(TypeError, match="unknown message type GetRequest"):
        handlers(request, 0)


@pytest.mark.parametrize("protocol", ["okapi", "cure", "gentlerain", "eventual"])
def test_the_server_has_a_handler_for_every_message_type(protocol: str) -> None:
    server = PartitionServer(CoreConfig(dc=0, partition=0, num_dcs=2, num_partitions=2, protocol=protocol))
    kinds = message_types(Message)
    assert len(kinds) > 20 and ServerId not in kinds
    assert [kind.__name__ for kind in sorted(kinds, key=lambda kind: kind.__name__)
            if server._handlers.of_type(kind) is None] == []
