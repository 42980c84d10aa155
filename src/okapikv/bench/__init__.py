"""Benchmarks: YCSB A-F and the Okapi paper's workloads against okapikv (and Redis, as reference).

Two layers and the command that joins them:

- ``engine``: how anything is measured (starting systems, workloads, the load generators, results,
  the report and plots); it knows no suite;
- ``suites``: what `okapi bench --suite ...` measures (custom, course, paper, scaling, resp, fast
  and its acceptance targets), each on top of the engine;
- ``cli``: `okapi bench`, the command line into options, a suite, and the outputs.

Needs the ``bench`` extra (``pip install '.[bench]'``: matplotlib, hdrhistogram, redis-py); the
servers, the clients and `okapi up` do not.
"""
