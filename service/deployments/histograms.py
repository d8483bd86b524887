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
from collections.abc import Iterable

PER_DOUBLING = 16
SMALLEST_SECONDS = 0.001
# How far a histogram's median may lie from the exact one: one bucket's width.
BUCKET_RATIO = 2 ** (1 / PER_DOUBLING)

Histogram = Counter[int]


def bucket_of(seconds: float) -> int:
    if seconds < SMALLEST_SECONDS:
        return 0
    return math.floor(math.log2(seconds / SMALLEST_SECONDS) * PER_DOUBLING) + 1


def middle_of(bucket: int) -> float:
    """The bucket's geometric middle (0 for the bucket under a millisecond)."""
    if bucket == 0:
        return 0.0
    return SMALLEST_SECONDS * 2 ** ((bucket - 0.5) / PER_DOUBLING)


def parse(text: str | None) -> Histogram:
    return Counter({int(bucket): count for bucket, count in json.loads(text).items()}) if text else Counter()


def dump(histogram: Histogram) -> str:
    return json.dumps(
        {str(bucket): count for bucket, count in sorted(histogram.items())}, separators=(",", ":")
    )


def merged(histograms: Iterable[Histogram]) -> Histogram:
    total: Histogram = Counter()
    for histogram in histograms:
        total.update(histogram)
    return total


def median(histogram: Histogram) -> float | None:
    """The median of the samples counted: the middle sample's bucket middle, or the mean of the two
    middle samples' when their number is even."""
    size = sum(histogram.values())
    if size == 0:
        return None
    wanted = [(size + 1) // 2, (size + 2) // 2]  # 1-based positions of the middle samples
    found: list[float] = []
    seen = 0
    for bucket in sorted(histogram):
        seen += histogram[bucket]
        while wanted and wanted[0] <= seen:
            wanted.pop(0)
            found.append(middle_of(bucket))
        if not wanted:
            break
    return sum(found) / 2
