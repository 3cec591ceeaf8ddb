"""Each 2.0 fault switch that breaks a requirement makes exactly its named checks fail."""
from __future__ import annotations

import pytest

from cardd.bench.conformance import Outcome
from tests.bench.conformance_support import BREAKING, ids, run_against, shown

SWITCHES = [spec for spec, (_, protocol, _) in BREAKING.items() if protocol == "2.0"]


@pytest.mark.parametrize("switch", SWITCHES)
def test_a_breaking_switch_fails_exactly_its_checks(switch: str) -> None:
    device, protocol, expected = BREAKING[switch]
    results = run_against(device, protocol, switch)
    assert ids(results, Outcome.FAIL) == set(expected), shown(results)
