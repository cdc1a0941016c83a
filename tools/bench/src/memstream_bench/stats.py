"""Summary figures the benches report."""

from __future__ import annotations

import itertools
import random
import statistics
from collections.abc import Sequence
from typing import Any


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` by nearest rank: a measured value, never an
    interpolated one; 0.0 when there are none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def lever_overhead(levers: list[float], plain: list[float], q: float = 0.95) -> float | None:
    """How much the levers add to the ``q`` quantile of checkout latency, as a share of the
    same run's plain checkouts (0.1: 10% slower); None without plain checkouts."""
    if not levers or not plain:
        return None
    base = percentile(plain, q)
    return round(percentile(levers, q) / base - 1.0, 3) if base > 0 else None


def overhead_interval(
    levers: list[float], plain: list[float], q: float = 0.95, *, draws: int = 1000, seed: int = 0
) -> tuple[float, float] | None:
    """The 95% bootstrap interval of :func:`lever_overhead` over paired checkouts (the same
    question asked both ways, resampled together): a tail quantile of a few hundred
    checkouts moves by several percent from run to run, and this says how far."""
    if len(levers) != len(plain):
        raise ValueError(f"{len(levers)} checkouts with levers against {len(plain)}: not paired")
    if not levers:
        return None
    rng = random.Random(seed)
    index = range(len(levers))
    shares: list[float] = []
    for _ in range(draws):
        picked = rng.choices(index, k=len(levers))
        share = lever_overhead([levers[i] for i in picked], [plain[i] for i in picked], q)
        if share is not None:
            shares.append(share)
    shares.sort()
    return shares[int(0.025 * len(shares))], shares[min(len(shares) - 1, int(0.975 * len(shares)))]


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


def calibration(
    probs: Sequence[float], labels: Sequence[int], bins: int = 10
) -> tuple[float, list[Any]]:
    """The expected calibration error (bins of equal width, each weighed by its share) and
    per bin: its range, packets, mean probability and the share labelled 1."""
    edges = [i / bins for i in range(bins + 1)]
    rows, ece = [], 0.0
    for lo, hi in itertools.pairwise(edges):
        inside = [(p, y) for p, y in zip(probs, labels, strict=True)
                  if lo <= p < hi or (hi == 1.0 and p == 1.0)]  # fmt: skip
        if not inside:
            rows.append({"from": lo, "to": hi, "packets": 0, "mean_p": None, "answered": None})
            continue
        mean_p = statistics.fmean(p for p, _ in inside)
        share = statistics.fmean(y for _, y in inside)
        ece += len(inside) / len(probs) * abs(mean_p - share)
        rows.append({"from": lo, "to": hi, "packets": len(inside),
                     "mean_p": round(mean_p, 4), "answered": round(share, 4)})  # fmt: skip
    return round(ece, 4), rows
