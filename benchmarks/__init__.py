"""The benchmark lab of okapikv: what `okapi bench`, `okapi calibrate` and `okapi sim --experiment`
measure and judge, on top of the installed engine (``okapikv.bench.engine``: workloads, load
processes, results, report, plots).

It is a top-level package of the repository, not installed with okapikv: a server install carries
no experiment. The ``okapi`` command finds it in the checkout its source lies in or in the working
directory (``okapikv.bench.lab``); the tests import it from the repository root (docs/benchmarks.md,
"Where the benchmarks live").

- ``harness``: starting and measuring systems (clusters, Redis, the CPU and memory readings of a
  virtual machine, the probes beside the load);
- ``suites``: the suites, the paper's claims and the acceptance targets;
- ``cli``: `okapi bench`; ``calibrate``, ``validate``, ``calibrate_command``: `okapi calibrate`;
  ``sim_experiments``: `okapi sim --experiment`.
"""
