"""``make floor-demo`` as a person runs it: its line with the page's address and log-in, the
page showing the four tables dealing, and a stop that leaves nothing behind."""
from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from playwright.sync_api import Browser, expect

from tests.support.brokers import _die_with_parent, free_port

LINE = re.compile(r"the floor: (http://\S+)  log in as (\S+) / (\S+)")


def _port_taken(demo: subprocess.Popen[bytes], out: Path) -> bool:
    """The demo stopped at once because its port was taken (it says so first, before it starts anything)."""
    try:
        demo.wait(5)
    except subprocess.TimeoutExpired:
        return False
    return "is taken" in out.read_text()


def test_the_floor_demo_shows_its_tables_live_and_stops_clean(tmp_path: Path, browser: Browser):
    out = tmp_path / "demo.out"
    for _ in range(3):  # a port free a moment ago may be taken by another test's server by now
        with out.open("wb") as file:
            demo = subprocess.Popen([sys.executable, "-m", "cardd.cli.floor_demo", "--port", str(free_port())],
                                    stdout=file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    preexec_fn=_die_with_parent)
        if not _port_taken(demo, out):
            break
    try:
        deadline = time.monotonic() + 90
        while not (found := LINE.search(out.read_text())):
            assert demo.poll() is None and time.monotonic() < deadline, out.read_text()
            time.sleep(0.2)
        url, user, password = found.groups()
        folder = re.search(r"everything in (\S+)", out.read_text())
        assert folder is not None, out.read_text()
        page = browser.new_context().new_page()
        page.goto(url)
        page.get_by_label("User").fill(user)
        page.get_by_label("Password").fill(password)
        page.get_by_role("button", name="Log in").click()
        expect(page.locator("li.tile")).to_have_count(4, timeout=30000)
        expect(page.locator("section.pit h2").first).to_contain_text("Pit 1")
        expect(page.locator("li.tile.dealing").first).to_be_visible(timeout=30000)
        page.context.close()
    finally:
        demo.send_signal(signal.SIGTERM)
        assert demo.wait(60) == 0, out.read_text()
    assert "floor-demo: stopped" in out.read_text()
    assert not Path(folder.group(1)).exists(), "the demo's folder is left behind"
