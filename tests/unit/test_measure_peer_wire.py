"""``scripts/measure_peer_wire.py``, whose figures decide whether the peer links leave protobuf
(docs/benchmarks.md, "The peer links' wire: protobuf, and what msgpack would save"): what it times
must be real round trips, and its py-spy classification must count the encoding and nothing else."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from scripts_support import load_script

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def script() -> ModuleType:
    return load_script("measure_peer_wire")


def test_both_timed_round_trips_deliver_the_message_they_were_given(script: ModuleType) -> None:
    for message in (script.Heartbeat(script.SOURCE, script.TIME, None), script._batch(1), script._batch(16)):
        assert script._protobuf_round_trip(message)() == [message]
        assert script._msgpack_round_trip(message)() == [message]


def _line(module: str, text: str) -> int:
    path = ROOT / "src" / "okapikv" / "server" / f"{module}.py"
    return next(number for number, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_samples_in_the_peer_encoding_are_counted_and_socket_writes_are_not(script: ModuleType) -> None:
    root = ["<module> (okapikv/cli.py:502)", "Runner.run (asyncio/runners.py:118)"]
    decode = _line("native", "PeerBatch.FromString")
    ack_write = _line("native", "pb.LinkAck(received=acknowledged)")
    sender = [*root, "PeerEncoder.frames (okapikv/server/peer_encoding.py:43)",
              "PeerWireBytes.measure (okapikv/server/wire_bytes.py:60)"]
    assert script._encoding_frame(sender) == "peer_encoding.py:frames"
    assert script._encoding_frame([*root, "peer_message_from_pb (okapikv/wire/convert.py:650)"]) == (
        "convert.py:peer_message_from_pb")
    assert script._encoding_frame(
        [*root, f"NativeConnection._receive_peer_batches (okapikv/server/native.py:{decode})"]) == f"native.py:{decode}"
    # the acknowledgement's line also writes to the socket; the client port's encoding is not the peers'
    assert script._encoding_frame(
        [*root, f"NativeConnection._receive_peer_batches (okapikv/server/native.py:{ack_write})"]) is None
    assert script._encoding_frame([*root, "encode_frame (okapikv/wire/packed.py:336)"]) is None
    assert script._encoding_frame([*root, "result_fields (okapikv/wire/convert.py:300)"]) is None
