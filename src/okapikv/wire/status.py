"""The gRPC status code of each ``ErrorCode``: the one mapping between the core's refusals and gRPC.

An ``ErrorReply`` travels as its code's name (the Pipeline stream's ``Error.code``, and the native
port's results, which are the same messages), and as the gRPC status of that name on a unary RPC
(the servicers abort with it). Clients turn either back into a status with ``grpc_status`` and judge
it (``okapikv.client.retry.classify``).

Invariants (tested in ``tests/unit/test_wire_status.py``): every ``ErrorCode`` maps to the gRPC
status of the same name, so the values on the wire are the names gRPC gives them; a name that is not
an ``ErrorCode`` maps to ``UNKNOWN``.
"""

from __future__ import annotations

import grpc

from okapikv.core.messages import ErrorCode

GRPC_STATUS: dict[str, grpc.StatusCode] = {code.value: grpc.StatusCode[code.value] for code in ErrorCode}


def grpc_status(code: str) -> grpc.StatusCode:
    """The gRPC status of an ``ErrorReply.code`` or of a Pipeline ``Error.code``; UNKNOWN if it is none."""
    return GRPC_STATUS.get(code, grpc.StatusCode.UNKNOWN)
