from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Session(_message.Message):
    __slots__ = ("stable", "dt", "time")
    STABLE_FIELD_NUMBER: _ClassVar[int]
    DT_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    stable: _containers.RepeatedScalarFieldContainer[int]
    dt: int
    time: int
    def __init__(self, stable: _Optional[_Iterable[int]] = ..., dt: _Optional[int] = ..., time: _Optional[int] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("key", "session")
    KEY_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    session: Session
    def __init__(self, key: _Optional[bytes] = ..., session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ("found", "value", "session")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    found: bool
    value: bytes
    session: Session
    def __init__(self, found: _Optional[bool] = ..., value: _Optional[bytes] = ..., session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class PutRequest(_message.Message):
    __slots__ = ("key", "value", "session", "ttl_ms", "expire_at_ms")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_AT_MS_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    value: bytes
    session: Session
    ttl_ms: int
    expire_at_ms: int
    def __init__(self, key: _Optional[bytes] = ..., value: _Optional[bytes] = ..., session: _Optional[_Union[Session, _Mapping]] = ..., ttl_ms: _Optional[int] = ..., expire_at_ms: _Optional[int] = ...) -> None: ...

class PutResponse(_message.Message):
    __slots__ = ("found", "timestamp", "session")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    found: bool
    timestamp: int
    session: Session
    def __init__(self, found: _Optional[bool] = ..., timestamp: _Optional[int] = ..., session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class SwapRequest(_message.Message):
    __slots__ = ("key", "value", "session")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    value: bytes
    session: Session
    def __init__(self, key: _Optional[bytes] = ..., value: _Optional[bytes] = ..., session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class SwapResponse(_message.Message):
    __slots__ = ("found", "old_value", "timestamp", "session")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    OLD_VALUE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    found: bool
    old_value: bytes
    timestamp: int
    session: Session
    def __init__(self, found: _Optional[bool] = ..., old_value: _Optional[bytes] = ..., timestamp: _Optional[int] = ..., session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class PutManyRequest(_message.Message):
    __slots__ = ("keys", "values", "session")
    KEYS_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedScalarFieldContainer[bytes]
    values: _containers.RepeatedScalarFieldContainer[bytes]
    session: Session
    def __init__(self, keys: _Optional[_Iterable[bytes]] = ..., values: _Optional[_Iterable[bytes]] = ..., session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class PutManyResponse(_message.Message):
    __slots__ = ("count", "timestamp", "session")
    COUNT_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    count: int
    timestamp: int
    session: Session
    def __init__(self, count: _Optional[int] = ..., timestamp: _Optional[int] = ..., session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class DeleteRequest(_message.Message):
    __slots__ = ("key", "session")
    KEY_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    session: Session
    def __init__(self, key: _Optional[bytes] = ..., session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class DeleteResponse(_message.Message):
    __slots__ = ("found", "timestamp", "session")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    found: bool
    timestamp: int
    session: Session
    def __init__(self, found: _Optional[bool] = ..., timestamp: _Optional[int] = ..., session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class IncrRequest(_message.Message):
    __slots__ = ("key", "by", "session")
    KEY_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    by: int
    session: Session
    def __init__(self, key: _Optional[bytes] = ..., by: _Optional[int] = ..., session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class IncrResponse(_message.Message):
    __slots__ = ("value", "timestamp", "session")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    value: int
    timestamp: int
    session: Session
    def __init__(self, value: _Optional[int] = ..., timestamp: _Optional[int] = ..., session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class ExpireRequest(_message.Message):
    __slots__ = ("key", "ttl_ms", "expire_at_ms", "persist", "session")
    KEY_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_AT_MS_FIELD_NUMBER: _ClassVar[int]
    PERSIST_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    ttl_ms: int
    expire_at_ms: int
    persist: bool
    session: Session
    def __init__(self, key: _Optional[bytes] = ..., ttl_ms: _Optional[int] = ..., expire_at_ms: _Optional[int] = ..., persist: _Optional[bool] = ..., session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class ExpireResponse(_message.Message):
    __slots__ = ("found", "value", "ttl_us", "changed", "timestamp", "session")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    TTL_US_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    found: bool
    value: bytes
    ttl_us: int
    changed: bool
    timestamp: int
    session: Session
    def __init__(self, found: _Optional[bool] = ..., value: _Optional[bytes] = ..., ttl_us: _Optional[int] = ..., changed: _Optional[bool] = ..., timestamp: _Optional[int] = ..., session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class ScanSnapshot(_message.Message):
    __slots__ = ("dc", "vector", "time")
    DC_FIELD_NUMBER: _ClassVar[int]
    VECTOR_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    dc: int
    vector: _containers.RepeatedScalarFieldContainer[int]
    time: int
    def __init__(self, dc: _Optional[int] = ..., vector: _Optional[_Iterable[int]] = ..., time: _Optional[int] = ...) -> None: ...

class ScanRequest(_message.Message):
    __slots__ = ("start", "end", "limit", "session", "snapshot")
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    start: bytes
    end: bytes
    limit: int
    session: Session
    snapshot: ScanSnapshot
    def __init__(self, start: _Optional[bytes] = ..., end: _Optional[bytes] = ..., limit: _Optional[int] = ..., session: _Optional[_Union[Session, _Mapping]] = ..., snapshot: _Optional[_Union[ScanSnapshot, _Mapping]] = ...) -> None: ...

class KeyValuePair(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    value: bytes
    def __init__(self, key: _Optional[bytes] = ..., value: _Optional[bytes] = ...) -> None: ...

class ScanResponse(_message.Message):
    __slots__ = ("items", "session", "resume", "snapshot")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[KeyValuePair]
    session: Session
    resume: bytes
    snapshot: ScanSnapshot
    def __init__(self, items: _Optional[_Iterable[_Union[KeyValuePair, _Mapping]]] = ..., session: _Optional[_Union[Session, _Mapping]] = ..., resume: _Optional[bytes] = ..., snapshot: _Optional[_Union[ScanSnapshot, _Mapping]] = ...) -> None: ...

class ReadTxRequest(_message.Message):
    __slots__ = ("keys", "session")
    KEYS_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedScalarFieldContainer[bytes]
    session: Session
    def __init__(self, keys: _Optional[_Iterable[bytes]] = ..., session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class MaybeValue(_message.Message):
    __slots__ = ("found", "value")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    found: bool
    value: bytes
    def __init__(self, found: _Optional[bool] = ..., value: _Optional[bytes] = ...) -> None: ...

class ReadTxResponse(_message.Message):
    __slots__ = ("values", "session")
    VALUES_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedCompositeFieldContainer[MaybeValue]
    session: Session
    def __init__(self, values: _Optional[_Iterable[_Union[MaybeValue, _Mapping]]] = ..., session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class ClusterInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ServerAddress(_message.Message):
    __slots__ = ("dc", "partition", "address")
    DC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    dc: int
    partition: int
    address: str
    def __init__(self, dc: _Optional[int] = ..., partition: _Optional[int] = ..., address: _Optional[str] = ...) -> None: ...

class ClusterInfoResponse(_message.Message):
    __slots__ = ("cluster_id", "dc_names", "num_partitions", "protocol", "dc", "partition", "servers", "max_key_bytes", "max_value_bytes", "max_message_bytes", "native_port", "max_read_keys", "membership_epoch", "dc_states")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    DC_NAMES_FIELD_NUMBER: _ClassVar[int]
    NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    DC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    MAX_KEY_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_VALUE_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    NATIVE_PORT_FIELD_NUMBER: _ClassVar[int]
    MAX_READ_KEYS_FIELD_NUMBER: _ClassVar[int]
    MEMBERSHIP_EPOCH_FIELD_NUMBER: _ClassVar[int]
    DC_STATES_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    dc_names: _containers.RepeatedScalarFieldContainer[str]
    num_partitions: int
    protocol: str
    dc: int
    partition: int
    servers: _containers.RepeatedCompositeFieldContainer[ServerAddress]
    max_key_bytes: int
    max_value_bytes: int
    max_message_bytes: int
    native_port: int
    max_read_keys: int
    membership_epoch: int
    dc_states: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, cluster_id: _Optional[str] = ..., dc_names: _Optional[_Iterable[str]] = ..., num_partitions: _Optional[int] = ..., protocol: _Optional[str] = ..., dc: _Optional[int] = ..., partition: _Optional[int] = ..., servers: _Optional[_Iterable[_Union[ServerAddress, _Mapping]]] = ..., max_key_bytes: _Optional[int] = ..., max_value_bytes: _Optional[int] = ..., max_message_bytes: _Optional[int] = ..., native_port: _Optional[int] = ..., max_read_keys: _Optional[int] = ..., membership_epoch: _Optional[int] = ..., dc_states: _Optional[_Iterable[str]] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ("json",)
    JSON_FIELD_NUMBER: _ClassVar[int]
    json: str
    def __init__(self, json: _Optional[str] = ...) -> None: ...

class AdoptSessionRequest(_message.Message):
    __slots__ = ("session", "from_dc")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    FROM_DC_FIELD_NUMBER: _ClassVar[int]
    session: Session
    from_dc: int
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ..., from_dc: _Optional[int] = ...) -> None: ...

class AdoptSessionResponse(_message.Message):
    __slots__ = ("ready", "session", "behind_us")
    READY_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    BEHIND_US_FIELD_NUMBER: _ClassVar[int]
    ready: bool
    session: Session
    behind_us: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, ready: _Optional[bool] = ..., session: _Optional[_Union[Session, _Mapping]] = ..., behind_us: _Optional[_Iterable[int]] = ...) -> None: ...

class Operation(_message.Message):
    __slots__ = ("id", "get", "put", "swap", "delete", "scan", "read_tx", "put_many", "incr", "expire")
    ID_FIELD_NUMBER: _ClassVar[int]
    GET_FIELD_NUMBER: _ClassVar[int]
    PUT_FIELD_NUMBER: _ClassVar[int]
    SWAP_FIELD_NUMBER: _ClassVar[int]
    DELETE_FIELD_NUMBER: _ClassVar[int]
    SCAN_FIELD_NUMBER: _ClassVar[int]
    READ_TX_FIELD_NUMBER: _ClassVar[int]
    PUT_MANY_FIELD_NUMBER: _ClassVar[int]
    INCR_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_FIELD_NUMBER: _ClassVar[int]
    id: int
    get: GetRequest
    put: PutRequest
    swap: SwapRequest
    delete: DeleteRequest
    scan: ScanRequest
    read_tx: ReadTxRequest
    put_many: PutManyRequest
    incr: IncrRequest
    expire: ExpireRequest
    def __init__(self, id: _Optional[int] = ..., get: _Optional[_Union[GetRequest, _Mapping]] = ..., put: _Optional[_Union[PutRequest, _Mapping]] = ..., swap: _Optional[_Union[SwapRequest, _Mapping]] = ..., delete: _Optional[_Union[DeleteRequest, _Mapping]] = ..., scan: _Optional[_Union[ScanRequest, _Mapping]] = ..., read_tx: _Optional[_Union[ReadTxRequest, _Mapping]] = ..., put_many: _Optional[_Union[PutManyRequest, _Mapping]] = ..., incr: _Optional[_Union[IncrRequest, _Mapping]] = ..., expire: _Optional[_Union[ExpireRequest, _Mapping]] = ...) -> None: ...

class Error(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class Result(_message.Message):
    __slots__ = ("id", "get", "put", "swap", "delete", "scan", "read_tx", "error", "put_many", "incr", "expire")
    ID_FIELD_NUMBER: _ClassVar[int]
    GET_FIELD_NUMBER: _ClassVar[int]
    PUT_FIELD_NUMBER: _ClassVar[int]
    SWAP_FIELD_NUMBER: _ClassVar[int]
    DELETE_FIELD_NUMBER: _ClassVar[int]
    SCAN_FIELD_NUMBER: _ClassVar[int]
    READ_TX_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PUT_MANY_FIELD_NUMBER: _ClassVar[int]
    INCR_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_FIELD_NUMBER: _ClassVar[int]
    id: int
    get: GetResponse
    put: PutResponse
    swap: SwapResponse
    delete: DeleteResponse
    scan: ScanResponse
    read_tx: ReadTxResponse
    error: Error
    put_many: PutManyResponse
    incr: IncrResponse
    expire: ExpireResponse
    def __init__(self, id: _Optional[int] = ..., get: _Optional[_Union[GetResponse, _Mapping]] = ..., put: _Optional[_Union[PutResponse, _Mapping]] = ..., swap: _Optional[_Union[SwapResponse, _Mapping]] = ..., delete: _Optional[_Union[DeleteResponse, _Mapping]] = ..., scan: _Optional[_Union[ScanResponse, _Mapping]] = ..., read_tx: _Optional[_Union[ReadTxResponse, _Mapping]] = ..., error: _Optional[_Union[Error, _Mapping]] = ..., put_many: _Optional[_Union[PutManyResponse, _Mapping]] = ..., incr: _Optional[_Union[IncrResponse, _Mapping]] = ..., expire: _Optional[_Union[ExpireResponse, _Mapping]] = ...) -> None: ...

class OperationBatch(_message.Message):
    __slots__ = ("operations",)
    OPERATIONS_FIELD_NUMBER: _ClassVar[int]
    operations: _containers.RepeatedCompositeFieldContainer[Operation]
    def __init__(self, operations: _Optional[_Iterable[_Union[Operation, _Mapping]]] = ...) -> None: ...

class ResultBatch(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[Result]
    def __init__(self, results: _Optional[_Iterable[_Union[Result, _Mapping]]] = ...) -> None: ...

class ServerRef(_message.Message):
    __slots__ = ("dc", "partition")
    DC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    dc: int
    partition: int
    def __init__(self, dc: _Optional[int] = ..., partition: _Optional[int] = ...) -> None: ...

class Vector(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, entries: _Optional[_Iterable[int]] = ...) -> None: ...

class Update(_message.Message):
    __slots__ = ("key", "value", "tombstone", "timestamp", "source_dc", "dv")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    TOMBSTONE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    SOURCE_DC_FIELD_NUMBER: _ClassVar[int]
    DV_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    value: bytes
    tombstone: bool
    timestamp: int
    source_dc: int
    dv: Vector
    def __init__(self, key: _Optional[bytes] = ..., value: _Optional[bytes] = ..., tombstone: _Optional[bool] = ..., timestamp: _Optional[int] = ..., source_dc: _Optional[int] = ..., dv: _Optional[_Union[Vector, _Mapping]] = ...) -> None: ...

class ReplicateBatch(_message.Message):
    __slots__ = ("updates", "gsv")
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    GSV_FIELD_NUMBER: _ClassVar[int]
    updates: _containers.RepeatedCompositeFieldContainer[Update]
    gsv: Vector
    def __init__(self, updates: _Optional[_Iterable[_Union[Update, _Mapping]]] = ..., gsv: _Optional[_Union[Vector, _Mapping]] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ("timestamp", "gsv")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    GSV_FIELD_NUMBER: _ClassVar[int]
    timestamp: int
    gsv: Vector
    def __init__(self, timestamp: _Optional[int] = ..., gsv: _Optional[_Union[Vector, _Mapping]] = ...) -> None: ...

class VvReport(_message.Message):
    __slots__ = ("vv", "floor")
    VV_FIELD_NUMBER: _ClassVar[int]
    FLOOR_FIELD_NUMBER: _ClassVar[int]
    vv: Vector
    floor: Vector
    def __init__(self, vv: _Optional[_Union[Vector, _Mapping]] = ..., floor: _Optional[_Union[Vector, _Mapping]] = ...) -> None: ...

class GsvBroadcast(_message.Message):
    __slots__ = ("gsv", "usv", "has_usv", "horizon")
    GSV_FIELD_NUMBER: _ClassVar[int]
    USV_FIELD_NUMBER: _ClassVar[int]
    HAS_USV_FIELD_NUMBER: _ClassVar[int]
    HORIZON_FIELD_NUMBER: _ClassVar[int]
    gsv: Vector
    usv: Vector
    has_usv: bool
    horizon: Vector
    def __init__(self, gsv: _Optional[_Union[Vector, _Mapping]] = ..., usv: _Optional[_Union[Vector, _Mapping]] = ..., has_usv: _Optional[bool] = ..., horizon: _Optional[_Union[Vector, _Mapping]] = ...) -> None: ...

class GsvExchange(_message.Message):
    __slots__ = ("gsv",)
    GSV_FIELD_NUMBER: _ClassVar[int]
    gsv: Vector
    def __init__(self, gsv: _Optional[_Union[Vector, _Mapping]] = ...) -> None: ...

class StableTimeReport(_message.Message):
    __slots__ = ("time", "floor")
    TIME_FIELD_NUMBER: _ClassVar[int]
    FLOOR_FIELD_NUMBER: _ClassVar[int]
    time: int
    floor: int
    def __init__(self, time: _Optional[int] = ..., floor: _Optional[int] = ...) -> None: ...

class GstBroadcast(_message.Message):
    __slots__ = ("gst", "horizon")
    GST_FIELD_NUMBER: _ClassVar[int]
    HORIZON_FIELD_NUMBER: _ClassVar[int]
    gst: int
    horizon: int
    def __init__(self, gst: _Optional[int] = ..., horizon: _Optional[int] = ...) -> None: ...

class TxSlice(_message.Message):
    __slots__ = ("tx_id", "snapshot", "keys", "snapshot_time")
    TX_ID_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_TIME_FIELD_NUMBER: _ClassVar[int]
    tx_id: int
    snapshot: Vector
    keys: _containers.RepeatedScalarFieldContainer[bytes]
    snapshot_time: int
    def __init__(self, tx_id: _Optional[int] = ..., snapshot: _Optional[_Union[Vector, _Mapping]] = ..., keys: _Optional[_Iterable[bytes]] = ..., snapshot_time: _Optional[int] = ...) -> None: ...

class ScanSlice(_message.Message):
    __slots__ = ("tx_id", "snapshot", "start", "end", "limit", "has_limit", "snapshot_time")
    TX_ID_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    HAS_LIMIT_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_TIME_FIELD_NUMBER: _ClassVar[int]
    tx_id: int
    snapshot: Vector
    start: bytes
    end: bytes
    limit: int
    has_limit: bool
    snapshot_time: int
    def __init__(self, tx_id: _Optional[int] = ..., snapshot: _Optional[_Union[Vector, _Mapping]] = ..., start: _Optional[bytes] = ..., end: _Optional[bytes] = ..., limit: _Optional[int] = ..., has_limit: _Optional[bool] = ..., snapshot_time: _Optional[int] = ...) -> None: ...

class ReadItem(_message.Message):
    __slots__ = ("key", "value", "found", "timestamp", "source_dc", "dv")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    FOUND_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    SOURCE_DC_FIELD_NUMBER: _ClassVar[int]
    DV_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    value: bytes
    found: bool
    timestamp: int
    source_dc: int
    dv: Vector
    def __init__(self, key: _Optional[bytes] = ..., value: _Optional[bytes] = ..., found: _Optional[bool] = ..., timestamp: _Optional[int] = ..., source_dc: _Optional[int] = ..., dv: _Optional[_Union[Vector, _Mapping]] = ...) -> None: ...

class SliceReply(_message.Message):
    __slots__ = ("tx_id", "items", "too_old", "last_key", "clock_ahead_us", "waited_us")
    TX_ID_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    TOO_OLD_FIELD_NUMBER: _ClassVar[int]
    LAST_KEY_FIELD_NUMBER: _ClassVar[int]
    CLOCK_AHEAD_US_FIELD_NUMBER: _ClassVar[int]
    WAITED_US_FIELD_NUMBER: _ClassVar[int]
    tx_id: int
    items: _containers.RepeatedCompositeFieldContainer[ReadItem]
    too_old: bool
    last_key: bytes
    clock_ahead_us: int
    waited_us: int
    def __init__(self, tx_id: _Optional[int] = ..., items: _Optional[_Iterable[_Union[ReadItem, _Mapping]]] = ..., too_old: _Optional[bool] = ..., last_key: _Optional[bytes] = ..., clock_ahead_us: _Optional[int] = ..., waited_us: _Optional[int] = ...) -> None: ...

class Restarted(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CatchUpRequest(_message.Message):
    __slots__ = ("request_id", "after", "restarted", "repair")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    RESTARTED_FIELD_NUMBER: _ClassVar[int]
    REPAIR_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    after: int
    restarted: bool
    repair: bool
    def __init__(self, request_id: _Optional[int] = ..., after: _Optional[int] = ..., restarted: _Optional[bool] = ..., repair: _Optional[bool] = ...) -> None: ...

class RepairBatch(_message.Message):
    __slots__ = ("request_id", "updates")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    updates: _containers.RepeatedCompositeFieldContainer[Update]
    def __init__(self, request_id: _Optional[int] = ..., updates: _Optional[_Iterable[_Union[Update, _Mapping]]] = ...) -> None: ...

class RepairAnswer(_message.Message):
    __slots__ = ("stable", "horizon", "gsv")
    STABLE_FIELD_NUMBER: _ClassVar[int]
    HORIZON_FIELD_NUMBER: _ClassVar[int]
    GSV_FIELD_NUMBER: _ClassVar[int]
    stable: Vector
    horizon: Vector
    gsv: Vector
    def __init__(self, stable: _Optional[_Union[Vector, _Mapping]] = ..., horizon: _Optional[_Union[Vector, _Mapping]] = ..., gsv: _Optional[_Union[Vector, _Mapping]] = ...) -> None: ...

class CatchUpReply(_message.Message):
    __slots__ = ("request_id", "through", "repair", "origin_through")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    THROUGH_FIELD_NUMBER: _ClassVar[int]
    REPAIR_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_THROUGH_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    through: int
    repair: RepairAnswer
    origin_through: int
    def __init__(self, request_id: _Optional[int] = ..., through: _Optional[int] = ..., repair: _Optional[_Union[RepairAnswer, _Mapping]] = ..., origin_through: _Optional[int] = ...) -> None: ...

class ReplicaProgress(_message.Message):
    __slots__ = ("vv",)
    VV_FIELD_NUMBER: _ClassVar[int]
    vv: Vector
    def __init__(self, vv: _Optional[_Union[Vector, _Mapping]] = ...) -> None: ...

class PeerMessage(_message.Message):
    __slots__ = ("replicate", "heartbeat", "vv_report", "gsv_broadcast", "gsv_exchange", "tx_slice", "scan_slice", "slice_reply", "catch_up_request", "catch_up_reply", "replica_progress", "restarted", "repair_batch", "stable_time_report", "gst_broadcast", "membership_update", "relay_request", "relay_reply")
    REPLICATE_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    VV_REPORT_FIELD_NUMBER: _ClassVar[int]
    GSV_BROADCAST_FIELD_NUMBER: _ClassVar[int]
    GSV_EXCHANGE_FIELD_NUMBER: _ClassVar[int]
    TX_SLICE_FIELD_NUMBER: _ClassVar[int]
    SCAN_SLICE_FIELD_NUMBER: _ClassVar[int]
    SLICE_REPLY_FIELD_NUMBER: _ClassVar[int]
    CATCH_UP_REQUEST_FIELD_NUMBER: _ClassVar[int]
    CATCH_UP_REPLY_FIELD_NUMBER: _ClassVar[int]
    REPLICA_PROGRESS_FIELD_NUMBER: _ClassVar[int]
    RESTARTED_FIELD_NUMBER: _ClassVar[int]
    REPAIR_BATCH_FIELD_NUMBER: _ClassVar[int]
    STABLE_TIME_REPORT_FIELD_NUMBER: _ClassVar[int]
    GST_BROADCAST_FIELD_NUMBER: _ClassVar[int]
    MEMBERSHIP_UPDATE_FIELD_NUMBER: _ClassVar[int]
    RELAY_REQUEST_FIELD_NUMBER: _ClassVar[int]
    RELAY_REPLY_FIELD_NUMBER: _ClassVar[int]
    replicate: ReplicateBatch
    heartbeat: Heartbeat
    vv_report: VvReport
    gsv_broadcast: GsvBroadcast
    gsv_exchange: GsvExchange
    tx_slice: TxSlice
    scan_slice: ScanSlice
    slice_reply: SliceReply
    catch_up_request: CatchUpRequest
    catch_up_reply: CatchUpReply
    replica_progress: ReplicaProgress
    restarted: Restarted
    repair_batch: RepairBatch
    stable_time_report: StableTimeReport
    gst_broadcast: GstBroadcast
    membership_update: MembershipUpdate
    relay_request: RelayRequest
    relay_reply: RelayReply
    def __init__(self, replicate: _Optional[_Union[ReplicateBatch, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ..., vv_report: _Optional[_Union[VvReport, _Mapping]] = ..., gsv_broadcast: _Optional[_Union[GsvBroadcast, _Mapping]] = ..., gsv_exchange: _Optional[_Union[GsvExchange, _Mapping]] = ..., tx_slice: _Optional[_Union[TxSlice, _Mapping]] = ..., scan_slice: _Optional[_Union[ScanSlice, _Mapping]] = ..., slice_reply: _Optional[_Union[SliceReply, _Mapping]] = ..., catch_up_request: _Optional[_Union[CatchUpRequest, _Mapping]] = ..., catch_up_reply: _Optional[_Union[CatchUpReply, _Mapping]] = ..., replica_progress: _Optional[_Union[ReplicaProgress, _Mapping]] = ..., restarted: _Optional[_Union[Restarted, _Mapping]] = ..., repair_batch: _Optional[_Union[RepairBatch, _Mapping]] = ..., stable_time_report: _Optional[_Union[StableTimeReport, _Mapping]] = ..., gst_broadcast: _Optional[_Union[GstBroadcast, _Mapping]] = ..., membership_update: _Optional[_Union[MembershipUpdate, _Mapping]] = ..., relay_request: _Optional[_Union[RelayRequest, _Mapping]] = ..., relay_reply: _Optional[_Union[RelayReply, _Mapping]] = ...) -> None: ...

class MembershipUpdate(_message.Message):
    __slots__ = ("epoch", "states")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    states: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, epoch: _Optional[int] = ..., states: _Optional[_Iterable[str]] = ...) -> None: ...

class RelayRequest(_message.Message):
    __slots__ = ("request_id", "dc", "after")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    DC_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    dc: int
    after: int
    def __init__(self, request_id: _Optional[int] = ..., dc: _Optional[int] = ..., after: _Optional[int] = ...) -> None: ...

class RelayReply(_message.Message):
    __slots__ = ("request_id", "dc", "through")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    DC_FIELD_NUMBER: _ClassVar[int]
    THROUGH_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    dc: int
    through: int
    def __init__(self, request_id: _Optional[int] = ..., dc: _Optional[int] = ..., through: _Optional[int] = ...) -> None: ...

class PeerBatch(_message.Message):
    __slots__ = ("cluster_id", "source", "messages", "incarnation", "first_sequence")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    FIRST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    source: ServerRef
    messages: _containers.RepeatedCompositeFieldContainer[PeerMessage]
    incarnation: int
    first_sequence: int
    def __init__(self, cluster_id: _Optional[str] = ..., source: _Optional[_Union[ServerRef, _Mapping]] = ..., messages: _Optional[_Iterable[_Union[PeerMessage, _Mapping]]] = ..., incarnation: _Optional[int] = ..., first_sequence: _Optional[int] = ...) -> None: ...

class LinkAck(_message.Message):
    __slots__ = ("received",)
    RECEIVED_FIELD_NUMBER: _ClassVar[int]
    received: int
    def __init__(self, received: _Optional[int] = ...) -> None: ...

class MembershipChange(_message.Message):
    __slots__ = ("epoch", "states")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    states: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, epoch: _Optional[int] = ..., states: _Optional[_Iterable[str]] = ...) -> None: ...

class MembershipChangeResponse(_message.Message):
    __slots__ = ("epoch", "states", "adopted")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    ADOPTED_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    states: _containers.RepeatedScalarFieldContainer[str]
    adopted: bool
    def __init__(self, epoch: _Optional[int] = ..., states: _Optional[_Iterable[str]] = ..., adopted: _Optional[bool] = ...) -> None: ...

class GrownConfig(_message.Message):
    __slots__ = ("toml",)
    TOML_FIELD_NUMBER: _ClassVar[int]
    toml: str
    def __init__(self, toml: _Optional[str] = ...) -> None: ...

class GrownConfigResponse(_message.Message):
    __slots__ = ("dcs",)
    DCS_FIELD_NUMBER: _ClassVar[int]
    dcs: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, dcs: _Optional[_Iterable[str]] = ...) -> None: ...
