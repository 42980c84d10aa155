"""Random generators of the YCSB core workloads, ported from YCSB's ``site.ycsb.generator`` so
that our YCSB numbers mean what YCSB's mean.

Why a port and not ``random.paretovariate`` or numpy's zipf: YCSB's "zipfian" is a specific
algorithm (Gray et al., "Quickly generating billion-record synthetic databases", SIGMOD 1994) with
``theta = 0.99`` and, for the core workloads, a *scrambled* variant: a zipfian over 10^10 items
hashed with FNV-1a 64 onto the key space, so the popular keys are spread over the key space
instead of clustered at its start (which would put every hot key on one partition and in one
scan range). The constants (``ITEM_COUNT``, ``ZETAN``) are YCSB's, so the distribution matches.

``SkewedLatestGenerator`` (workload D) favours the most recently inserted keys: it draws a zipfian
offset back from the newest acknowledged insert.

Every generator takes its own ``random.Random`` so a run is reproducible from its seed and
sessions never contend on the global generator.
"""

from __future__ import annotations

import bisect
import functools
import math
import random
from collections.abc import Callable, Sequence

FNV_OFFSET_BASIS_64 = 0xCBF29CE484222325
FNV_PRIME_64 = 1_099_511_628_211
_MASK_64 = (1 << 64) - 1

ZIPFIAN_CONSTANT = 0.99
#: YCSB's ScrambledZipfianGenerator draws from this many items and hashes onto the key space.
SCRAMBLED_ITEM_COUNT = 10_000_000_000
#: zeta(SCRAMBLED_ITEM_COUNT, 0.99), precomputed by YCSB (computing it takes minutes).
SCRAMBLED_ZETAN = 26.46902820178302

_ZETA_CHUNK = 1_000_000


@functools.lru_cache(maxsize=1 << 16)
def fnvhash64(value: int) -> int:
    """YCSB's ``Utils.fnvhash64``: FNV-1a over the 8 little-endian bytes of a Java long, then
    ``Math.abs`` of the signed result (Java semantics reproduced: 64-bit wrap-around).

    Cached: it scrambles zipfian ranks, most of which are the same few popular ones, and the
    8-round Python loop was 3% of the load generator's CPU per operation."""
    hashval = FNV_OFFSET_BASIS_64
    for _ in range(8):
        octet = value & 0xFF
        value >>= 8
        hashval ^= octet
        hashval = (hashval * FNV_PRIME_64) & _MASK_64
    if hashval >= 1 << 63:
        hashval -= 1 << 64
    return abs(hashval)


def zeta(start: int, stop: int, theta: float, initial_sum: float = 0.0) -> float:
    """``initial_sum + sum(1 / i**theta for i in start+1 .. stop)``: YCSB's ``zetastatic``.

    Vectorized with numpy in chunks (a million items in milliseconds, bounded memory) because a
    Python loop over a large key space would dominate a quick run's start-up.
    """
    import numpy as np

    total = initial_sum
    low = start + 1
    while low <= stop:
        high = min(stop, low + _ZETA_CHUNK - 1)
        total += float(np.sum(np.arange(low, high + 1, dtype=np.float64) ** -theta))
        low = high + 1
    return total


class ZipfianGenerator:
    """Integers in ``[minimum, maximum]``, item ``minimum`` the most popular (YCSB ``ZipfianGenerator``).

    ``next_long(item_count)`` supports a growing item count (workload D's "latest"): the zeta sum is
    extended incrementally instead of recomputed, as YCSB does.
    """

    def __init__(
        self,
        minimum: int,
        maximum: int,
        rng: random.Random,
        *,
        theta: float = ZIPFIAN_CONSTANT,
        zetan: float | None = None,
    ) -> None:
        if maximum < minimum:
            raise ValueError(f"empty range [{minimum}, {maximum}]")
        if not 0 < theta < 1:
            raise ValueError("theta must be in (0, 1)")
        self.rng = rng
        self.base = minimum
        self.items = maximum - minimum + 1
        self.theta = theta
        self.alpha = 1.0 / (1.0 - theta)
        self.zeta2theta = zeta(0, 2, theta)
        self.zetan = zetan if zetan is not None else zeta(0, self.items, theta)
        self.count_for_zeta = self.items
        self.eta = self._eta(self.items)

    def _eta(self, items: int) -> float:
        if items <= 2:
            return 0.0  # the first two items are handled without eta
        return (1 - math.pow(2.0 / items, 1 - self.theta)) / (1 - self.zeta2theta / self.zetan)

    def next_long(self, item_count: int) -> int:
        """One value in ``[base, base + item_count)``."""
        if item_count != self.count_for_zeta:
            if item_count > self.count_for_zeta:
                self.zetan = zeta(self.count_for_zeta, item_count, self.theta, self.zetan)
            else:  # YCSB refuses to shrink; recomputing keeps the distribution exact instead
                self.zetan = zeta(0, item_count, self.theta)
            self.count_for_zeta = item_count
            self.eta = self._eta(item_count)
        u = self.rng.random()
        uz = u * self.zetan
        if uz < 1.0:
            return self.base
        if uz < 1.0 + math.pow(0.5, self.theta):
            return self.base + min(1, item_count - 1)
        value = self.base + int(item_count * math.pow(self.eta * u - self.eta + 1, self.alpha))
        return min(value, self.base + item_count - 1)

    def next(self) -> int:
        return self.next_long(self.items)


class ScrambledZipfianGenerator:
    """YCSB's default request distribution: zipfian popularity, popular items scattered by hash."""

    def __init__(self, minimum: int, maximum: int, rng: random.Random) -> None:
        if maximum < minimum:
            raise ValueError(f"empty range [{minimum}, {maximum}]")
        self.minimum = minimum
        self.item_count = maximum - minimum + 1
        self._zipfian = ZipfianGenerator(0, SCRAMBLED_ITEM_COUNT, rng, zetan=SCRAMBLED_ZETAN)

    def next(self) -> int:
        return self.minimum + fnvhash64(self._zipfian.next()) % self.item_count


class UniformGenerator:
    """Integers uniform in ``[minimum, maximum]``."""

    def __init__(self, minimum: int, maximum: int, rng: random.Random) -> None:
        if maximum < minimum:
            raise ValueError(f"empty range [{minimum}, {maximum}]")
        self.minimum = minimum
        self.maximum = maximum
        self.rng = rng

    def next(self) -> int:
        return self.rng.randint(self.minimum, self.maximum)


class SkewedLatestGenerator:
    """Workload D's "latest": the newest acknowledged key most popular, older ones zipfian-less so.

    ``last_value`` returns the index of the newest key known to exist (YCSB's acknowledged insert
    counter); it grows as inserts complete.
    """

    def __init__(self, last_value: Callable[[], int], rng: random.Random) -> None:
        self.last_value = last_value
        self._zipfian = ZipfianGenerator(0, max(1, last_value()), rng)

    def next(self) -> int:
        newest = self.last_value()
        return newest - self._zipfian.next_long(max(1, newest))


class InsertSequence:
    """Indices of new keys for one process's sessions, disjoint across processes.

    Worker ``w`` of ``W`` inserts ``first + w, first + w + W, ...`` so processes never collide
    without sharing a counter (an IPC round trip per insert would distort the measurement). The
    acknowledged maximum is per process: "latest" may name a slightly newer key another process has
    not inserted yet, which reads as a miss, as in YCSB without its acknowledgement window.
    """

    def __init__(self, first: int, worker_index: int, num_workers: int) -> None:
        self.first = first
        self.stride = num_workers
        self._next = first + worker_index
        self._acknowledged = first - 1

    def next_index(self) -> int:
        index = self._next
        self._next += self.stride
        return index

    def acknowledge(self, index: int) -> None:
        self._acknowledged = max(self._acknowledged, index)

    def last_value(self) -> int:
        return self._acknowledged


class DiscreteGenerator:
    """Picks one of several labels with fixed weights (YCSB's operation chooser)."""

    def __init__(self, weighted: Sequence[tuple[str, float]], rng: random.Random) -> None:
        kept = [(label, weight) for label, weight in weighted if weight > 0]
        if not kept:
            raise ValueError("at least one positive weight is needed")
        self.labels = [label for label, _ in kept]
        total = sum(weight for _, weight in kept)
        running = 0.0
        self.cumulative: list[float] = []
        for _, weight in kept:
            running += weight / total
            self.cumulative.append(running)
        self.cumulative[-1] = 1.0
        self.rng = rng

    def next(self) -> str:
        return self.labels[bisect.bisect_right(self.cumulative, self.rng.random())]


def key_width_for(count: int) -> int:
    """Digits needed to write indices ``0 .. count - 1``."""
    return max(1, len(str(max(0, count - 1))))


def format_key(index: int, width: int) -> bytes:
    """Key of record ``index``: zero-padded decimal, ``width`` bytes.

    Fixed width makes dictionary order equal numeric (insertion) order, so a YCSB scan of ``n``
    records from key ``i`` is the range ``[key(i), key(i + n - 1)]``. ASCII digits also fit the
    stdin/stdout client's alphanumeric token format.
    """
    if index < 0:
        raise ValueError("key index must not be negative")
    text = str(index)
    if len(text) > width:
        raise ValueError(f"key index {index} does not fit in {width} bytes")
    return text.zfill(width).encode("ascii")


_VALUE_ALPHABET = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def make_values(count: int, size: int, rng: random.Random) -> list[bytes]:
    """A pool of random alphanumeric values that sessions cycle through (no per-op allocation)."""
    return [bytes(rng.choice(_VALUE_ALPHABET) for _ in range(size)) for _ in range(max(1, count))]
