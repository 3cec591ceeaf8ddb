"""``make floor-screenshots``: the pit page's pictures in docs/ (floor-page.png, table-page.png,
alarms-page.png), taken in Chromium on the test floor (tests/floor/browser/pit_rig.py) with a
few hours of rounds and a table held by a face-up misload, one offline, one behind with its
export. ``python -m tests.floor.browser.screenshots DOCS_FOLDER``."""
from __future__ import annotations

import sys
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

from tests.floor.browser.pit_rig import CHROMIUM, SITE, PitFloor, log_in, tile
from tests.floor.service_rig import Table, stamp
from tests.support.postgres import PostgresServer


def _rounds(table: Table, per_hour: list[int]) -> None:
    """Completed rounds in each of the hours before now (the oldest first), as the tracker journals them."""
    now = datetime.now(timezone.utc)
    events = []
    for back, count in enumerate(reversed(per_hour)):
        start = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=back)
        for n in range(count):
            at = start + timedelta(seconds=(3600 if back else max(60, (now - start).seconds)) * n / max(count, 1))
            events.append(table.event(at=at, reason="ROUND_STATE", source="round", message=f"round {n}: complete",
                                      data={"round": n, "state": "complete"}))
    for first in range(0, len(events), 100):
        table.publish("events", table.events_payload(events[first:first + 100]))


def main(docs: Path) -> int:
    postgres = PostgresServer().start()
    with tempfile.TemporaryDirectory(prefix="pit-screenshots-") as folder:
        floor = PitFloor(Path(folder), postgres)
        try:
            hours = datetime.now(timezone.utc).hour + 1
            for n, (name, table) in enumerate(floor.tables.items()):
                _rounds(table, [(38 + 7 * ((h + n) % 4)) if h % 6 else 0 for h in range(hours)])
            held = floor.tables["bj-01"]
            held.publish("events", held.events_payload([
                held.event(reason="FACE_UP_CARD", source="table", severity="alarm",
                           message="card #41 came out face up: misload; card to no hand", data={"index": 41}),
                held.event(reason="ROUND_HELD", source="round", severity="alarm",
                           message="round 17: held (FACE_UP_CARD)", data={"round": 17, "cause": "FACE_UP_CARD"})]))
            held.state(alarms=[{"reason": "FACE_UP_CARD", "since": stamp()}, {"reason": "ROUND_HELD", "since": stamp()}],
                       devices=[{"role": "shoe", "state": "dealing", "connected": True},
                                {"role": "shuffler", "state": "idle", "connected": True}],
                       shoe={"state": "in_play", "penetration": "50-75%"})
            floor.tables["bj-03"].state(backlog=240, oldest_s=95.0)
            floor.tables["bj-04"].status(online=False)
            floor.floor.wait_for_alarm("table_offline")
            floor.floor.wait_for_alarm("table_alarm_open")
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM)
                page = log_in(browser, floor, "ada")
                expect(tile(page, "bj-01")).to_contain_text("Held")
                expect(tile(page, "bj-04")).to_contain_text("Offline")
                page.wait_for_timeout(1500)
                page.screenshot(path=str(docs / "floor-page.png"), full_page=True)
                page.goto(f"{floor.url}/tables/{SITE}/bj-01")
                expect(page.locator("table.records")).to_contain_text("FACE_UP_CARD")
                page.wait_for_timeout(500)
                page.screenshot(path=str(docs / "table-page.png"), full_page=True)
                page.goto(f"{floor.url}/alarms")
                offline = page.locator("tr", has_text="bj-04")
                offline.get_by_label("Note").fill("technician called: power at the table")
                offline.get_by_role("button", name="Acknowledge").click()
                page.get_by_label("State").select_option("all")
                page.get_by_role("button", name="Show").click()
                expect(page.locator("tr", has_text="bj-04")).to_contain_text("Acknowledged by ada")
                page.wait_for_timeout(500)
                page.screenshot(path=str(docs / "alarms-page.png"))
                browser.close()
        finally:
            floor.close()
            postgres.close()
    for name in ("floor-page.png", "table-page.png", "alarms-page.png"):
        print(f"wrote {docs / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs")))
