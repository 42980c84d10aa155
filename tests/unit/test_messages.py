"""Messages and effects are frozen values (no dict-typed messages), safe to share and to log."""

from __future__ import annotations

import dataclasses

import pytest

from okapikv.core import messages
from okapikv.core.messages import (
    GetRequest,
    Heartbeat,
    ReplicateBatch,
    Send,
    ServerId,
    Session,
    SliceReply,
    Update,
)

DATACLASSES = [
    value
    for value in vars(messages).values()
    if isinstance(value, type) and dataclasses.is_dataclass(value) and value.__module__ == messages.__name__
]


def test_every_message_is_a_frozen_slotted_dataclass() -> None:
    assert len(DATACLASSES) >= 20
    for cls in DATACLASSES:
        assert cls.__dataclass_params__.frozen, cls.__name__  # type: ignore[attr-defined]
        assert "__slots__" in vars(cls), cls.__name__


def test_messages_are_immutable_and_hashable() -> None:
    request = GetRequest(1, b"k", Session((1, 2), 3))
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.key = b"other"  # type: ignore[misc]
    assert hash(request) == hash(GetRequest(1, b"k", Session((1, 2), 3)))
    batch = ReplicateBatch(ServerId(0, 1), (Update(b"k", None, 5, 0, None),))
    assert {Send(ServerId(1, 1), batch), Send(ServerId(1, 1), batch)} == {Send(ServerId(1, 1), batch)}


def test_server_id_is_a_named_pair() -> None:
    server = ServerId(2, 7)
    assert (server.dc, server.partition) == (2, 7)
    assert server == (2, 7)


def test_defaults() -> None:
    assert SliceReply(ServerId(0, 0), 1, ()).too_old is False
    assert Heartbeat(ServerId(0, 0), 9).timestamp == 9
