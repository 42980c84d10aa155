"""Messages and effects are frozen values (no dict-typed messages), safe to share and to log."""

from __future__ import annotations

import gc
import pickle

import msgspec
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

MESSAGES = [
    value
    for value in vars(messages).values()
    if isinstance(value, type) and issubclass(value, msgspec.Struct) and value.__module__ == messages.__name__
]


def test_every_message_is_a_frozen_untracked_struct() -> None:
    assert len(MESSAGES) >= 20
    for cls in MESSAGES:
        assert cls.__struct_config__.frozen, cls.__name__
        assert not cls.__struct_config__.gc, cls.__name__  # no cycles: the collector need not track them
    request = GetRequest(1, b"k", Session((1, 2), 3))
    assert not gc.is_tracked(request)


def test_messages_keep_their_declared_fields_defaults_and_types() -> None:
    assert messages.field_types(GetRequest) == (("request_id", "int"), ("key", "bytes"), ("session", "Session"))
    assert messages.field_types(Session) == (("stable", "Vector"), ("dt", "int"))
    assert repr(Session((1,), 2)) == "Session(stable=(1,), dt=2)"
    assert Session.__doc__ is not None and Session.__doc__.startswith("Causal metadata of a client session")
    assert messages.replace(Session((1,), 2), dt=5) == Session((1,), 5)
    assert messages.is_message(Session((1,), 2)) and not messages.is_message((1, 2))
    request = GetRequest(1, b"k", Session((1, 2), 3))
    assert pickle.loads(pickle.dumps(request)) == request


def test_messages_are_immutable_and_hashable() -> None:
    request = GetRequest(1, b"k", Session((1, 2), 3))
    with pytest.raises(AttributeError):
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
