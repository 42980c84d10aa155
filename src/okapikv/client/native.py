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

Both speak version 2 of the native port (``okapikv.wire.frames``: msgpack, ``okapikv.wire.packed``).
The requests are built as protobuf bytes once, as the unary RPCs and the gRPC stream send them
(``okapikv.client.operations``), and carried over to msgpack when their batch leaves
(``packed.frame_of``), but for those queued in msgpack already (``_Pipeline.enqueue_packed``: the
RESP port's forwarded commands); results
arrive as ``packed`` structs, which answer what the client reads of a ``pb.Result`` (the case
through ``packed.case_of``, then the same field names).

Both set TCP keepalive and ``TCP_USER_TIMEOUT`` (``okapikv.tcp``): a server that went silent (a
network cut without a reset) breaks an idle connection within about 20 s, so the next operation is not
sent into a dead connection but fails as never sent and is retried on a new one.
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
from collections.abc import Callable, Sequence
from typing import Any, Protocol, cast

import grpc
import grpc.aio
from google.protobuf.message import DecodeError

from okapikv.client.retry import Failure
from okapikv.tcp import CLIENT_KEEPALIVE_S, CLIENT_USER_TIMEOUT_S, set_liveness_options
from okapikv.tls import ClientTls, client_ssl_context
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc
from okapikv.wire import packed
from okapikv.wire.frames import MAGIC, MAGIC_V2, FrameDecoder, FrameError, encode_frame

#: Operations per message when more are queued. Small batches let the server work on the first
#: while the client still builds the next and the client work on the first results while the
#: server computes the rest; one batch of everything makes them take turns. YCSB-A, 64 sessions,
#: one partition on the 2-core VM: one 64-operation batch 16-18k ops/s (each end idle half the
#: time); over gRPC, 16 per message 26.7k (8: 17.3k, gRPC's cost per message dominates); over the
#: native port, 8 per message 37.1k (16: 31.9k).
GRPC_CHUNK = 16
NATIVE_CHUNK = 8


PIPELINE_METHOD = "/okapikv.KeyValue/Pipeline"
#: The native-port version the clients speak (``okapikv.wire.frames``); 1 (protobuf) is there to
#: compare the two (``scripts/measure_native_wire.py``), read when a connection opens.
VERSION = 2
#: The failure code of ``VersionRefused``: not retryable (``okapikv.client.retry``).
VERSION_REFUSED = "FAILED_PRECONDITION"


class VersionRefused(Exception):
    """A server that speaks only version 1 of the native port refused this client's version 2
    preamble: no retry can change that, so the operation fails at once with this reason."""


def _packed_results(frame: bytes) -> Any:
    """A version 2 result batch; a version 1 refusal (an older server's answer to the version 2
    preamble, protobuf where msgpack was expected) raises ``VersionRefused``."""
    try:
        return packed.decode_results(frame).results
    except packed.DecodeError:
        try:
            results = pb.ResultBatch.FromString(frame).results
        except DecodeError:
            results = []
        if len(results) == 1 and results[0].id == 0 and results[0].WhichOneof("result") == "error":
            raise VersionRefused(
                f"the server speaks only version 1 of the native port and refused version 2 "
                f"({results[0].error.message}): upgrade the server, or set "
                f"okapikv.client.native.VERSION = 1") from None
        raise


def _protobuf_frame(elements: list[bytes]) -> bytes:
    return encode_frame(b"".join(elements))


class _Wire:
    """One version's preamble, batch framing and result decoding."""

    def __init__(self, version: int) -> None:
        self.preamble = MAGIC_V2 if version == 2 else MAGIC
        #: a batch (a list of operations, ``okapikv.client.aio._Pipeline``) as a frame
        self.frame: Callable[[list[bytes]], bytes] = packed.frame_of if version == 2 else _protobuf_frame
        self.results: Any = _packed_results if version == 2 else (
            lambda frame: pb.ResultBatch.FromString(frame).results)


_WIRES = {1: _Wire(1), 2: _Wire(2)}
_DECODE_ERRORS = (FrameError, DecodeError, packed.DecodeError)


def _identity(data: bytes) -> bytes:
    return data


def _host_of(address: str) -> str:
    return address.rpartition(":")[0].strip("[]")


def _refusal(results: Sequence[Any]) -> str | None:
    """The reason of a server's refusal (an id-0 error result), if ``results`` is one."""
    if len(results) == 1 and results[0].id == 0:
        which, body = packed.case_of(results[0])
        if which == "error":
            return f"{body.code}: {body.message}"
    return None


class Receiver(Protocol):
    """What a pipeline's call reports to (``okapikv.client.aio._Pipeline``): that it can send (it
    does not before), each result batch as it arrives, and the one failure that ends the call."""

    def on_ready(self) -> None: ...

    def on_batch(self, results: Sequence[Any]) -> None:
        """The results of one batch (``pb.Result`` or ``packed`` results)."""

    def on_failure(self, failure: Failure) -> None: ...


def failure_of(error: grpc.RpcError, *, sent: bool = True) -> Failure:
    """A failed gRPC call (of either gRPC API) as the ``Failure`` the policy judges."""
    code = error.code() or grpc.StatusCode.UNKNOWN
    failure = Failure(code.name, error.details() or "", sent=sent)
    failure.__cause__ = error
    return failure


def _as_failure(error: BaseException, doing: str) -> Failure:
    """Whatever ended a call, as the (retryable) failure of its operations."""
    if isinstance(error, Failure):
        return error
    if isinstance(error, grpc.aio.AioRpcError):  # a stream that broke, whatever its status: retried
        failure = Failure(error.code().name, error.details() or "stream failed")
        return failure if failure.retryable else Failure("UNAVAILABLE", f"{doing} failed: {failure}")
    return Failure("UNAVAILABLE", f"{doing} failed: {error!r}")


class _FrameProtocol(asyncio.Protocol):
    """Hands the result batches of one connection to the receiver as they arrive."""

    def __init__(self, receiver: Receiver, wire: _Wire) -> None:
        self.transport: asyncio.Transport | None = None
        self.wire = wire
        self.decoder = FrameDecoder()
        self.receiver = receiver
        self.failed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not subclasses

    def data_received(self, data: bytes) -> None:
        try:
            batches = [self.wire.results(frame) for frame in self.decoder.feed(data)]
        except VersionRefused as error:
            self._stop(str(error), code=VERSION_REFUSED)
            return
        except _DECODE_ERRORS as error:
            self._stop(f"undecodable reply: {error}")
            return
        for results in batches:
            reason = _refusal(results)
            if reason is not None:
                self._stop(f"the server refused the connection: {reason}")
                return
            self.receiver.on_batch(results)

    def _stop(self, reason: str, code: str = "UNAVAILABLE") -> None:
        if not self.failed:
            self.failed = True
            self.receiver.on_failure(Failure(code, reason))
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop(f"the server closed the connection{f' ({exc})' if exc else ''}")


class AsyncNativeCall:
    """One native connection, opened in the background on creation (``ready`` once open, when the
    receiver hears ``on_ready``); falls back to the gRPC ``Pipeline`` stream when the server has no
    native port.

    No task of its own once open: ``send`` writes to the socket, and the connection's protocol
    hands result batches straight to the receiver. A writer and a reader task cost two task
    wake-ups per batch (~2 us per operation at 8 operations per batch)."""

    def __init__(self, stub: pb_grpc.KeyValueStub, channel: grpc.aio.Channel, address: str, tls: ClientTls | None,
                 timeout_s: float, receiver: Receiver) -> None:
        self._stub = stub
        self._channel = channel
        self._address = address
        self._tls = tls
        self._timeout_s = timeout_s
        self._receiver = receiver
        self._protocol: _FrameProtocol | None = None
        self._grpc_call: GrpcCall | None = None
        self.ready = False
        #: the connection carries version 2 batches (operations may be queued in that form)
        self.packed = False
        self.chunk = NATIVE_CHUNK
        self._opening = asyncio.get_running_loop().create_task(self._open())
        self._opening.add_done_callback(self._opened)

    async def _open(self) -> None:
        info = await self._stub.ClusterInfo(pb.ClusterInfoRequest(), timeout=self._timeout_s)
        if not info.native_port:
            self._grpc_call = GrpcCall(self._channel, self._receiver)
            self.chunk = GRPC_CHUNK
            return
        host = _host_of(self._address)
        context = None if self._tls is None else client_ssl_context(self._tls)
        server_hostname = None if context is None else (self._tls.server_name if self._tls else None) or host
        loop = asyncio.get_running_loop()
        wire = _WIRES[VERSION]
        transport, protocol = await loop.create_connection(
            lambda: _FrameProtocol(self._receiver, wire), host, info.native_port, ssl=context,
            server_hostname=server_hostname)
        sock = transport.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        set_liveness_options(sock, keepalive_s=CLIENT_KEEPALIVE_S, user_timeout_s=CLIENT_USER_TIMEOUT_S)
        transport.write(wire.preamble)
        self._protocol = protocol
        self.packed = VERSION == 2

    def _opened(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            self._receiver.on_failure(_as_failure(error, "opening the connection"))
            return
        self.ready = True
        self._receiver.on_ready()

    def send(self, batch: list[bytes]) -> None:
        """Send one ``OperationBatch`` (its operations, ``_Wire.frame``) once ``ready`` (failures
        reach the receiver)."""
        protocol = self._protocol
        if protocol is not None:
            if not protocol.failed:
                assert protocol.transport is not None
                protocol.transport.write(protocol.wire.frame(batch))
        else:
            assert self._grpc_call is not None, "send before the call is ready"
            self._grpc_call.send(batch)

    def cancel(self) -> None:
        if not self._opening.done():
            self._opening.cancel()
        if self._grpc_call is not None:
            self._grpc_call.cancel()
        if self._protocol is not None and self._protocol.transport is not None:
            self._protocol.transport.close()

    async def close(self) -> None:
        self.cancel()
        if self._grpc_call is not None:
            await self._grpc_call.close()


class GrpcCall:
    """The gRPC ``Pipeline`` stream behind the same interface (batches go out as the bytes they
    already are). grpc.aio writes and reads are coroutines, so this one keeps a writer and a reader
    task."""

    chunk = GRPC_CHUNK
    ready = True
    packed = False  # protobuf batches only

    def __init__(self, channel: grpc.aio.Channel, receiver: Receiver) -> None:
        self._receiver = receiver
        self._call = channel.stream_stream(PIPELINE_METHOD, request_serializer=_identity,
                                           response_deserializer=pb.ResultBatch.FromString)()
        self._outgoing: deque[bytes] = deque()
        self._wakeup = asyncio.Event()
        loop = asyncio.get_running_loop()
        self._tasks = (loop.create_task(self._write_loop()), loop.create_task(self._read_loop()))

    def send(self, batch: list[bytes]) -> None:
        self._outgoing.append(b"".join(batch))
        self._wakeup.set()

    async def _write_loop(self) -> None:
        outgoing = self._outgoing
        try:
            while True:
                if not outgoing:
                    self._wakeup.clear()
                    await self._wakeup.wait()
                    continue
                await self._call.write(outgoing.popleft())
        except asyncio.CancelledError:
            raise
        except Exception as error:
            self._receiver.on_failure(_as_failure(error, "stream write"))

    async def _read_loop(self) -> None:
        try:
            while True:
                batch = await self._call.read()
                if batch is grpc.aio.EOF:
                    self._receiver.on_failure(Failure("UNAVAILABLE", "the server closed the stream"))
                    return
                self._receiver.on_batch(batch.results)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            self._receiver.on_failure(_as_failure(error, "stream read"))

    def cancel(self) -> None:
        self._call.cancel()
        for task in self._tasks:
            task.cancel()

    async def close(self) -> None:
        self.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


class SyncNativeCall:
    """One blocking native connection carrying one operation at a time (see the module doc).

    Failures raise a ``Failure`` whose ``sent`` is False when the operation certainly did not reach
    the server (the connection failed before the whole frame was written: a server never acts on
    part of a frame).
    """

    def __init__(self, host: str, port: int, tls: ClientTls | None, timeout_s: float) -> None:
        self._ids = itertools.count(1)
        self._decoder = FrameDecoder()
        self._pending: deque[Any] = deque()  # ``packed`` results
        self.failure: Failure | None = None
        try:
            sock = socket.create_connection((host, port), timeout=timeout_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            set_liveness_options(sock, keepalive_s=CLIENT_KEEPALIVE_S, user_timeout_s=CLIENT_USER_TIMEOUT_S)
            if tls is not None:
                sock = client_ssl_context(tls).wrap_socket(sock, server_hostname=tls.server_name or host)
        except OSError as error:
            raise Failure("UNAVAILABLE", f"cannot connect to the native port {host}:{port}: {error}",
                          sent=False) from None
        self._socket = sock
        self._wire = _WIRES[VERSION]
        self._preamble = self._wire.preamble

    @property
    def failed(self) -> bool:
        return self.failure is not None

    def _fail(self, code: str, details: str, *, sent: bool) -> Failure:
        self.close()
        self.failure = Failure(code, details)
        return Failure(code, details, sent=sent)

    def call(self, kind: Any, request: bytes, timeout_s: float) -> Any:
        """Send one operation (``kind``: an ``operations.OperationKind``) and wait for its result."""
        operation_id = next(self._ids)
        element = kind.operation(operation_id, request)
        if self.failure is not None:
            raise self.failure.with_sent(False)
        if self._closed_by_server():  # then this operation can never have reached it
            raise self._fail("UNAVAILABLE", "the server closed the connection", sent=False)
        data = self._preamble + self._wire.frame([element])
        self._preamble = b""
        sock = self._socket
        deadline = time.monotonic() + timeout_s
        try:
            sock.settimeout(max(timeout_s, 0.001))
            sock.sendall(data)
        except OSError as error:
            raise self._fail("UNAVAILABLE", f"native connection broke: {error}", sent=False) from None
        while True:
            while self._pending:
                result = self._pending.popleft()
                if result.id == operation_id:
                    return result
                # else: the result of an operation that timed out earlier
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._fail("DEADLINE_EXCEEDED", "no reply before the deadline", sent=True)
            try:
                sock.settimeout(remaining)
                data = sock.recv(1 << 16)
            except TimeoutError:
                raise self._fail("DEADLINE_EXCEEDED", "no reply before the deadline",
                                 sent=True) from None
            except OSError as error:
                raise self._fail("UNAVAILABLE", f"native connection broke: {error}",
                                 sent=True) from None
            if not data:
                raise self._fail("UNAVAILABLE", "the server closed the connection", sent=True)
            self._absorb(data, sent=True)

    def _absorb(self, data: bytes, *, sent: bool) -> None:
        """Queue the results in ``data``; a refusal or undecodable bytes fail the connection."""
        try:
            batches = [self._wire.results(frame) for frame in self._decoder.feed(data)]
        except VersionRefused as error:
            raise self._fail(VERSION_REFUSED, str(error), sent=sent) from None
        except _DECODE_ERRORS as error:
            raise self._fail("UNAVAILABLE", f"undecodable reply: {error}", sent=sent) from None
        for results in batches:
            reason = _refusal(results)
            if reason is not None:
                raise self._fail("UNAVAILABLE", f"the server refused the connection: {reason}",
                                 sent=sent)
            self._pending.extend(results)

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
