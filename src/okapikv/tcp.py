"""TCP keepalive and ``TCP_USER_TIMEOUT`` on the sockets okapikv opens or accepts itself (the native
port's connections, both ends, and native peer links; gRPC sets its own from its keepalive options).

Why both: a connection whose peer vanished without a reset (a silent network cut, a host that lost
power) otherwise stays established for as long as nothing is sent on it (keepalive finds that), or
until the kernel gives up retransmitting, about 15 minutes by default (``TCP_USER_TIMEOUT`` caps
how long sent data may stay unacknowledged). Either then resets the connection, so the application
sees an error instead of waiting. Peer links also check their own acknowledgements
(``okapikv.server.liveness``), which reacts in seconds; these are the backstop for every other
connection, e.g. the receiving end of a link or a client whose server went silent.
"""

from __future__ import annotations

import contextlib
import socket
from typing import Any

#: What the client library uses (it reads no cluster config): the servers' defaults
#: (``okapikv.cluster.connections.ConnectionSettings``).
CLIENT_KEEPALIVE_S = 5.0
CLIENT_USER_TIMEOUT_S = 15.0
#: Unanswered keepalive probes before the kernel resets (``TCP_USER_TIMEOUT``, when set, decides first).
KEEPALIVE_PROBES = 3


def set_liveness_options(sock: Any, *, keepalive_s: float, user_timeout_s: float) -> None:
    """Turn on keepalive (first probe after ``keepalive_s`` idle, then every ``keepalive_s``) and
    set ``TCP_USER_TIMEOUT``; options this platform lacks are skipped. ``sock``: a socket or the
    socket-like object an asyncio transport's ``get_extra_info("socket")`` returns (None: no-op)."""
    if sock is None:
        return
    with contextlib.suppress(OSError):  # a socket already closed by the peer: nothing to tune
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        interval = max(1, round(keepalive_s))
        for name, value in (("TCP_KEEPIDLE", interval), ("TCP_KEEPINTVL", interval),
                            ("TCP_KEEPCNT", KEEPALIVE_PROBES),
                            ("TCP_USER_TIMEOUT", max(1, round(user_timeout_s * 1000)))):
            option = getattr(socket, name, None)
            if option is not None:
                sock.setsockopt(socket.IPPROTO_TCP, option, value)
