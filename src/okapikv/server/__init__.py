"""The running partition server: the asyncio/gRPC driver around ``okapikv.core.server``.

This package is the only place that does network I/O. The core decides; the driver here reads the
clock, hands messages to the core, and carries out the effects it returns (answer a client, send a
peer message), and calls the core's timer when its deadline comes.

Modules:
- ``clock``: the physical clock the core sees (wall clock + injected skew, never backwards);
- ``node``: the driver proper (request ids, reply routing, timer, effect dispatch);
- ``links``: FIFO peer links with WAN-delay emulation, acknowledgements and reconnection;
- ``pipeline``: the per-stream result batching of the Pipeline RPC;
- ``servicers``: the gRPC services KeyValue and Peer;
- ``metrics``: the Prometheus endpoint (a collector reading the core at scrape time, latency
  histograms); ``logs``: single-line text/JSON log events labelled with the server;
- ``app``: the gRPC server, health checking and signal handling; ``main``: `okapi server`.
"""
