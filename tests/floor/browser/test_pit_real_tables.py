"""The pit page in real Chromium against real tables: three ``cardd`` daemons on simulated devices
over ptys, in two pits, exporting to a real mosquitto, a real cardfloor archiving them in a real
PostgreSQL. A face-up misload and a round held at a table are on the floor page within 2 s and
on the table's page in words; a player's name and a device's URL written as markup are shown as
text; a pit user sees only its pit's tables."""
from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Dialog, Locator, Page, expect

from tests.floor.browser.pit_rig import log_in, tile
from tests.floor.browser.real_tables_rig import (
    HOSTILE, HOSTILE_DEVICES, PITS, RealFloor, deal_to_box, fault_next_card, open_round, play_round_out)
from tests.support.postgres import PostgresServer

#: a daemon's start, its devices' handshakes and the floor's first state of it, on a loaded machine
COMING = 30000
#: the bound on a card-level change at a table on the floor page
ON_THE_FLOOR_S = 2.0


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory, postgres: PostgresServer) -> Iterator[RealFloor]:
    floor = RealFloor(Path(tmp_path_factory.mktemp("real")), postgres)
    yield floor
    floor.close()


def ms_left(since: float, bound_s: float) -> float:
    """What is left of ``bound_s`` seconds counted from ``since`` (time.monotonic), in ms, for an
    expect's timeout (at least 1: Playwright takes 0 for no timeout at all)."""
    return max(1.0, (since + bound_s - time.monotonic()) * 1000)


def record_row(page: Page, reason: str) -> Locator:
    """The table page's last record of ``reason`` (the newest first)."""
    code = page.locator("code", has_text=re.compile(f"^{reason}$"))
    return page.locator("table.records tbody tr").filter(has=code).first


def watch_dialogs(page: Page) -> list[str]:
    opened: list[str] = []

    def dialog_opened(dialog: Dialog) -> None:
        opened.append(dialog.message)
        dialog.dismiss()
    page.on("dialog", dialog_opened)
    return opened


def test_a_face_up_misload_at_a_real_table_is_on_the_floor_page_within_2_s_then_its_page(real: RealFloor,
                                                                                          browser: Browser):
    table = real.tables["bj-11"]
    page = log_in(browser, real.pit, "ada")
    bj11 = tile(page, "bj-11", real.site)
    open_round(table)
    state = deal_to_box(table)
    assert state["round"]["state"] not in ("void", "complete"), state["round"]
    expect(bj11).to_contain_text("Dealing", timeout=COMING)
    expect(bj11).not_to_contain_text("Needs attention")
    round_id = state["round"]["id"]

    injected = fault_next_card(table, state, "face_up_at")
    expect(bj11).to_contain_text("Held", timeout=ms_left(injected, ON_THE_FLOOR_S))
    expect(bj11).to_contain_text("Needs attention: held")  # the same paint: it came with the state
    expect(bj11).to_contain_text("FACE_UP_CARD")
    after = table.client.state()
    assert after["round"]["state"] == "void", after["round"]  # seed 000 §7: a misload voids its round
    assert "FACE_UP_CARD" in [a["reason"] for a in after["alarms"]]
    first = page.locator("section.pit").first.locator("li.tile").first
    expect(first).to_have_attribute("data-table", f"{real.site}/bj-11")  # the table needing a person first

    bj11.get_by_role("link", name=re.compile("bj-11")).click()
    expect(page).to_have_url(f"{real.pit.url}/tables/{real.site}/bj-11")
    expect(page.locator("dl.facts")).to_contain_text("Held")
    expect(page.locator("#round")).to_contain_text(f"Round {round_id}: void")
    alarms = page.locator("li.alarm")
    expect(alarms.filter(has_text="FACE_UP_CARD")).to_contain_text("FACE_UP_CARD: a card read face up")
    expect(alarms.filter(has_text="ROUND_VOID")).to_contain_text("ROUND_VOID: the round is void and every bet returned")
    records = page.locator("table.records")
    misload = record_row(page, "FACE_UP_CARD")
    expect(misload).to_contain_text("came out face up: misload; card to no hand")
    expect(misload).to_contain_text("a card read face up")  # the reason code in words
    expect(record_row(page, "ROUND_VOID")).to_contain_text(f"round {round_id}: void (FACE_UP_CARD); all bets returned")
    expect(page.locator("svg.chart")).to_be_visible()
    page.context.close()


def test_a_round_held_at_a_real_table_is_on_the_floor_page_within_2_s_then_its_page(real: RealFloor,
                                                                                   browser: Browser):
    table = real.tables["bj-21"]
    page = log_in(browser, real.pit, "sam")  # surveillance sees every pit
    bj21 = tile(page, "bj-21", real.site)
    open_round(table)
    state = deal_to_box(table)
    expect(bj21).to_contain_text("Dealing", timeout=COMING)
    expect(bj21).not_to_contain_text("Held")
    round_id = state["round"]["id"]

    injected = fault_next_card(table, state, "conflicting_read_at")
    expect(bj21).to_contain_text("Held", timeout=ms_left(injected, ON_THE_FLOOR_S))
    expect(bj21).to_contain_text("ROUND_HELD")
    assert table.client.state()["round"]["state"] not in ("void", "complete")  # held, not ended

    bj21.get_by_role("link", name=re.compile("bj-21")).click()
    expect(page).to_have_url(f"{real.pit.url}/tables/{real.site}/bj-21")
    expect(page.locator("#round")).to_contain_text(f"Round {round_id}: held")
    expect(page.locator("li.alarm").filter(has_text="ROUND_HELD")).to_contain_text(
        "ROUND_HELD: the round stops until a supervisor decides")
    expect(record_row(page, "ROUND_HELD")).to_contain_text(f"round {round_id}: held (CONFLICTING_READ)")
    expect(record_row(page, "CONFLICTING_READ")).to_contain_text("the first read stands; round held")
    page.context.close()


def test_a_player_s_name_and_a_device_s_url_written_as_markup_are_shown_as_text(real: RealFloor, browser: Browser):
    table = real.tables[HOSTILE_DEVICES]
    page = log_in(browser, real.pit, "ada")
    dialogs = watch_dialogs(page)
    round_id = open_round(table, player=HOSTILE)["round"]["id"]
    done = play_round_out(table)
    assert done["round"]["state"] == "complete", done["round"]
    expect(tile(page, HOSTILE_DEVICES, real.site)).to_contain_text("Rounds this hour: 1", timeout=COMING)

    page.goto(f"{real.pit.url}/tables/{real.site}/{HOSTILE_DEVICES}")
    records = page.locator("table.records")
    expect(records).to_contain_text(f"round {round_id}: {HOSTILE} bets 10.00 on box 1")
    expect(record_row(page, "SETTLED")).to_contain_text(f"round {round_id}: {HOSTILE} ")
    # the round played is in the day's chart: an hour of 1 round
    expect(page.locator("svg.chart > title")).to_have_text(re.compile(r"^Rounds per hour today: [0-9, ]*\b1\b"))
    devices = page.locator("table.list").first
    expect(devices).to_contain_text(f"/{HOSTILE}/shoe")  # the URL the table's configuration names
    expect(devices).to_contain_text(f"/{HOSTILE}/shuffler")
    assert page.locator("img").count() == 0
    assert page.evaluate("window.__pwned") is None
    assert dialogs == []
    page.context.close()


def test_a_pit_user_sees_only_its_pit_s_real_tables(real: RealFloor, browser: Browser):
    page = log_in(browser, real.pit, "ada")  # every table has come: an absence below is the scope's
    for table in real.tables:
        expect(tile(page, table, real.site)).to_contain_text("Online", timeout=COMING)
    expect(page.locator("li.tile")).to_have_count(3)
    page.context.close()

    for user, pit in (("pat", "Pit 1"), ("pia", "Pit 2")):
        page = log_in(browser, real.pit, user)
        for table in PITS[pit]:
            expect(tile(page, table, real.site)).to_be_visible()
        expect(page.locator("li.tile")).to_have_count(len(PITS[pit]))
        expect(page.locator("section.pit h2")).to_have_count(1)
        expect(page.locator("section.pit h2")).to_contain_text(pit)
        other = next(table for name, tables in PITS.items() if name != pit for table in tables)
        page.goto(f"{real.pit.url}/tables/{real.site}/{other}")
        expect(page.locator("#notice")).to_contain_text("no table")
        page.context.close()
