"""Chi-squared goodness of fit without scipy: the survival function is the regularised upper
incomplete gamma Q(k/2, x/2), by its series below a + 1 and Lentz's continued fraction above."""
from __future__ import annotations

import math


def _gamma_q(a: float, x: float) -> float:
    if x <= 0:
        return 1.0
    log_front = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1:  # series for P(a, x)
        term = total = 1.0 / a
        n = a
        while abs(term) > abs(total) * 1e-15:
            n += 1
            term *= x / n
            total += term
        return max(0.0, 1.0 - total * math.exp(log_front))
    tiny = 1e-300  # continued fraction for Q(a, x)
    b = x + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-15:
            break
    return math.exp(log_front) * h


def chi2_sf(x: float, df: int) -> float:
    """P(X >= x) for X chi-squared with ``df`` degrees of freedom."""
    return _gamma_q(df / 2, x / 2)


def chi2_statistic(observed: list[int], probs: list[float], min_expected: float = 5.0) -> tuple[float, int]:
    """(statistic, degrees of freedom). Categories expecting fewer than ``min_expected`` are pooled;
    a pool still that small joins the smallest kept category. An impossible outcome that happened
    gives an infinite statistic."""
    n = sum(observed)
    if any(p == 0 and o > 0 for o, p in zip(observed, probs)):
        return math.inf, max(1, sum(1 for p in probs if p > 0) - 1)
    keep, pool_o, pool_p = [], 0, 0.0
    for o, p in zip(observed, probs):
        if n * p < min_expected:
            pool_o, pool_p = pool_o + o, pool_p + p
        else:
            keep.append((o, p))
    if (pool_p > 0 or pool_o > 0) and n * pool_p < min_expected and keep:
        i = min(range(len(keep)), key=lambda k: keep[k][1])  # still too small: join the smallest kept one
        keep[i] = (keep[i][0] + pool_o, keep[i][1] + pool_p)
    elif pool_p > 0 or pool_o > 0:
        keep.append((pool_o, pool_p))
    keep = [(o, p) for o, p in keep if p > 0]
    stat = sum((o - n * p) ** 2 / (n * p) for o, p in keep)
    return stat, len(keep) - 1
