"""The bounds and deadlines of the RESP port's own, in one value (``RespLimits``).

A Redis client is untrusted input: each buffer the port keeps has a bound and each wait a deadline,
so that no connection can make a server allocate without limit or hold state forever
(docs/resp.md, "Limits"):

- ``max_bulk_bytes``: one bulk string of a request. A request carries keys and values only, so
  nothing longer than the cluster's value limit can be valid; a longer one is refused from its
  header, before its bytes are buffered.
- ``max_arguments``: the elements of one request. The longest command the port accepts is an MGET,
  EXISTS or DEL of as many keys as one read-only transaction may name (the core's
  ``max_read_keys``), plus the command name.
- ``max_inline_bytes``: one inline command line (Redis's own limit, 64 KiB).
- ``max_request_bytes``: one request, and so the bytes a connection buffers before a request is
  complete: the cluster's message limit, the bound the native port puts on one frame.
- ``max_queued_commands``: parsed commands waiting to run on one connection; beyond it the
  connection stops reading (TCP then pushes back on the client). A MULTI block holds at most as
  many keys as the read-only transaction EXEC runs may name.
- ``max_connections``: connections one server's port holds at once (Redis's ``maxclients``); one
  more is answered an error and closed.
- ``forward_timeout_s``: how long an operation forwarded to another partition of the DC is retried
  before the command answers an error.
- ``adopt_wait_s``: how long ``OKAPI.SESSION token`` waits for this DC to receive what a session of
  another DC depends on (the failover rule of ``okapikv.core.session.adopt``).

What every stream port of a server shares is not here but in the server's input guard
(``okapikv.server.budgets``, the ``[connections]`` settings): the server-wide budget for the bytes
of half-sent requests, how long a request may stay half-sent, how soon a new connection must
complete its first command and how long one may stay idle. The RESP port reports each half-sent
request to it (``okapikv.resp.connection``).

The limits come from the cluster config (``from_config``), as one frozen value handed to the
listener rather than module constants, so that tests and a future shared source of limits can
supply them without touching the connection code.
"""

from __future__ import annotations

from dataclasses import dataclass

from okapikv.cluster.config import ClusterConfig

INLINE_MAX_BYTES = 64 << 10  # Redis's PROTO_INLINE_MAX_SIZE
QUEUED_COMMANDS = 4096
MAX_CONNECTIONS = 10_000  # Redis's default maxclients
FORWARD_TIMEOUT_S = 10.0
ADOPT_WAIT_S = 5.0


@dataclass(frozen=True, slots=True)
class RespLimits:
    max_bulk_bytes: int
    max_arguments: int
    max_inline_bytes: int = INLINE_MAX_BYTES
    max_request_bytes: int = 64 << 20
    max_queued_commands: int = QUEUED_COMMANDS
    max_connections: int = MAX_CONNECTIONS
    forward_timeout_s: float = FORWARD_TIMEOUT_S
    adopt_wait_s: float = ADOPT_WAIT_S

    def __post_init__(self) -> None:
        for name in ("max_bulk_bytes", "max_arguments", "max_inline_bytes", "max_request_bytes",
                     "max_queued_commands", "max_connections"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive")
        for name in ("forward_timeout_s", "adopt_wait_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")

    @classmethod
    def from_config(cls, config: ClusterConfig, max_read_keys: int) -> RespLimits:
        """``max_read_keys``: the core's limit on the keys of one read-only transaction."""
        return cls(
            max_bulk_bytes=max(config.max_value_bytes, config.max_key_bytes),
            max_arguments=max_read_keys + 1,
            max_request_bytes=config.max_message_bytes,
        )
