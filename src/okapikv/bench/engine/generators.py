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

The ``*_array`` functions and ``next_array`` methods are vectorized ports of the same algorithms
(numpy, chunks of draws at a time) for the load generator's hot path: YCSB sources whose key
distribution does not depend on acknowledgements generate a chunk of operations at once, so the
CPU of a load process goes to the measured store rather than to Python-level arithmetic. They
reproduce the scalar versions exactly for the same uniform draws (tests compare them); numpy is
imported lazily so that processes which never benchmark do not pay for importing it.
"""

from __future__ import annotations

import bisect
import functools
import math
import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

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


def fnvhash64_array(values: npt.NDArray[np.integer]) -> npt.NDArray[np.uint64]:
    """``fnvhash64`` of every element (read as the 8 bytes of a 64-bit two's complement integer).

    Exactly ``fnvhash64``: uint64 arithmetic wraps modulo 2^64 as Java's long does, and Java's
    ``Math.abs`` of the signed result is ``2^64 - h`` when the top bit of ``h`` is set (so
    ``h == 2^63`` gives ``2^63``, as the scalar version's Python ``abs`` does).
    """
    import numpy as np

    octets = np.asarray(values).astype("<u8").reshape(-1).view(np.uint8).reshape(-1, 8)
    hashes = np.full(octets.shape[0], FNV_OFFSET_BASIS_64, dtype=np.uint64)
    prime = np.uint64(FNV_PRIME_64)
    for position in range(8):  # little-endian: column i is (value >> 8 i) & 0xFF
        np.bitwise_xor(hashes, octets[:, position], out=hashes)
        np.multiply(hashes, prime, out=hashes)  # wraps modulo 2^64, silently for arrays
    negative = hashes >= np.uint64(1 << 63)
    np.negative(hashes, out=hashes, where=negative)  # unsigned negation: 2^64 - h
    return hashes.reshape(np.shape(values))


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

    def _set_item_count(self, item_count: int) -> None:
        if item_count > self.count_for_zeta:
            self.zetan = zeta(self.count_for_zeta, item_count, self.theta, self.zetan)
        else:  # YCSB refuses to shrink; recomputing keeps the distribution exact instead
            self.zetan = zeta(0, item_count, self.theta)
        self.count_for_zeta = item_count
        self.eta = self._eta(item_count)

    def next_long(self, item_count: int) -> int:
        """One value in ``[base, base + item_count)``."""
        if item_count != self.count_for_zeta:
            self._set_item_count(item_count)
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

    def next_array(self, u: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        """``next()`` for each uniform draw in ``u`` (in ``[0, 1)``), vectorized; ``self.rng`` unused.

        The same formula in the same float64 operations, so the same values, with one caveat handled:
        numpy's ``power`` may use a SIMD implementation (SVML on AVX-512) that differs from libm's
        ``math.pow`` in the last bits for ~5% of arguments. That changes the truncated rank only
        when ``items * pow(...)`` lies within a rounding error of an integer, so those few draws
        (~0.1%) are recomputed with ``math.pow``: the result equals ``next()``'s exactly.
        """
        import numpy as np

        items = self.items
        if items != self.count_for_zeta:
            self._set_item_count(items)
        eta, alpha = self.eta, self.alpha
        scaled = np.power(eta * u - eta + 1, alpha)
        scaled *= float(items)  # what ``items * math.pow(...)`` computes: the int converted to float
        ranks = scaled.astype(np.int64)
        if eta:  # else pow(1, alpha) == 1 exactly everywhere
            # 2^-44 of the value is 256 ulps of pow's result, far more than any pow implementation errs
            near = np.flatnonzero(np.abs(scaled - np.rint(scaled)) < items * 2.0**-44)
            for position in near.tolist():
                ranks[position] = int(items * math.pow(eta * float(u[position]) - eta + 1, alpha))
        np.minimum(ranks, items - 1, out=ranks)
        uz = u * self.zetan
        ranks[uz < 1.0 + math.pow(0.5, self.theta)] = min(1, items - 1)
        ranks[uz < 1.0] = 0
        if self.base:
            ranks += self.base
        return ranks


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

    def next_array(self, u: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        """``next()`` for each uniform draw in ``u``, vectorized (the same values for the same draws)."""
        import numpy as np

        hashed = fnvhash64_array(self._zipfian.next_array(u)) % np.uint64(self.item_count)
        keys = hashed.astype(np.int64)
        if self.minimum:
            keys += self.minimum
        return keys


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

    def indices_for(self, u: npt.NDArray[np.float64]) -> npt.NDArray[np.intp]:
        """Index into ``labels`` for each uniform draw in ``u``: ``next()``'s choice, vectorized."""
        import numpy as np

        return np.searchsorted(np.asarray(self.cumulative), u, side="right")


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


#: Key tables up to this many keys (~56 MB at a million 8-byte keys) are built once per process.
KEY_TABLE_MAX = 1_000_000


@functools.lru_cache(maxsize=2)
def key_table(count: int, width: int) -> list[bytes]:
    """``[format_key(i, width) for i in range(count)]``, built once per process and shared by its
    sessions: a list index is the cheapest key there is (0.05 us against format_key's 0.4 us)."""
    format_key(max(0, count - 1), width)  # the same error as format_key for an index too wide
    return [b"%0*d" % (width, index) for index in range(count)]


def format_keys(indices: npt.NDArray[np.integer], width: int) -> list[bytes]:
    """``[format_key(i, width) for i in indices]``, vectorized: digits by integer arithmetic into a
    byte matrix, one row per key, read back as ``width``-byte strings (0.14 us a key, 1024 at a time)."""
    import numpy as np

    flat = np.asarray(indices, dtype=np.int64).ravel()
    if flat.size == 0:
        return []
    if int(flat.min()) < 0:
        raise ValueError("key index must not be negative")
    digits = min(width, 19)  # an int64 has at most 19 digits; wider keys are zero-padded
    if digits < 19 and int(flat.max()) >= 10**digits:
        raise ValueError(f"key index {int(flat.max())} does not fit in {width} bytes")
    rows = np.full((flat.size, width), ord("0"), dtype=np.uint8)
    powers = 10 ** np.arange(digits - 1, -1, -1, dtype=np.int64)
    np.add(flat[:, None] // powers % 10, ord("0"), out=rows[:, width - digits :], casting="unsafe")
    keys: list[bytes] = rows.view(f"S{width}").ravel().tolist()
    return keys


_VALUE_ALPHABET = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def make_values(count: int, size: int, rng: random.Random) -> list[bytes]:
    """A pool of random alphanumeric values that sessions cycle through (no per-op allocation)."""
    return [bytes(rng.choice(_VALUE_ALPHABET) for _ in range(size)) for _ in range(max(1, count))]
