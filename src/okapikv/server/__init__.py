"""The running partition server: the asyncio/gRPC driver around ``okapikv.core.server``.

This package is the only place that does network I/O. The core decides, and the host
(``okapikv.core.host``, shared with the simulator) holds the driver's rules; the driver here reads
the clock, hands messages to the host, and carries out the outbox it returns (answer a client, send
a peer message), and calls the host's timer when its deadline comes.

Modules, each importing only those listed before it (no import circles):
- ``clock``: the physical clock the core sees (wall clock + injected skew, never backwards);
- ``liveness``: when an outgoing link's connection is dead though no error says so;
- ``links``: outgoing FIFO peer links with WAN-delay emulation, acknowledgements and reconnection;
- ``admission``: the one admission policy (client work waits while replication lags) every port calls;
- ``visibility_bound``: bounded visibility, on request (an experiment on emulated WANs), one more
  reason for admission to hold;
- ``budgets``: the input budget and connection deadlines shared by the stream ports;
- ``instruments``: latency histograms and visibility-lag samples the driver updates as it runs;
- ``pipeline``: the per-stream result batching of the Pipeline RPC and the native port;
- ``peer_encoding``: peer messages to frames below the size limit; ``peer_links``: the outgoing
  links by destination; ``loop_timer``: the host's deadlines on the event loop; ``clock_log``: the
  maximum clock offset's warnings; ``startup``: the data directory's open and recovery and the
  start's checks with the replicas; ``node_figures``: the node's typed snapshot
  (``okapikv.wire.stats``);
- ``node``: the driver proper (request ids, futures and streams, the outbox carried out, the group
  committer);
- ``inbound``: the receiving side of the peer links (dedupe, the core, durable and coalesced acks);
- ``native`` and ``servicers``: the native port and the gRPC services KeyValue and Peer, thin
  adapters over the node, ``inbound`` and ``admission``;
- ``metrics``: the Prometheus endpoint (a collector rendering the node's snapshot at scrape time);
  ``logs``: single-line text/JSON log events labelled with the server; ``faults``: fault injection.

The process that assembles these listeners with the RESP port (``okapikv.resp``) is
``okapikv.serve``: it stands above both, so nothing here imports the RESP port.
"""
