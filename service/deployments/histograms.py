"""Histograms of seconds, for medians that come from rollups instead of every job.

Bucket 0 holds everything under a millisecond; bucket b ≥ 1 holds [1 ms · 2^((b-1)/16),
1 ms · 2^(b/16)): sixteen buckets per doubling, each 4.4 % wide. A median read from a histogram is
the middle of its bucket (or the mean of two middles), so it lies within one bucket of the exact
median: within 2.2 % of it when both middle values share a bucket. A job of a year lands in bucket
560; a day's jobs of one environment fill a few dozen buckets.

A histogram travels as a JSON object, bucket number (text) to count, so that the database can add
one to a bucket in place (service.deployments.rollups).
"""

from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np

PER_DOUBLING = 16
SMALLEST_SECONDS = 0.001
# How far a histogram's median may lie from the exact one: one bucket's width.
BUCKET_RATIO = 2 ** (1 / PER_DOUBLING)

Histogram = Counter[int]


def bucket_of(seconds: float) -> int:
    if seconds < SMALLEST_SECONDS:
        return 0
    return math.floor(math.log2(seconds / SMALLEST_SECONDS) * PER_DOUBLING) + 1


def sparse(text: str | None) -> tuple[np.ndarray, np.ndarray]:
    """A histogram's JSON as its buckets and their counts (two integer arrays)."""
    counts = json.loads(text) if text else {}
    buckets = np.fromiter(map(int, counts), np.int64, len(counts))
    return buckets, np.fromiter(counts.values(), np.int64, len(counts))


def dump(histogram: Histogram) -> str:
    return json.dumps(
        {str(bucket): count for bucket, count in sorted(histogram.items())}, separators=(",", ":")
    )


def medians(histograms: np.ndarray, first_bucket: int = 0) -> np.ndarray:
    """The median of each row of dense histograms (counts of buckets `first_bucket` onwards): the
    middle sample's bucket middle, or the mean of the two middle samples' when their number is
    even; NaN for a row without samples."""
    sizes = histograms.sum(axis=1)
    running = histograms.cumsum(axis=1)
    # The first bucket that reaches each middle sample's 1-based position.
    lower = np.argmax(running >= ((sizes + 1) // 2)[:, None], axis=1) + first_bucket
    upper = np.argmax(running >= ((sizes + 2) // 2)[:, None], axis=1) + first_bucket
    return np.where(sizes > 0, (_middles(lower) + _middles(upper)) / 2, np.nan)


def _middles(buckets: np.ndarray) -> np.ndarray:
    """Each bucket's geometric middle (0 for the bucket under a millisecond)."""
    return np.where(buckets == 0, 0.0, SMALLEST_SECONDS * 2 ** ((buckets - 0.5) / PER_DOUBLING))
