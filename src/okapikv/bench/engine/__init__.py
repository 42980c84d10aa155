"""The benchmark engine: everything a suite measures with, and nothing of any suite.

Modules, in the order data flows:

- ``systems`` / ``options``: what is measured (``System``, parsed once from the CLI's names) and
  the resolved command line (``BenchOptions``);
- workloads: ``generators`` (YCSB's key and operation generators), ``keyspace`` (which record lives
  on which partition), ``workloads`` (each session's next operation);
- load generation: ``adapters`` (okapi client, redis-py, an in-memory ceiling behind one session
  interface), ``messages`` / ``driver`` / ``worker`` (spawned load processes, each many asyncio
  sessions in a closed loop), ``lean`` (the load generator that leaves the CPU to the servers),
  ``recording`` (the measured window and what both load generators record), ``histograms``;
- the harness: ``clusters`` / ``redis_ref`` (starting, discovering and reading the stats of what is
  measured), ``busy_cpus`` (``--keep-cpus-busy``), ``progress``, ``harness`` (``Bench``: start, load,
  measure, probe), and measurements beside the load: ``visibility``, ``replication``,
  ``latency`` (one operation at a time), ``memory``, ``proc`` (CPU and RSS from /proc);
- results: ``results`` (the typed model and results.json), ``stats`` (server counters over a
  window), ``records`` (a run's record), ``report`` / ``plots`` (CSVs, report.md, PNGs).

No module here imports ``okapikv.bench.suites`` or ``okapikv.bench.cli`` (a test walks the imports).
"""
