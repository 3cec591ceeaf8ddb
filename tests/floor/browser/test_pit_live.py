"""The pit page live in real Chromium against a real cardfloor, mosquitto and PostgreSQL: a
table's open page follows what its table does without a reload, and the floor page groups the
tables by pit with the ones in no pit under "Unassigned", last; a tile follows its table's
rounds and alarms, and a change makes that tile again, not its neighbours."""
from __future__ import annotations

import re

from playwright.sync_api import Browser, Locator, Page, expect

from tests.floor.browser.pit_rig import PITS, SITE, UNASSIGNED, PitFloor, log_in, tile
from tests.floor.service_rig import Table, stamp


def mark_the_document(page: Page) -> None:
    """A mark a reload would lose: the page must still hold it when the change shows."""
    page.evaluate("window.__not_reloaded = true")


def not_reloaded(page: Page) -> bool:
    return page.evaluate("window.__not_reloaded === true") is True


def test_a_table_s_open_page_follows_its_table_without_a_reload(pit: PitFloor, browser: Browser):
    page = log_in(browser, pit, "ada", f"/tables/{SITE}/bj-02")
    records = page.locator("table.records")
    expect(records).to_contain_text("record 3")
    expect(page.locator("dl.facts")).to_contain_text("penetration 0-25%")
    mark_the_document(page)
    table = pit.tables["bj-02"]
    table.publish("events", table.events_payload([
        table.event(reason="ROUND_STATE", source="round", message="round 12: complete",
                    data={"round": 12, "state": "complete"})]))
    table.state(shoe={"state": "in_play", "penetration": "50-75%"},
                devices=[{"role": "shoe", "state": "dealing", "connected": False}])
    expect(records).to_contain_text("round 12: complete")
    expect(page.locator("#round")).to_contain_text("Round 12: complete")
    expect(page.locator("dl.facts")).to_contain_text("penetration 50-75%")
    expect(page.locator("table.list").first).to_contain_text("Disconnected")
    assert not_reloaded(page)
    table.state()
    expect(page.locator("table.list").first).not_to_contain_text("Disconnected")
    assert not_reloaded(page)
    page.context.close()


def pit_names(page: Page) -> list[str]:
    return [name or "" for name in page.locator("section.pit").evaluate_all("s => s.map(x => x.getAttribute('aria-label'))")]


def tiles_of(page: Page, pit_name: str) -> list[str]:
    section = page.locator(f'section.pit[aria-label="{pit_name}"]')
    return sorted(name or "" for name in section.locator("li.tile").evaluate_all("t => t.map(x => x.dataset.table)"))


def test_a_table_in_no_pit_shows_under_unassigned_last(pit: PitFloor, browser: Browser):
    page = log_in(browser, pit, "sam")
    expect(tile(page, UNASSIGNED[0])).to_be_visible()
    assert pit_names(page) == ["Pit 1", "Pit 2", "Unassigned"]
    for name, tables in PITS.items():
        assert tiles_of(page, name) == sorted(f"{SITE}/{t}" for t in tables)
    assert tiles_of(page, "Unassigned") == [f"{SITE}/{t}" for t in UNASSIGNED]
    unassigned = page.locator('section.pit[aria-label="Unassigned"]')
    expect(unassigned.locator("h2")).to_have_text("Unassigned 1 table")
    mark_the_document(page)

    newcomer = Table(pit.broker, SITE, "bj-09")  # in no [[pit]]: it joins the Unassigned tables live
    try:
        newcomer.status()
        newcomer.state()
        expect(unassigned.locator(f'li.tile[data-table="{SITE}/bj-09"]')).to_be_visible(timeout=5000)
        expect(unassigned.locator("h2")).to_have_text("Unassigned 2 tables")
        assert tiles_of(page, "Unassigned") == sorted([f"{SITE}/bj-09"] + [f"{SITE}/{t}" for t in UNASSIGNED])
        assert pit_names(page) == ["Pit 1", "Pit 2", "Unassigned"]
        assert not_reloaded(page)
        page.context.close()

        pit_user = log_in(browser, pit, "pat")  # a pit user sees its pit alone: no Unassigned tables
        expect(tile(pit_user, "bj-01")).to_be_visible()
        assert pit_names(pit_user) == ["Pit 1"]
        pit_user.context.close()
    finally:
        newcomer.close()


def rounds_shown(locator: Locator) -> int:
    found = re.search(r"Rounds this hour: (\d+)", locator.inner_text())
    assert found, locator.inner_text()
    return int(found.group(1))


def test_a_tile_counts_a_round_and_stands_out_and_its_neighbours_are_kept(pit: PitFloor, browser: Browser):
    page = log_in(browser, pit, "sam")
    counted, neighbour = tile(page, "bj-02"), tile(page, "bj-01")
    expect(counted).to_contain_text("Rounds this hour:")
    before = rounds_shown(counted)
    page.evaluate(f"""document.querySelector('li.tile[data-table="{SITE}/bj-01"]').dataset.kept = "yes" """)
    mark_the_document(page)
    table = pit.tables["bj-02"]
    table.publish("events", table.events_payload([
        table.event(reason="ROUND_STATE", source="round", message=f"round {n}: complete",
                    data={"round": n, "state": "complete"}) for n in (31, 32)]))
    expect(counted).to_contain_text(f"Rounds this hour: {before + 2}")
    first = page.locator('section.pit[aria-label="Pit 1"] li.tile').first
    expect(first).to_have_attribute("data-table", f"{SITE}/bj-01")
    table.state(alarms=[{"reason": "FACE_UP_CARD", "since": stamp()}])
    expect(counted).to_contain_text("Needs attention: held, table alarm")
    expect(first).to_have_attribute("data-table", f"{SITE}/bj-02")  # the one needing a person first
    assert neighbour.get_attribute("data-kept") == "yes", "a change at bj-02 made bj-01's tile again"
    assert not_reloaded(page)
    table.state()  # as the other tests of the module found it
    page.context.close()
