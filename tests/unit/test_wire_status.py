"""The one mapping between the core's error codes and gRPC status codes (``okapikv.wire.status``):
the values on the wire are the gRPC names, every code maps to the status of its name (what the
servicers abort a unary call with), and a client reading that status back (``status.name``) judges
the same name as one reading the Pipeline stream's ``Error.code``."""

from __future__ import annotations

import grpc
import pytest

from okapikv.client.retry import Failure
from okapikv.core.messages import OVERLOADED, ErrorCode
from okapikv.errors import ClockOffsetExceeded, InvalidArgument, OkapiError, SnapshotTooOld
from okapikv.wire.status import GRPC_STATUS, grpc_status

#: What travels in ``Error.code`` (the Pipeline stream, the native port): never to change.
WIRE_NAMES = ["INVALID_ARGUMENT", "OUT_OF_RANGE", "RESOURCE_EXHAUSTED", "ABORTED", "UNAVAILABLE",
              "FAILED_PRECONDITION", "DEADLINE_EXCEEDED", "INTERNAL"]


def test_every_code_is_its_grpc_name_and_maps_to_that_status() -> None:
    assert sorted(code.value for code in ErrorCode) == sorted(WIRE_NAMES)
    for name in WIRE_NAMES:
        assert ErrorCode(name) == name and f"{ErrorCode(name)}" == name  # str, format, JSON: the name
        assert grpc_status(name) is grpc.StatusCode[name] is grpc_status(ErrorCode(name))
    assert len(GRPC_STATUS) == len(WIRE_NAMES)


@pytest.mark.parametrize("name", ["", "NOT_A_CODE", "name", "OK", "invalid_argument"])
def test_a_name_that_is_no_code_is_unknown(name: str) -> None:
    assert grpc_status(name) is grpc.StatusCode.UNKNOWN


@pytest.mark.parametrize(("code", "message", "expected"), [
    (ErrorCode.ABORTED, "start over", SnapshotTooOld),
    (ErrorCode.INVALID_ARGUMENT, "key must not be empty", InvalidArgument),
    (ErrorCode.OUT_OF_RANGE, "ahead", ClockOffsetExceeded),
    (ErrorCode.UNAVAILABLE, "repairing", None),
    (ErrorCode.RESOURCE_EXHAUSTED, f"{OVERLOADED}retry later", None),
    (ErrorCode.FAILED_PRECONDITION, "wrong partition", OkapiError),
])
def test_clients_judge_a_core_refusal_the_same_on_both_paths(code: ErrorCode, message: str,
                                                             expected: type | None) -> None:
    for name in (code, grpc_status(code).name):  # the Pipeline stream's Error.code; a unary call's status
        failure = Failure(name, message)
        if expected is None:
            assert failure.retryable
        else:
            assert not failure.retryable and type(failure.final_error()) is expected
