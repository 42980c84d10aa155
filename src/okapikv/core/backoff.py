"""How long a client waits before it retries: exponential backoff with "equal jitter".

Pure (the jitter comes from the random source it is given), so the real clients
(``okapikv.client.retry``) and the simulator's (``okapikv.sim.clients``) retry on one schedule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class RandomSource(Protocol):
    """What the jitter draws from: ``random.Random`` or anything with its ``random()`` (the core
    imports no source of randomness of its own)."""

    def random(self) -> float: ...


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with "equal jitter": attempt n waits in [d/2, d], d = min(cap, base * 2^n).

    Half the delay is fixed so retries never spin; the other half is random so clients spread out.
    """

    base_s: float = 0.02
    cap_s: float = 1.0
    multiplier: float = 2.0

    def delay_s(self, attempt: int, rng: RandomSource) -> float:
        """The wait before retry number ``attempt`` (1 for the first retry)."""
        ceiling = min(self.cap_s, self.base_s * self.multiplier ** max(attempt - 1, 0))
        return ceiling / 2 + rng.random() * ceiling / 2


DEFAULT_BACKOFF = Backoff()
