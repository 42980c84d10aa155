"""One partition server's process, the composition root above ``okapikv.server`` and
``okapikv.resp`` (docs/design.md, "Layers"): the server package is the node and its gRPC and native
listeners, the RESP port is a client of it, and only this package sees both.

- ``app``: the listeners assembled (gRPC services, health, the native, RESP and metrics ports),
  signals and shutdown;
- ``main``: ``okapi server``, its checks before anything is bound, and its exit codes.
"""
