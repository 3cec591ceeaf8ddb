from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_leaks(no_leaks):
    """Every journal test closes what it opens: connections, lock files, child processes' pipes."""
    yield
