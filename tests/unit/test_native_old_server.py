"""A version 2 client against a server that speaks only version 1 of the native port (an older
release): the server's protobuf refusal of the version 2 preamble becomes one clear error that no
retry repeats, not 30 s of retries ending in "undecodable reply".

The older server is a test double: a socket that answers the way a version-1-only server does
(an id-0 protobuf error result naming the bad preamble, then close); an older release cannot be
installed beside this one in the suite."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from okapikv.client import native
from okapikv.client.operations import GET
from okapikv.client.retry import Failure
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire.frames import MAGIC_V2, encode_frame

BAD_PREAMBLE = "not an okapikv native-port client (bad preamble)"


def _version_1_refusal() -> bytes:
    refusal = pb.ResultBatch()
    result = refusal.results.add()
    result.id = 0
    result.error.code = "INVALID_ARGUMENT"
    result.error.message = BAD_PREAMBLE
    return encode_frame(refusal.SerializeToString())


@pytest.fixture
def old_server() -> Iterator[int]:
    listener = socket.create_server(("127.0.0.1", 0))  # the kernel's free port: no probing race
    preambles: list[bytes] = []

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.settimeout(10)
            preambles.append(connection.recv(len(MAGIC_V2)))
            connection.sendall(_version_1_refusal())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()
        thread.join(timeout=10)
    assert preambles == [MAGIC_V2]


def test_a_version_1_refusal_decoded_as_version_2_names_the_versions() -> None:
    frame = _version_1_refusal()[4:]  # the frame's body, after its length prefix
    with pytest.raises(native.VersionRefused, match="speaks only version 1"):
        native._WIRES[2].results(frame)


def test_the_sync_client_fails_at_once_and_does_not_retry(old_server: int) -> None:
    call = native.SyncNativeCall("127.0.0.1", old_server, None, timeout_s=10)
    with pytest.raises(Failure) as raised:
        call.call(GET, pb.GetRequest(key=b"k").SerializeToString(), timeout_s=10)
    failure = raised.value
    assert failure.code == native.VERSION_REFUSED and not failure.retryable
    assert "speaks only version 1" in failure.details and BAD_PREAMBLE in failure.details
