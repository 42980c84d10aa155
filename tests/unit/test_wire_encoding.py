"""The hand-written request encoding (okapikv.wire.encoding) against protobuf's own serializer, and
the client's cached session wire form (operations.SessionState)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from okapikv.client import operations as ops
from okapikv.core.messages import Session
from okapikv.wire import encoding
from okapikv.wire import okapikv_pb2 as pb

uint64 = st.integers(min_value=0, max_value=(1 << 64) - 1)
blobs = st.binary(max_size=300)
stables = st.lists(uint64, max_size=5)


def _session_pb(stable: list[int], dt: int) -> pb.Session:
    return pb.Session(stable=stable, dt=dt)


def _session_value(stable: list[int], dt: int) -> bytes:
    return encoding.session_field(encoding.session(stable, dt))


@given(uint64)
def test_varint_matches_protobuf(value: int) -> None:
    assert b"\x10" + encoding.encode_varint(value) == pb.Session(dt=value).SerializeToString() or value == 0


@given(stables, uint64)
def test_session_is_protobufs_bytes(stable: list[int], dt: int) -> None:
    assert encoding.session(stable, dt) == _session_pb(stable, dt).SerializeToString()


@given(blobs, blobs, stables, uint64, uint64)
def test_requests_are_protobufs_bytes(key: bytes, value: bytes, stable: list[int], dt: int, limit: int) -> None:
    session = _session_pb(stable, dt)
    wire = _session_value(stable, dt)
    assert encoding.get_request(key, wire) == pb.GetRequest(key=key, session=session).SerializeToString()
    for message in (pb.PutRequest, pb.SwapRequest):
        expected = message(key=key, value=value, session=session).SerializeToString()
        assert encoding.write_request(key, value, wire) == expected
    assert encoding.delete_request(key, wire) == pb.DeleteRequest(key=key, session=session).SerializeToString()
    limit %= 1 << 32
    assert (encoding.scan_request(key, value, limit, wire)
            == pb.ScanRequest(start=key, end=value, limit=limit, session=session).SerializeToString())


@given(blobs, blobs, stables, uint64, uint64, st.integers(0, (1 << 32) - 1), stables)
def test_a_later_scan_page_is_protobufs_bytes(start: bytes, end: bytes, stable: list[int], dt: int, limit: int,
                                              dc: int, vector: list[int]) -> None:
    """A later page sends back the snapshot its previous page's reply held, as those bytes."""
    limit %= 1 << 32
    snapshot = pb.ScanSnapshot(dc=dc, vector=vector)
    reply = pb.ScanResponse.FromString(pb.ScanResponse(resume=b"r", snapshot=snapshot).SerializeToString())
    expected = pb.ScanRequest(start=start, end=end, limit=limit, session=_session_pb(stable, dt), snapshot=snapshot)
    encoded = encoding.scan_request(start, end, limit, _session_value(stable, dt), reply.snapshot.SerializeToString())
    assert encoded == expected.SerializeToString()
    assert pb.ScanRequest.FromString(encoded).HasField("snapshot")


@given(st.lists(blobs, max_size=6), stables, uint64)
def test_read_tx_request_keeps_empty_keys(keys: list[bytes], stable: list[int], dt: int) -> None:
    expected = pb.ReadTxRequest(keys=keys, session=_session_pb(stable, dt)).SerializeToString()
    assert encoding.read_tx_request(keys, _session_value(stable, dt)) == expected


@given(st.lists(st.tuples(uint64, blobs, blobs), min_size=1, max_size=8), stables, uint64)
def test_operations_concatenate_into_a_batch(items: list[tuple[int, bytes, bytes]], stable: list[int], dt: int) -> None:
    """A batch is the concatenation of ``OperationKind.operation`` elements, each its own kind."""
    wire = _session_value(stable, dt)
    session = _session_pb(stable, dt)
    kinds = [ops.GET, ops.SWAP, ops.PUT, ops.DELETE]
    elements = []
    expected = pb.OperationBatch()
    for index, (operation_id, key, value) in enumerate(items):
        kind = kinds[index % len(kinds)]
        operation = expected.operations.add(id=operation_id)
        if kind in (ops.GET, ops.DELETE):
            request = (ops.get_request if kind is ops.GET else ops.delete_request)(key, wire)
            getattr(operation, kind.field).CopyFrom(kind.message(key=key, session=session))
        else:
            request = ops.put_request(key, value, wire)
            getattr(operation, kind.field).CopyFrom(kind.message(key=key, value=value, session=session))
        elements.append(kind.operation(operation_id, request))
    assert b"".join(elements) == expected.SerializeToString()
    assert pb.OperationBatch.FromString(b"".join(elements)) == expected


def test_with_session_replaces_only_the_session() -> None:
    request = ops.put_request(b"k", b"v", _session_value([5, 6], 7))
    moved = ops.PUT.with_session(request, pb.Session(stable=[8, 9], dt=10))
    assert pb.PutRequest.FromString(moved) == pb.PutRequest(key=b"k", value=b"v",
                                                            session=pb.Session(stable=[8, 9], dt=10))


def test_unary_parses_the_request_back() -> None:
    calls: list[tuple[object, float]] = []

    class Stub:
        def Get(self, message: object, timeout: float) -> str:
            calls.append((message, timeout))
            return "reply"

    assert ops.GET.unary(Stub(), ops.get_request(b"key", _session_value([1], 2)), 0.5) == "reply"
    assert calls == [(pb.GetRequest(key=b"key", session=pb.Session(stable=[1], dt=2)), 0.5)]


# ------------------------------------------------------------------ SessionState


def _wire_session(state: ops.SessionState) -> pb.Session:
    """What a request built from ``state.wire()`` tells the server."""
    return pb.GetRequest.FromString(ops.get_request(b"k", state.wire())).session


@given(st.lists(st.tuples(st.lists(uint64, min_size=2, max_size=2), uint64), max_size=8))
def test_session_state_is_the_entrywise_max_and_its_wire_form_follows(replies: list[tuple[list[int], int]]) -> None:
    state = ops.SessionState(2)
    stable, dt = [0, 0], 0
    for reply_stable, reply_dt in replies:
        state.merge(pb.Session(stable=reply_stable, dt=reply_dt))
        stable = [max(a, b) for a, b in zip(stable, reply_stable, strict=True)]
        dt = max(dt, reply_dt)
        assert state.current == Session(tuple(stable), dt)
        assert _wire_session(state) == pb.Session(stable=stable, dt=dt)
        assert state.message() == pb.Session(stable=stable, dt=dt)


def test_session_state_ignores_empty_replies_and_grows_with_the_cluster() -> None:
    grown = ops.SessionState(2)
    grown.merge(pb.Session(stable=[3, 4], dt=5))
    grown.merge(pb.Session(stable=[1, 2, 9], dt=1))  # a server of a grown cluster (core.growth)
    assert grown.current == Session((3, 4, 9), 5)
    state = ops.SessionState(2)
    state.merge(pb.Session(stable=[3, 4], dt=5))
    state.merge(pb.Session())
    assert state.current == Session((3, 4), 5)
    assert _wire_session(state) == pb.Session(stable=[3, 4], dt=5)
    state.merge(pb.Session(stable=[1, 7], dt=2))  # partly newer: merged, not adopted
    assert state.current == Session((3, 7), 5)
    assert _wire_session(state) == pb.Session(stable=[3, 7], dt=5)
