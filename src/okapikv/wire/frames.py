"""The native port's framing: Pipeline batches over a plain TCP (or TLS) connection.

Why a second transport for the same messages: grpc.aio hands every message between the event loop
and the C core's completion-queue thread, and on the 2-core VM one message each way costs about
85-105 us of client CPU and 110 us of wall time, against 15-18 us over a uvloop socket (measured
with a 400-byte echo, two messages in flight). Pipelined batches amortize that, but the blocking
client sends one operation at a time, and small batches are what keep client and server working
at the same time (``okapikv.client.aio``). So the servers also listen on a native port that carries
exactly what the ``Pipeline`` RPC carries, and every other RPC (ClusterInfo, Stats, peers) stays
on gRPC.

The format, both directions after a fixed preamble the client sends first:

- preamble: 8 bytes, ``OKAPIKV`` and a version digit, so that a stray client (an HTTP probe, a
  gRPC client dialing the wrong port, garbage) is refused on its first bytes instead of being
  parsed as a frame length, and so that a client says which messages it speaks:
  ``MAGIC_V2`` (``OKAPIKV2``, what this project's clients send): msgpack (``okapikv.wire.packed``);
  ``MAGIC`` (``OKAPIKV1``, older clients): protobuf. A server serves both;
- frames: a 4-byte big-endian length, then that many bytes of one message: an ``OperationBatch``
  from the client, a ``ResultBatch`` from the server (the messages of the Pipeline RPC, with the
  same operation ids), serialized as the preamble's version says.

A server that refuses a connection (a bad or unknown preamble, a frame over the cluster's message
limit, bytes that do not parse) sends one ``ResultBatch`` whose only result has id 0 and an error
saying why, then closes the connection; client operation ids start at 1. The refusal is in the
connection's version once its preamble is known, in version 1 (protobuf) before that.

Everything here is pure (bytes in, bytes out) so that both sides and the tests share it.
"""

from __future__ import annotations

import struct

MAGIC = b"OKAPIKV1"
MAGIC_V2 = b"OKAPIKV2"
#: What every client preamble starts with; the byte after it is the version.
MAGIC_PREFIX = b"OKAPIKV"
#: The preamble of a peer link (``okapikv.server.links``): ``PeerBatch`` frames one way, ``LinkAck``
#: frames back, exactly what the ``Peer.Link`` RPC carries.
PEER_MAGIC = b"OKAPIPR1"
_LENGTH = struct.Struct(">I")
HEADER_BYTES = _LENGTH.size
#: Largest frame a client accepts (results of a big SCAN): the 4-byte length's own limit.
MAX_FRAME_BYTES = (1 << 32) - 1


class FrameError(ValueError):
    """The peer broke the framing: the connection cannot be trusted any further."""


def encode_frame(payload: bytes) -> bytes:
    return _LENGTH.pack(len(payload)) + payload


class FrameDecoder:
    """Incremental decoder: ``feed`` whatever arrived, get back the complete frames' payloads.

    ``expect_magic`` (the server side) checks the preamble first: one of ``preambles`` (``MAGIC``
    alone by default), which ``preamble`` then holds. ``max_frame_bytes`` bounds one frame: the
    server's is the cluster's message limit, checked from the length alone, so an oversized frame is
    refused before its bytes are buffered.
    """

    __slots__ = ("_buffer", "_max_frame_bytes", "_need_magic", "_preambles", "preamble")

    def __init__(self, *, max_frame_bytes: int = MAX_FRAME_BYTES, expect_magic: bool = False,
                 preambles: tuple[bytes, ...] = (MAGIC,)) -> None:
        self._buffer = bytearray()
        self._max_frame_bytes = max_frame_bytes
        self._need_magic = expect_magic
        self._preambles = preambles
        self.preamble: bytes | None = None

    @property
    def buffered(self) -> int:
        """Bytes received and not yet part of a complete frame."""
        return len(self._buffer)

    @property
    def pending_bytes(self) -> int:
        """What the incomplete frame takes once complete: its length prefix and announced length
        once the prefix is in, else the bytes received so far (0: nothing pending). This is what a
        partial frame counts against a server's input budget (``okapikv.server.budgets``)."""
        buffer = self._buffer
        if self._need_magic or len(buffer) < HEADER_BYTES:
            return len(buffer)
        length: int = _LENGTH.unpack_from(buffer, 0)[0]
        return HEADER_BYTES + length

    def feed(self, data: bytes) -> list[bytes]:
        """Add ``data``; return the payloads of the frames it completes. Raises ``FrameError``."""
        buffer = self._buffer
        buffer += data
        if self._need_magic:
            head = bytes(buffer[:len(MAGIC)])  # every preamble has MAGIC's length
            if head not in self._preambles:
                if len(head) < len(MAGIC) and any(preamble.startswith(head) for preamble in self._preambles):
                    return []
                raise FrameError(self._refusal(head))
            self.preamble = head
            del buffer[: len(MAGIC)]
            self._need_magic = False
        frames: list[bytes] = []
        offset = 0
        size = len(buffer)
        while size - offset >= HEADER_BYTES:
            length = _LENGTH.unpack_from(buffer, offset)[0]
            if length > self._max_frame_bytes:
                raise FrameError(f"a frame of {length} bytes exceeds the limit of {self._max_frame_bytes} bytes")
            end = offset + HEADER_BYTES + length
            if end > size:
                break
            frames.append(bytes(buffer[offset + HEADER_BYTES:end]))
            offset = end
        if offset:
            del buffer[:offset]
        return frames

    def _refusal(self, head: bytes) -> str:
        if head.startswith(MAGIC_PREFIX):
            served = ", ".join(sorted(preamble[len(MAGIC_PREFIX):].decode("ascii", "replace")
                                      for preamble in self._preambles if preamble.startswith(MAGIC_PREFIX)))
            version = head[len(MAGIC_PREFIX):].decode("ascii", "replace")
            return (f"unknown preamble: native-port protocol version {version!r} is not served here "
                    f"(this server speaks version {served})")
        return "not an okapikv native-port client (bad preamble)"
