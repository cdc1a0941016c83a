"""Summary figures the benches report."""

from __future__ import annotations


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` by nearest rank: a measured value, never an
    interpolated one; 0.0 when there are none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
