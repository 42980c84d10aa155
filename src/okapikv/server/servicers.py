"""The gRPC services of a partition server: KeyValue (clients) and Peer (other servers).

Both are adapters: KeyValue's calls and Pipeline streams go to the node (``PartitionNode.call``,
``submit_operations``) once admission control lets them (``okapikv.server.admission``); Peer's
links go to the node's ``PeerIntake`` (``okapikv.server.inbound``), as the native port's do.

Failure policy: a request the core refuses (empty or oversized key, oversized value, bad session)
is answered with its status (INVALID_ARGUMENT) and changes nothing; any unexpected exception in a
handler is logged with its traceback and answered INTERNAL, and the server keeps serving. gRPC
itself answers unknown methods (UNIMPLEMENTED), undecodable messages and oversized ones
(RESOURCE_EXHAUSTED) without reaching this code.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc
import grpc.aio

from okapikv.core.growth import session_problem
from okapikv.core.messages import ClientReply, ClientRequest, ErrorReply
from okapikv.core.session import adopt
from okapikv.server.inbound import LinkRefused, PeerIntake
from okapikv.server.node import PartitionNode
from okapikv.server.pipeline import PipelineSink
from okapikv.wire import convert
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc
from okapikv.wire.status import grpc_status

log = logging.getLogger("okapikv.server")

Request = TypeVar("Request")
Response = TypeVar("Response")
Handler = Callable[[Any, Request, grpc.aio.ServicerContext], Awaitable[Response]]


def guarded(method: Handler[Request, Response]) -> Handler[Request, Response]:
    """Answer INTERNAL (and log) when a unary handler raises; aborts pass through."""

    @functools.wraps(method)
    async def wrapper(self: Any, request: Request, context: grpc.aio.ServicerContext) -> Response:
        try:
            return await method(self, request, context)
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except Exception as error:
            log.exception("%s failed", method.__name__)
            await context.abort(grpc.StatusCode.INTERNAL, f"internal error in {method.__name__}: {error}")
            raise  # unreachable: abort raises

    return wrapper


async def _abort_on_error(reply: ClientReply, context: grpc.aio.ServicerContext) -> None:
    if isinstance(reply, ErrorReply):
        await context.abort(grpc_status(reply.code), reply.message)


class KeyValueServicer(pb_grpc.KeyValueServicer):
    def __init__(self, node: PartitionNode) -> None:
        self.node = node
        self.scalar = node.core.protocol.scalar  # its sessions travel as one time (okapikv.wire.convert)
        self._admission = node.admission

    @property
    def num_dcs(self) -> int:
        """The node's, which grows with the cluster (`okapi dc join`)."""
        return self.node.num_dcs

    async def _call(self, request: ClientRequest) -> ClientReply:
        """Run one request once admission control lets it (``okapikv.server.admission``)."""
        admission = self._admission
        if admission.backlogged():
            await admission.wait()
        return await self.node.call(request)

    @guarded
    async def Get(self, request: pb.GetRequest, context: grpc.aio.ServicerContext) -> pb.GetResponse:
        reply = await self._call(convert.get_request(request, self.node.next_request_id(), self.num_dcs))
        await _abort_on_error(reply, context)
        response = pb.GetResponse()
        convert.fill_get(response, reply, scalar=self.scalar)  # type: ignore[arg-type]
        return response

    @guarded
    async def Put(self, request: pb.PutRequest, context: grpc.aio.ServicerContext) -> pb.PutResponse:
        reply = await self._call(convert.put_request(request, self.node.next_request_id(), self.num_dcs))
        await _abort_on_error(reply, context)
        response = pb.PutResponse()
        convert.fill_write(response, reply, scalar=self.scalar)  # type: ignore[arg-type]
        return response

    @guarded
    async def Swap(self, request: pb.SwapRequest, context: grpc.aio.ServicerContext) -> pb.SwapResponse:
        reply = await self._call(convert.swap_request(request, self.node.next_request_id(), self.num_dcs))
        await _abort_on_error(reply, context)
        response = pb.SwapResponse()
        convert.fill_swap(response, reply, scalar=self.scalar)  # type: ignore[arg-type]
        return response

    @guarded
    async def Delete(self, request: pb.DeleteRequest, context: grpc.aio.ServicerContext) -> pb.DeleteResponse:
        reply = await self._call(convert.delete_request(request, self.node.next_request_id(), self.num_dcs))
        await _abort_on_error(reply, context)
        response = pb.DeleteResponse()
        convert.fill_write(response, reply, scalar=self.scalar)  # type: ignore[arg-type]
        return response

    @guarded
    async def Incr(self, request: pb.IncrRequest, context: grpc.aio.ServicerContext) -> pb.IncrResponse:
        reply = await self._call(convert.incr_request(request, self.node.next_request_id(), self.num_dcs))
        await _abort_on_error(reply, context)
        response = pb.IncrResponse()
        convert.fill_incr(response, reply, scalar=self.scalar)  # type: ignore[arg-type]
        return response

    @guarded
    async def Expire(self, request: pb.ExpireRequest, context: grpc.aio.ServicerContext) -> pb.ExpireResponse:
        reply = await self._call(convert.expire_request(request, self.node.next_request_id(), self.num_dcs))
        await _abort_on_error(reply, context)
        response = pb.ExpireResponse()
        convert.fill_expire(response, reply, scalar=self.scalar)  # type: ignore[arg-type]
        return response

    @guarded
    async def Scan(self, request: pb.ScanRequest, context: grpc.aio.ServicerContext) -> pb.ScanResponse:
        reply = await self._call(convert.scan_request(request, self.node.next_request_id(), self.num_dcs))
        await _abort_on_error(reply, context)
        response = pb.ScanResponse()
        convert.fill_scan(response, reply, scalar=self.scalar)  # type: ignore[arg-type]
        return response

    @guarded
    async def ReadTx(self, request: pb.ReadTxRequest, context: grpc.aio.ServicerContext) -> pb.ReadTxResponse:
        reply = await self._call(convert.read_tx_request(request, self.node.next_request_id(), self.num_dcs))
        await _abort_on_error(reply, context)
        response = pb.ReadTxResponse()
        convert.fill_read_tx(response, reply, scalar=self.scalar)  # type: ignore[arg-type]
        return response

    @guarded
    async def ClusterInfo(
        self, request: pb.ClusterInfoRequest, context: grpc.aio.ServicerContext
    ) -> pb.ClusterInfoResponse:
        config = self.node.config
        response = pb.ClusterInfoResponse(
            cluster_id=config.cluster_id,
            dc_names=config.dcs,
            num_partitions=config.partitions,
            protocol=config.protocol,
            dc=self.node.id.dc,
            partition=self.node.id.partition,
            max_key_bytes=config.max_key_bytes,
            max_value_bytes=config.max_value_bytes,
            max_message_bytes=config.max_message_bytes,
            native_port=self.node.native_port,
            max_read_keys=self.node.core.config.max_read_keys,
            membership_epoch=self.node.core.membership.epoch,
            dc_states=self.node.core.membership.states,
        )
        for server in config.servers:
            response.servers.add(dc=config.dc_index(server.dc), partition=server.partition, address=server.address)
        return response

    @guarded
    async def Stats(self, request: pb.StatsRequest, context: grpc.aio.ServicerContext) -> pb.StatsResponse:
        return pb.StatsResponse(json=self.node.stats_json())

    @guarded
    async def AdoptSession(
        self, request: pb.AdoptSessionRequest, context: grpc.aio.ServicerContext
    ) -> pb.AdoptSessionResponse:
        """Failover: may a session of another DC continue here (``okapikv.core.session.adopt``)?"""
        if request.from_dc >= self.num_dcs:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"from_dc {request.from_dc} out of range")
        session = convert.session_from_pb(request.session, self.num_dcs)
        # a session of a client that knows fewer DCs is padded (``okapikv.core.growth``)
        problem = session_problem(session.stable, self.num_dcs) if session.stable else "an empty session vector"
        if problem is not None or request.from_dc >= len(session.stable):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                problem or f"from_dc {request.from_dc} has no entry in the session vector")
        adoption = adopt(session, from_dc=request.from_dc, here_dc=self.node.id.dc, stable=self.node.core.stable)
        response = pb.AdoptSessionResponse(ready=adoption.ready, behind_us=adoption.behind_us)
        convert.fill_session(response.session, adoption.session, scalar=self.scalar)
        return response

    async def Pipeline(
        self, request_iterator: AsyncIterator[pb.OperationBatch], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ResultBatch]:
        sink = PipelineSink(scalar=self.scalar)
        reader = asyncio.create_task(self._read_operations(request_iterator, sink))
        try:
            while True:
                batch = await sink.next_batch()
                if batch is None:
                    break
                yield batch
            await reader  # surfaces a reader failure as the stream's status
        finally:
            sink.close()
            reader.cancel()

    async def _read_operations(self, request_iterator: AsyncIterator[pb.OperationBatch], sink: PipelineSink) -> None:
        node = self.node
        admission = self._admission
        try:
            async for batch in request_iterator:
                if admission.backlogged():  # replication first (``okapikv.server.admission``)
                    await admission.wait()
                node.submit_operations(batch, sink)
                await sink.wait_for_room()
        except asyncio.CancelledError:
            raise
        except grpc.aio.AioRpcError:
            pass  # the client went away; the writer ends with the stream
        except Exception:
            log.exception("Pipeline reader failed")
            raise
        finally:
            sink.finish_reading()


class PeerServicer(pb_grpc.PeerServicer):
    """Incoming peer links over gRPC (an ``InboundLink`` each, ``okapikv.server.inbound``).

    Who may link: with TLS on, only a caller that presented a certificate our CA signed (the
    handshake already refused any other certificate; this refuses a caller with none, which the
    client port lets in when ``client_auth = false``). Then only a batch of our own cluster id.
    """

    def __init__(self, intake: PeerIntake) -> None:
        self.intake = intake
        self.node = intake.node

    async def Link(
        self, request_iterator: AsyncIterator[pb.PeerBatch], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.LinkAck]:
        node = self.node
        loop = asyncio.get_running_loop()
        if node.config.tls is not None and not context.peer_identities():
            log.warning("%s: refused a peer link from %s without a client certificate", node.label, context.peer(),
                        extra={"event": "peer_refused", "peer": context.peer(), "reason": "no certificate"})
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "peer links need a certificate (mutual TLS)")
        link = self.intake.open(context.peer())
        batches = aiter(request_iterator)
        # The next batch is read by a task that outlives a timeout, so that an acknowledgement held
        # back leaves by its deadline (``InboundLink.owed_in``) without cancelling a read.
        reading: asyncio.Future[pb.PeerBatch] | None = None
        try:
            while True:
                if reading is None:
                    reading = asyncio.ensure_future(anext(batches))
                done, _ = await asyncio.wait((reading,), timeout=link.owed_in(loop.time()))
                if not done:
                    acknowledged = link.owed(loop.time())
                else:
                    try:
                        batch = reading.result()
                    except StopAsyncIteration:
                        return
                    finally:
                        reading = None
                    try:
                        acknowledged = link.accept(batch, loop.time())
                    except LinkRefused as refusal:
                        await context.abort(refusal.code, refusal.message)
                if acknowledged is not None:
                    yield pb.LinkAck(received=acknowledged)
        finally:
            if reading is not None:
                reading.cancel()
