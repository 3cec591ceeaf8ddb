"""make test's order: the slow files named in tests/conftest.py are files the suite has."""
from pathlib import Path

from tests.conftest import SLOW_FILES_FIRST

ROOT = Path(__file__).resolve().parents[1]


def test_every_slow_file_named_first_is_a_test_file() -> None:
    assert len(set(SLOW_FILES_FIRST)) == len(SLOW_FILES_FIRST)
    assert [name for name in SLOW_FILES_FIRST if not (ROOT / name).is_file()] == []
