"""Benchmarks: YCSB A-F and the Okapi paper's workloads against okapikv (and Redis, as reference).

Modules, in the order data flows:
- ``generators``: YCSB's key/operation generators (scrambled zipfian, latest, uniform), key format;
- ``keyspace``: which record lives on which partition (RO-TX over exactly p partitions);
- ``workloads``: workload descriptions and each session's next operation;
- ``targets``: the systems driven (okapi client, redis-py, an in-memory ceiling);
- ``driver`` / ``worker`` / ``messages``: spawned load processes (the pool and its conversation),
  each running many asyncio sessions in a closed loop, recording latency histograms;
- ``progress``: the live progress bar (time left, live throughput);
- ``clusters`` / ``redis_ref``: starting, discovering and reading the stats of what is measured;
- ``visibility``: the remote update visibility probe;
- ``metrics`` / ``results``: histograms, server stats deltas, waits, traffic, CPU -> run records;
- ``suites``: the custom run, the course suite and the paper suite;
- ``report`` / ``plots``: results.json, CSVs, PNGs, report.md;
- ``cli``: `okapi bench`.
"""
