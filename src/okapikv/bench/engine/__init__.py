"""The benchmark engine: the load and the results, and nothing of a suite or of the machine.

Modules, in the order data flows:

- workloads: ``generators`` (YCSB's key and operation generators), ``keyspace`` (which record lives
  on which partition), ``workloads`` (each session's next operation);
- load generation: ``adapters`` (okapi client, redis-py, an in-memory ceiling behind one session
  interface), ``messages`` / ``driver`` / ``worker`` (spawned load processes, each many asyncio
  sessions in a closed loop), ``lean`` (the load generator that leaves the CPU to the servers),
  ``recording`` (the measured window and what both load generators record), ``histograms``;
- results: ``results`` (the typed model and results.json), ``stats`` (server counters over a
  window), ``report`` / ``plots`` (CSVs, report.md, PNGs).

What starts the systems measured and runs the experiments (``benchmarks.harness``,
``benchmarks.suites``) is the repository's ``benchmarks/`` package; nothing here imports it (a test
walks the imports).
"""
