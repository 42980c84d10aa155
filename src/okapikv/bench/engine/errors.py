"""The one error a benchmark raises for a run it could not complete.

Its own module because every stage raises it (starting a cluster, a load process failing, a probe
timing out) and catches it where a suite records a failed run and goes on.
"""

from __future__ import annotations


class BenchError(RuntimeError):
    """A run could not be completed (a worker failed, timed out, or the target is unreachable)."""
