"""``okapikv.sim.cost.message_bytes`` sizes a message by its fields (the core's messages are
``msgspec`` structs, ``okapikv.core.messages.message``): a message whose fields were not found
would cost one number, and every simulated transfer would shrink to 8 bytes."""

from __future__ import annotations

from okapikv.core.messages import GetRequest, ReplicateBatch, ServerId, Session, Update
from okapikv.sim.cost import message_bytes


def test_a_message_is_the_sum_of_its_fields() -> None:
    # request id 8 + key 3 + session (two stable entries 8 + 8, dt 8)
    assert message_bytes(GetRequest(1, b"key", Session((1, 2), 3))) == 35


def test_nested_messages_and_tuples_of_them_count_whole() -> None:
    update = Update(b"k", b"value", 5, 0, None)  # 1 + 5 + 8 + 8 + 8 (no dv)
    batch = ReplicateBatch(ServerId(0, 1), (update, update))
    assert message_bytes(update) == 30
    assert message_bytes(batch) == message_bytes(ServerId(0, 1)) + 2 * 30 + message_bytes(batch.gsv)
