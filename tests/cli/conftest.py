"""Fixtures of the cli tests."""
from tests.daemon.daemon_rig import directory  # noqa: F401  (the state folder fixture, one definition)
