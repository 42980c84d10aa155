"""The Redis-protocol (RESP2 and RESP3) port of every server: any Redis client, redis-cli and
redis-benchmark talk to okapikv unchanged, each connection one causal session of the server's DC.

- ``limits``: every bound and deadline of the port, in one value;
- ``parser``: requests from bytes (hiredis's C parser when installed, a pure-Python one otherwise);
- ``replies``: RESP2 and RESP3 replies as bytes;
- ``commands``: the commands served (and refused), and the executor of one connection's commands;
- ``operations``: a connection's causal session and where each of its operations runs;
- ``tokens``: sessions as opaque tokens (``OKAPI.SESSION``);
- ``glob``: Redis's key patterns;
- ``connection``: one client connection (bytes in, replies out, bounds, flow control);
- ``service``: the listener of one server, and why the port lives in the server (docs/resp.md).
"""
