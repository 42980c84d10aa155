"""The harness of the lab: what is measured, started and read beside the load.

- ``systems`` / ``options``: what is measured (``System``, parsed once from the CLI's names) and
  the resolved command line (``BenchOptions``);
- ``clusters`` / ``redis_ref``: starting, discovering and reading the stats of what is measured;
  ``busy_cpus`` (``--keep-cpus-busy``), ``progress``, ``harness`` (``Bench``: start, load, measure,
  probe), ``records`` (a run's record);
- measurements beside the load: ``visibility``, ``replication``, ``latency`` (one operation at a
  time), ``memory``, ``idle``, ``peak`` (the peak-throughput search), ``storage_costs``, ``proc``
  (CPU and RSS from /proc).

It imports the installed engine (``okapikv.bench.engine``) and never a suite.
"""
