"""Operation histories and the consistency checkers that judge them (docs/testing.md, "The checkers").

- ``history``: the JSON-lines format every run records (simulator, real cluster, fuzzer).
- ``causal``: causal consistency under last-writer-wins (Bouajjani et al. POPL 2017 bad patterns),
  snapshot atomicity of RO-TX and SCAN, session guarantees.
- ``linearizability``: per-key Wing-Gong-Lowe search for single-DC histories.
- ``convergence``: every DC reads the last-writer-wins winner at quiescence.
- ``liveness``: after the heal, operations complete and writes become visible within bounds.
- ``report.check_history``: all of the above.
"""

from okapikv.check.anomalies import Anomaly
from okapikv.check.history import History, HistoryRecorder, Operation, load_history
from okapikv.check.report import CheckReport, check_history

__all__ = ["Anomaly", "CheckReport", "History", "HistoryRecorder", "Operation", "check_history", "load_history"]
