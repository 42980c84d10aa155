"""The installed benchmark engine: how load is generated and results are written, no experiment.

- ``engine``: the workload generators (YCSB A-F, RO-TX), the load processes and their clients, the
  results model, the report and the plots;
- ``lab``: how the ``okapi`` command finds the repository's ``benchmarks/`` package, which holds
  what is measured and judged (the harness that starts clusters, the suites, the paper claims, the
  acceptance targets, calibration) and is not installed (docs/benchmarks.md, "Where the benchmarks
  live").

Needs the ``bench`` extra (``pip install '.[bench]'``: matplotlib, hdrhistogram, redis-py); the
servers, the clients and `okapi up` do not.
"""
