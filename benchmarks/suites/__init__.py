"""The suites `okapi bench` runs, each a module of its own on top of ``benchmarks.harness`` and
``okapikv.bench.engine``.

- ``custom`` (no ``--suite``): one workload at each ``--clients`` count, per system; or memory;
- ``course``: the course service's measurements, with a Redis reference line;
- ``paper``: the paper's experiments (Okapi, section 5) at this machine's scale;
- ``scaling``: peak throughput as partitions are added (Figure 3);
- ``resp``: redis-benchmark against okapikv's RESP port and against redis-server;
- ``fast``: the performance acceptance targets, measured and judged (``acceptance``: the table of
  targets and goals; ``fast_figures``: what the suite measured, typed);
- ``measurements``: one typed record per experiment, built from a paper-suite results.json or from
  the simulated experiments, judged by the one claims table (``paper_claims``); ``paper_figures``:
  the paper section of a report.

``paper_plots``: the paper's and the scaling suite's figures. ``registry`` names the suites for the
command line. Suites import the harness and the engine, never the other way round.
"""
