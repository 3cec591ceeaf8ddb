"""Fixtures of the cli tests."""
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.daemon.daemon_rig import Daemon, directory, simulate  # noqa: F401  (the state folder fixture, one definition)


@pytest.fixture
def daemon(directory: Path) -> Iterator[Daemon]:  # noqa: F811
    """``cardd --simulate`` in ``directory``, both simulated devices' links up."""
    with simulate(directory) as running:
        client = running.client()
        client.wait_state(lambda s: all(d["link"] == "up" for d in s["devices"].values()))
        client.close()
        yield running
