"""The chi-squared survival function against tabulated critical values, and category pooling."""
from __future__ import annotations

import math

import pytest

from tests.game.game_stats import chi2_sf, chi2_statistic


@pytest.mark.parametrize("x,df,p", [(3.841, 1, 0.05), (6.635, 1, 0.01), (10.828, 1, 0.001), (11.070, 5, 0.05),
                                    (20.515, 5, 0.001), (18.307, 10, 0.05), (29.588, 10, 0.001),
                                    (67.505, 50, 0.05), (124.342, 100, 0.05), (149.449, 100, 0.001)])
def test_critical_values(x: float, df: int, p: float) -> None:
    assert chi2_sf(x, df) == pytest.approx(p, rel=2e-3)


def test_edges_and_monotone() -> None:
    assert chi2_sf(0.0, 4) == 1.0
    assert chi2_sf(2.0, 2) == pytest.approx(math.exp(-1.0))  # df 2: sf = exp(-x/2)
    values = [chi2_sf(x, 7) for x in range(0, 60, 3)]
    assert all(a > b for a, b in zip(values, values[1:]))


def test_statistic_pools_small_categories() -> None:
    stat, df = chi2_statistic([50, 50, 0], [0.5, 0.5, 0.0])
    assert (stat, df) == (0.0, 1)
    stat, df = chi2_statistic([48, 49, 3], [0.49, 0.49, 0.02])  # 2 expected in the last: pooled
    assert df == 1
    assert chi2_statistic([50, 49, 1], [0.5, 0.5, 0.0])[0] == math.inf  # an impossible outcome happened
    assert chi2_statistic([60, 20, 20, 0], [0.6, 0.2, 0.2, 0.0], min_expected=30) == (0.0, 1)
