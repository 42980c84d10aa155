"""The suites `okapi bench` runs, each a module of its own on top of ``okapikv.bench.engine``.

- ``custom`` (no ``--suite``): one workload at each ``--clients`` count, per system; or memory;
- ``course``: the course service's measurements, with a Redis reference line;
- ``paper``: the paper's experiments (Okapi, section 5) at this machine's scale;
- ``scaling``: peak throughput as partitions are added (Figure 3);
- ``resp``: redis-benchmark against okapikv's RESP port and against redis-server;
- ``fast``: the performance acceptance targets, measured and judged (``acceptance``: the table of
  targets and goals; ``fast_figures``: what the suite measured, typed).

``registry`` names them for the command line. Suites import the engine, never the other way round.
"""
