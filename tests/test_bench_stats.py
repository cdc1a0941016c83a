"""The nearest-rank percentile the benches report."""

from __future__ import annotations

from memstream_bench.stats import percentile


def test_nearest_rank_never_interpolates() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(values, 0.5) == 51.0
    assert percentile(values, 0.95) == 96.0
    assert percentile(values[::-1], 0.95) == 96.0  # order does not matter
    assert percentile([3.0, 1.0], 1.0) == 3.0  # q = 1 is the largest value


def test_no_values() -> None:
    assert percentile([], 0.95) == 0.0
