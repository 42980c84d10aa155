"""okapikv client library: ``Client`` (blocking) and ``AsyncClient`` (asyncio, pipelined).

Both keep a causal session, route each key to its partition's server in the client's DC, send
RO-TX and SCAN to the session's own server of that DC (``policy.Policy.session_server``), and
retry with backoff while a server is unreachable (``okapikv.errors.Unavailable`` after
``timeout_s``). See ``aio.py`` and ``sync.py`` for why there
are two. What they decide after a failure (retry, fail over to another DC, raise) is one sans-I/O
policy both drive (``policy.py``, ``retry.py``, ``failover.py``), and a client shares its
connections with its forks (``connections.py``).
"""

from __future__ import annotations

from okapikv.client.aio import AsyncClient
from okapikv.client.sync import Client
from okapikv.client.topology import Topology

__all__ = ["AsyncClient", "Client", "Topology"]
