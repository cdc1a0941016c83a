"""Summary figures the benches report."""

from __future__ import annotations

import random


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` by nearest rank: a measured value, never an
    interpolated one; 0.0 when there are none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


BOOTSTRAP_DRAWS = 2000


def paired_interval(
    on: list[float], off: list[float], *, draws: int = BOOTSTRAP_DRAWS, seed: int = 0
) -> tuple[float, float, float]:
    """The mean of ``on - off`` over paired measurements and its 95% bootstrap interval
    (the pairs resampled with replacement; a fixed seed, so a run's report is repeatable)."""
    if len(on) != len(off):
        raise ValueError(f"{len(on)} measurements on against {len(off)} off: not paired")
    if not on:
        return 0.0, 0.0, 0.0
    diffs = [a - b for a, b in zip(on, off, strict=True)]
    rng = random.Random(seed)
    n = len(diffs)
    means = sorted(sum(rng.choices(diffs, k=n)) / n for _ in range(draws))
    return sum(diffs) / n, means[int(0.025 * draws)], means[min(draws - 1, int(0.975 * draws))]
