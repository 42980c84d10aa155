"""The native port's versions (``okapikv.wire.frames``) against a real server: version 2 (msgpack)
and version 1 (protobuf, older clients) served side by side on one port, over the same data; an
unknown version refused with an error that names the versions served; a version 2 connection's
refusals in msgpack; and this project's clients on version 2."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from integration_support import RunningCluster, cluster_processes

from okapikv.client import AsyncClient, Client, native
from okapikv.cluster.config import split_address
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import packed
from okapikv.wire.frames import MAGIC, MAGIC_V2, FrameDecoder, encode_frame


@pytest.fixture(scope="module")
def solo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningCluster]:
    with cluster_processes(Path(tmp_path_factory.mktemp("versions"))) as (make, _):
        yield make(dcs=("solo",), partitions=1, max_message_bytes=2 << 20)


def _endpoint(cluster: RunningCluster) -> tuple[str, int]:
    info = cluster.stub(0, 0).ClusterInfo(pb.ClusterInfoRequest(), timeout=5)
    return split_address(cluster.address(0, 0))[0], info.native_port


def _refused(cluster: RunningCluster) -> int:
    stats = json.loads(cluster.stub(0, 0).Stats(pb.StatsRequest(), timeout=5).json)
    count: int = stats["driver"]["native_refused"]
    return count


class _Connection:
    """A raw native-port connection: one frame out, the frames that answer it back."""

    def __init__(self, endpoint: tuple[str, int], preamble: bytes) -> None:
        self.socket = socket.create_connection(endpoint, timeout=5)
        self.socket.sendall(preamble)
        self.decoder = FrameDecoder()

    def exchange(self, frame: bytes) -> bytes:
        self.socket.sendall(frame)
        frames: list[bytes] = []
        while not frames:
            chunk = self.socket.recv(65536)
            assert chunk, "the server closed the connection"
            frames = self.decoder.feed(chunk)
        assert len(frames) == 1
        return frames[0]

    def rest(self) -> list[bytes]:
        """Every frame until the server closes the connection."""
        frames: list[bytes] = []
        while chunk := self.socket.recv(65536):
            frames += self.decoder.feed(chunk)
        self.socket.close()
        return frames


def _v1(operation: pb.Operation) -> bytes:
    return encode_frame(pb.OperationBatch(operations=[operation]).SerializeToString())


def _v2(operation: packed.Operation) -> bytes:
    return packed.encode_frame(packed.OperationBatch([operation]))


def test_old_and_new_preambles_are_served_side_by_side(solo: RunningCluster) -> None:
    endpoint = _endpoint(solo)
    old, new = _Connection(endpoint, MAGIC), _Connection(endpoint, MAGIC_V2)
    (put,) = packed.decode_results(new.exchange(_v2(packed.Put(1, b"from-v2", b"msgpack")))).results
    assert isinstance(put, packed.PutResult) and put.id == 1 and put.timestamp > 0 and len(put.session.stable) == 1
    written = pb.ResultBatch.FromString(old.exchange(_v1(pb.Operation(
        id=2, put=pb.PutRequest(key=b"from-v1", value=b"protobuf"))))).results[0]
    assert written.id == 2 and written.WhichOneof("result") == "put"
    read = pb.ResultBatch.FromString(old.exchange(_v1(pb.Operation(id=3, get=pb.GetRequest(key=b"from-v2")))))
    assert read.results[0].get.found and read.results[0].get.value == b"msgpack"
    (got,) = packed.decode_results(new.exchange(_v2(packed.Get(4, b"from-v1")))).results
    assert isinstance(got, packed.GetResult) and got == packed.GetResult(4, True, b"protobuf", got.session)
    (missing,) = packed.decode_results(new.exchange(_v2(packed.Get(5, b"no-such-key")))).results
    assert isinstance(missing, packed.GetResult) and not missing.found and missing.value == b""
    for connection in (old, new):
        connection.socket.close()


def test_an_unknown_preamble_version_is_refused_with_a_clear_error(solo: RunningCluster) -> None:
    refused = _refused(solo)
    connection = _Connection(_endpoint(solo), b"OKAPIKV9")
    (frame,) = connection.rest()  # answered in version 1: the client's own version is unknown
    (result,) = pb.ResultBatch.FromString(frame).results
    assert result.id == 0 and result.error.code == "INVALID_ARGUMENT"
    assert result.error.message == ("unknown preamble: native-port protocol version '9' is not served here "
                                    "(this server speaks version 1, 2)")
    assert _refused(solo) == refused + 1
    with Client(solo.address(0, 0), timeout_s=10) as client:
        client.put(b"after-v9", b"fine")
        assert client.get(b"after-v9") == b"fine"


@pytest.mark.parametrize("payload, reason", [
    (encode_frame(b"\xc1 not msgpack"), "a frame is not an OperationBatch"),
    (encode_frame(b"\x91\x91\x93\x02\xff\xa1k"), "Expected `int` >= 0"),  # a negative operation id
    (struct.pack(">I", 3 << 20), "exceeds the limit"),  # the cluster's limit is 2 MiB
])
def test_a_version_2_connection_is_refused_in_msgpack(solo: RunningCluster, payload: bytes, reason: str) -> None:
    connection = _Connection(_endpoint(solo), MAGIC_V2)
    connection.socket.sendall(payload)
    (frame,) = connection.rest()
    (result,) = packed.decode_results(frame).results
    assert isinstance(result, packed.Error) and result.id == 0 and result.code == "INVALID_ARGUMENT"
    assert reason in result.message


def test_the_clients_speak_version_2(solo: RunningCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    assert native.VERSION == 2
    carried: list[int] = []
    frame_of = packed.frame_of

    def counted(batch: list[bytes]) -> bytes:
        carried.append(len(batch))
        return frame_of(batch)

    monkeypatch.setattr(native._WIRES[2], "frame", counted)
    with Client(solo.address(0, 0), timeout_s=10) as client:
        client.put("v2-sync", "one")
        assert client.get("v2-sync") == b"one"
        assert client.scan(b"v2-", b"v2-~") == [(b"v2-sync", b"one")]
    sync_batches = len(carried)
    assert sync_batches >= 3

    async def run() -> list[Any]:
        async with AsyncClient(solo.address(0, 0), timeout_s=10) as client:
            sessions = [client.fork() for _ in range(8)]
            await asyncio.gather(*(s.put(f"v2-async-{i}", f"{i}") for i, s in enumerate(sessions)))
            return [await client.read_tx([f"v2-async-{i}" for i in range(8)]), await client.incr("v2-count", 3),
                    (await client.expire("v2-sync", persist=True)).value]

    assert asyncio.run(run()) == [[f"{i}".encode() for i in range(8)], 3, b"one"]
    assert len(carried) > sync_batches
