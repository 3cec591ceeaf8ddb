"""Fixtures of the floor export's tests: the daemon's state folder (the brokers' fixtures are in
tests/conftest.py)."""
from tests.daemon.daemon_rig import directory  # noqa: F401  (the state folder fixture, one definition)
