"""Fixtures of the API tests (the rig itself is api_rig.py)."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def _no_leaks(no_leaks):
    yield


@pytest.fixture
def sock_dir() -> Any:
    """A directory every test uid can reach (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="cardd-api-", dir="/tmp"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


