"""Latency histograms: HdrHistogram (1 us .. 60 s, 3 significant digits) per operation kind.

Load processes send their histograms to the parent in HdrHistogram's compressed encoded form, which
the parent merges exactly (``decode_and_add``): averaging per-process percentiles would be wrong.

``hdrh`` comes with the ``bench`` extra; it is imported when a histogram is made, so that importing
the benchmark (``okapi bench`` checks the extra first and says what to install) never fails on it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hdrh.histogram import HdrHistogram

LOWEST_US = 1
HIGHEST_US = 60_000_000
SIGNIFICANT_DIGITS = 3


def new_histogram() -> HdrHistogram:
    from hdrh.histogram import HdrHistogram

    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


def record_us(histogram: HdrHistogram, latency_us: int, count: int = 1) -> None:
    """Record a latency (``count`` times), clamped into the histogram's range (an overflow must not
    lose the sample)."""
    histogram.record_value(min(max(latency_us, LOWEST_US), HIGHEST_US), count)


def merge_encoded(encoded: Iterable[bytes]) -> HdrHistogram:
    merged = new_histogram()
    for blob in encoded:
        if blob:
            merged.decode_and_add(blob)
    return merged
