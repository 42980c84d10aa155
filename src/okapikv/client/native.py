"""Client ends of the native port (``okapikv.wire.frames``): the Pipeline RPC's batches over TCP.

Both clients learn a server's native port by asking that server's ``ClusterInfo`` each time they
open a connection (once per server, and again only after a failure), so a server restarted on
another free port is found again, and a server that serves none (``native = false``) is used over
its gRPC ``Pipeline`` stream instead.

- ``AsyncNativeCall`` stands where ``_Pipeline`` would hold a grpc.aio stream call: ``write``,
  ``read`` (``grpc.aio.EOF`` once the server closed) and ``cancel``.
- ``SyncNativeCall`` stands where the blocking client would hold a ``_SyncStream``: one operation
  at a time on a blocking socket in the caller's thread, no helper thread (a round trip costs two
  system calls; gRPC's blocking stream crosses two threads each way).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import select
import socket
import ssl
import time
from collections import deque
from typing import Any, cast

import grpc
import grpc.aio
from google.protobuf.message import DecodeError

from okapikv.client.retry import RetryableError
from okapikv.tls import ClientTls, client_ssl_context
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc
from okapikv.wire.convert import encode_varint
from okapikv.wire.frames import MAGIC, FrameDecoder, FrameError, encode_frame

#: Operations per message when more are queued. Small batches let the server work on the first
#: while the client still builds the next and the client work on the first results while the
#: server computes the rest; one batch of everything makes them take turns. YCSB-A, 64 sessions,
#: one partition on the 2-core VM: one 64-operation batch 16-18k ops/s (each end idle half the
#: time); over gRPC, 16 per message 26.7k (8: 17.3k, gRPC's cost per message dominates); over the
#: native port, 8 per message 37.1k (16: 31.9k).
GRPC_CHUNK = 16
NATIVE_CHUNK = 8


PIPELINE_METHOD = "/okapikv.KeyValue/Pipeline"
_OPERATION_TAG = b"\x0a"  # OperationBatch.operations: field 1, length-delimited


def _identity(data: bytes) -> bytes:
    return data


def frame_operation(encoded: bytes) -> bytes:
    """One serialized ``Operation`` as an element of ``OperationBatch.operations``: a batch is then
    the concatenation of its elements, which protobuf parses like one built with ``add()``."""
    return _OPERATION_TAG + encode_varint(len(encoded)) + encoded


def _host_of(address: str) -> str:
    return address.rpartition(":")[0].strip("[]")


def _refusal(batch: pb.ResultBatch) -> str | None:
    """The reason of a server's refusal (an id-0 error result), if ``batch`` is one."""
    results = batch.results
    if len(results) == 1 and results[0].id == 0 and results[0].WhichOneof("result") == "error":
        return f"{results[0].error.code}: {results[0].error.message}"
    return None


class _FrameProtocol(asyncio.Protocol):
    """Collects the result batches of one connection for ``AsyncNativeCall.read``."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.decoder = FrameDecoder()
        self.batches: deque[pb.ResultBatch] = deque()
        self.failure: RetryableError | None = None
        self.arrived = asyncio.Event()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not subclasses

    def data_received(self, data: bytes) -> None:
        try:
            batches = [pb.ResultBatch.FromString(frame) for frame in self.decoder.feed(data)]
        except (FrameError, DecodeError) as error:
            self._stop(f"undecodable reply: {error}")
            return
        for batch in batches:
            reason = _refusal(batch)
            if reason is not None:
                self._stop(f"the server refused the connection: {reason}")
                return
            self.batches.append(batch)
        self.arrived.set()

    def _stop(self, reason: str) -> None:
        if self.failure is None:
            self.failure = RetryableError(grpc.StatusCode.UNAVAILABLE, reason)
        self.arrived.set()
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.failure is None:
            self.failure = RetryableError(grpc.StatusCode.UNAVAILABLE,
                                          f"the server closed the connection{f' ({exc})' if exc else ''}")
        self.arrived.set()


class AsyncNativeCall:
    """One native connection, opened in the background on creation; falls back to the gRPC
    ``Pipeline`` stream when the server has no native port."""

    def __init__(self, stub: pb_grpc.KeyValueStub, channel: grpc.aio.Channel, address: str, tls: ClientTls | None,
                 timeout_s: float) -> None:
        self._stub = stub
        self._channel = channel
        self._address = address
        self._tls = tls
        self._timeout_s = timeout_s
        self._protocol: _FrameProtocol | None = None
        self._grpc_call: Any = None
        self.chunk = NATIVE_CHUNK
        self._opening = asyncio.get_running_loop().create_task(self._open())

    async def _open(self) -> None:
        info = await self._stub.ClusterInfo(pb.ClusterInfoRequest(), timeout=self._timeout_s)
        if not info.native_port:
            self._grpc_call = GrpcCall(self._channel)
            self.chunk = GRPC_CHUNK
            return
        host = _host_of(self._address)
        context = None if self._tls is None else client_ssl_context(self._tls)
        server_hostname = None if context is None else (self._tls.server_name if self._tls else None) or host
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.create_connection(
            _FrameProtocol, host, info.native_port, ssl=context, server_hostname=server_hostname)
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        transport.write(MAGIC)
        self._protocol = protocol

    async def _ready(self) -> _FrameProtocol | None:
        if not self._opening.done():
            await asyncio.shield(self._opening)
        self._opening.result()  # raises what opening raised
        return self._protocol

    async def write(self, batch: bytes) -> None:
        """Send one serialized ``OperationBatch``."""
        protocol = await self._ready()
        if protocol is None:
            await self._grpc_call.write(batch)
            return
        if protocol.failure is not None:
            raise protocol.failure
        assert protocol.transport is not None
        protocol.transport.write(encode_frame(batch))

    async def read(self) -> Any:
        protocol = await self._ready()
        if protocol is None:
            return await self._grpc_call.read()
        while not protocol.batches:
            if protocol.failure is not None:
                raise protocol.failure
            protocol.arrived.clear()
            await protocol.arrived.wait()
        return protocol.batches.popleft()

    def cancel(self) -> None:
        if not self._opening.done():
            self._opening.cancel()
        if self._grpc_call is not None:
            self._grpc_call.cancel()
        if self._protocol is not None and self._protocol.transport is not None:
            self._protocol.transport.close()


class GrpcCall:
    """The gRPC ``Pipeline`` stream, with the interface ``_Pipeline`` expects (batches go out as
    the bytes they already are)."""

    chunk = GRPC_CHUNK

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._call = channel.stream_stream(PIPELINE_METHOD, request_serializer=_identity,
                                           response_deserializer=pb.ResultBatch.FromString)()

    async def write(self, batch: bytes) -> None:
        await self._call.write(batch)

    async def read(self) -> Any:
        return await self._call.read()

    def cancel(self) -> None:
        self._call.cancel()


class SyncNativeCall:
    """One blocking native connection carrying one operation at a time (see the module doc).

    Failures raise ``error_type(code, details, sent=...)``, the blocking client's ``StreamError``:
    ``sent`` is False when the operation certainly did not reach the server (the connection failed
    before the whole frame was written: a server never acts on part of a frame).
    """

    def __init__(self, host: str, port: int, tls: ClientTls | None, timeout_s: float, error_type: Any) -> None:
        self._error_type = error_type
        self._ids = itertools.count(1)
        self._decoder = FrameDecoder()
        self._pending: deque[pb.Result] = deque()
        self.failure: Any = None
        try:
            sock = socket.create_connection((host, port), timeout=timeout_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if tls is not None:
                sock = client_ssl_context(tls).wrap_socket(sock, server_hostname=tls.server_name or host)
        except OSError as error:
            raise error_type(grpc.StatusCode.UNAVAILABLE, f"cannot connect to the native port {host}:{port}: "
                             f"{error}", sent=False) from None
        self._socket = sock
        self._preamble = MAGIC

    @property
    def failed(self) -> bool:
        return self.failure is not None

    def _fail(self, code: grpc.StatusCode, details: str, *, sent: bool) -> Any:
        self.close()
        self.failure = self._error_type(code, details)
        return self._error_type(code, details, sent=sent)

    def call(self, kind: Any, request: dict[str, Any], timeout_s: float) -> pb.Result:
        """Send one operation (``kind``: an ``operations.OperationKind``) and wait for its result."""
        operation = kind.operation(next(self._ids), request)
        if self.failure is not None:
            raise self.failure.with_sent(False)
        if self._closed_by_server():  # then this operation can never have reached it
            raise self._fail(grpc.StatusCode.UNAVAILABLE, "the server closed the connection", sent=False)
        data = self._preamble + encode_frame(pb.OperationBatch(operations=[operation]).SerializeToString())
        self._preamble = b""
        sock = self._socket
        deadline = time.monotonic() + timeout_s
        try:
            sock.settimeout(max(timeout_s, 0.001))
            sock.sendall(data)
        except OSError as error:
            raise self._fail(grpc.StatusCode.UNAVAILABLE, f"native connection broke: {error}", sent=False) from None
        while True:
            while self._pending:
                result = self._pending.popleft()
                if result.id == operation.id:
                    return result
                # else: the result of an operation that timed out earlier
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._fail(grpc.StatusCode.DEADLINE_EXCEEDED, "no reply before the deadline", sent=True)
            try:
                sock.settimeout(remaining)
                data = sock.recv(1 << 16)
            except TimeoutError:
                raise self._fail(grpc.StatusCode.DEADLINE_EXCEEDED, "no reply before the deadline",
                                 sent=True) from None
            except OSError as error:
                raise self._fail(grpc.StatusCode.UNAVAILABLE, f"native connection broke: {error}",
                                 sent=True) from None
            if not data:
                raise self._fail(grpc.StatusCode.UNAVAILABLE, "the server closed the connection", sent=True)
            self._absorb(data, sent=True)

    def _absorb(self, data: bytes, *, sent: bool) -> None:
        """Queue the results in ``data``; a refusal or undecodable bytes fail the connection."""
        try:
            batches = [pb.ResultBatch.FromString(frame) for frame in self._decoder.feed(data)]
        except (FrameError, DecodeError) as error:
            raise self._fail(grpc.StatusCode.UNAVAILABLE, f"undecodable reply: {error}", sent=sent) from None
        for batch in batches:
            reason = _refusal(batch)
            if reason is not None:
                raise self._fail(grpc.StatusCode.UNAVAILABLE, f"the server refused the connection: {reason}",
                                 sent=sent)
            self._pending.extend(batch.results)

    def _closed_by_server(self) -> bool:
        """Whether the server has closed the connection (it stopped, or was killed) since the last
        operation, found without blocking. An operation sent into such a connection fails without
        any chance of having been applied, which is what ``sent=False`` must guarantee (at-most-once
        writes are retried only then)."""
        sock = self._socket
        try:
            while select.select([sock], [], [], 0)[0]:
                sock.settimeout(0)
                try:
                    data = sock.recv(1 << 16)
                except (BlockingIOError, ssl.SSLWantReadError):
                    return False
                if not data:
                    return True
                self._absorb(data, sent=False)  # late results of operations that timed out
        except OSError:
            return True
        return False

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._socket.close()


__all__ = ["AsyncNativeCall", "GrpcCall", "SyncNativeCall", "GRPC_CHUNK", "NATIVE_CHUNK"]
