"""One floor and one browser for the pit page's tests of a module (a cardfloor, a broker, a
database and Chromium each start once)."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright

from tests.floor.browser.pit_rig import CHROMIUM, PitFloor
from tests.support.postgres import PostgresServer
from tests.daemon.daemon_rig import directory  # noqa: F401  (a real table's state folder)


@pytest.fixture(scope="module")
def pit(tmp_path_factory: pytest.TempPathFactory, postgres: PostgresServer) -> Iterator[PitFloor]:
    floor = PitFloor(Path(tmp_path_factory.mktemp("pit")), postgres)
    yield floor
    floor.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM)
        yield chromium
        chromium.close()
