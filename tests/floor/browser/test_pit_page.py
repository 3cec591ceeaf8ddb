"""The pit page in real Chromium against a real cardfloor, mosquitto and PostgreSQL: live
changes, acknowledgements with who, restarts survived, pits kept apart, log-in refused and
rate-limited, and what tables and people sent shown as text, never run."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Dialog, expect

from tests.floor.browser.pit_rig import SITE, PitFloor, log_in, tile
from tests.export.export_rig import SITE as EXPORT_SITE, ExportTable
from tests.floor.service_rig import stamp, wait_until

HOSTILE = "<img src=x onerror=window.__ran=1;alert(1)>"


def test_a_round_held_by_a_face_up_misload_shows_on_the_floor_and_the_table_page(pit: PitFloor, browser: Browser):
    page = log_in(browser, pit, "ada")
    bj01 = tile(page, "bj-01")
    expect(bj01).to_contain_text("Dealing")
    expect(bj01).to_contain_text("Online")
    expect(page.locator("section.pit h2").first).to_contain_text("Pit 1")
    table = pit.tables["bj-01"]
    table.publish("events", table.events_payload([
        table.event(reason="FACE_UP_CARD", source="table", severity="alarm",
                    message="card #12 came out face up: misload; card to no hand", data={"index": 12}),
        table.event(reason="ROUND_HELD", source="round", severity="alarm", message="round 7: held (FACE_UP_CARD)",
                    data={"round": 7, "cause": "FACE_UP_CARD"})]))
    table.state(alarms=[{"reason": "FACE_UP_CARD", "since": stamp()}, {"reason": "ROUND_HELD", "since": stamp()}])
    expect(bj01).to_contain_text("Held", timeout=2000)  # a held round on the floor page within 2 s
    expect(bj01).to_contain_text("FACE_UP_CARD")
    expect(bj01).to_contain_text("Needs attention")
    first = page.locator("section.pit").first.locator("li.tile").first
    expect(first).to_have_attribute("data-table", f"{SITE}/bj-01")  # the tile needing a person comes first
    bj01.get_by_role("link", name=re.compile("bj-01")).click()
    expect(page).to_have_url(f"{pit.url}/tables/{SITE}/bj-01")
    expect(page.locator("#round")).to_contain_text("Round 7: held")
    records = page.locator("table.records")
    expect(records).to_contain_text("FACE_UP_CARD")
    expect(records).to_contain_text("a card read face up")  # the reason code in words
    expect(page.locator("svg.chart")).to_be_visible()
    page.context.close()


def test_a_real_table_s_rounds_and_devices_show_live(pit: PitFloor, browser: Browser, directory):
    """A real cardd --simulate-style table (the daemon on simulated devices over ptys) exporting to
    the floor's broker: its tile comes, its devices and rounds as its export says them."""
    user, password_file = pit.broker.add_table(EXPORT_SITE, "bj-real")
    page = log_in(browser, pit, "ada")
    with ExportTable(directory, [pit.broker.url], "bj-real", user=user, password_file=password_file) as table:
        real = page.locator(f'li.tile[data-table="{EXPORT_SITE}/bj-real"]')
        expect(real).to_contain_text("Online", timeout=30000)
        expect(real).to_contain_text("shuffler: idle", timeout=30000)
        table.deal_rounds(1)
        expect(real).to_contain_text("Rounds this hour: 1", timeout=30000)
        expect(page.locator("section.pit").last.locator("h2")).to_contain_text("Unassigned")
        table.stop()
    expect(real).to_contain_text("Offline", timeout=30000)
    page.context.close()


def test_an_acknowledgement_made_in_the_browser_shows_who(pit: PitFloor, browser: Browser):
    pit.tables["bj-02"].status(online=False)
    pit.floor.wait_for_alarm("table_offline")
    page = log_in(browser, pit, "pat", "/alarms")
    row = page.locator("tr", has_text="bj-02").filter(has_text="Table offline")
    expect(row).to_contain_text("Open")
    row.get_by_label("Note").fill("dealer called the pit")
    row.get_by_role("button", name="Acknowledge").click()
    expect(page.locator("tr", has_text="bj-02")).to_have_count(0)  # acknowledged: gone from the open list
    page.get_by_label("State").select_option("acknowledged")
    page.get_by_role("button", name="Show").click()
    acked = page.locator("tr", has_text="bj-02").filter(has_text="Table offline")
    expect(acked).to_contain_text("Acknowledged by pat at")
    expect(acked).to_contain_text("dealer called the pit")
    page.set_viewport_size({"width": 1024, "height": 768})  # a tablet: no page wider than its screen
    for path in ("/alarms", "/", f"/tables/{SITE}/bj-02", "/reports"):
        page.goto(pit.url + path)
        expect(page.locator("#notice")).to_have_text("")
        assert page.evaluate("document.documentElement.scrollWidth") <= 1024, path
    page.goto(pit.url + "/reports")
    expect(page.locator("#report")).to_contain_text(f"{SITE}/bj-01")
    with page.expect_download() as download:
        page.get_by_role("link", name="Download CSV").click()
    csv = Path(download.value.path()).read_text()
    assert csv.startswith("site,table,start,") and f"{SITE},bj-02," in csv
    assert "bj-03" not in csv, "the pit user's report holds its pits' tables only"
    page.goto(pit.url + "/")
    expect(page.get_by_role("link", name="Floor")).to_be_visible()
    page.keyboard.press("Tab")  # the skip link, then the pages' links: all reachable by keyboard
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Floor"
    pit.tables["bj-02"].status()
    page.context.close()


def test_a_pit_user_sees_only_its_pits_and_surveillance_acknowledges_nothing(pit: PitFloor, browser: Browser):
    page = log_in(browser, pit, "pia")
    expect(tile(page, "bj-03")).to_be_visible()
    expect(page.locator("li.tile")).to_have_count(1)
    page.goto(f"{pit.url}/tables/{SITE}/bj-01")
    expect(page.locator("#notice")).to_contain_text("no table")
    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(f"{pit.url}/login")
    page.goto(pit.url + "/")  # the session has ended
    expect(page).to_have_url(f"{pit.url}/login?next=%2F")
    page.context.close()

    pit.tables["bj-04"].status(online=False)
    pit.floor.wait_for_alarm("table_offline")
    page = log_in(browser, pit, "sam", "/alarms")
    row = page.locator("tr", has_text="bj-04")
    expect(row).to_contain_text("your role may not acknowledge")
    expect(row.get_by_role("button", name="Acknowledge")).to_have_count(0)
    alarm_id = row.get_attribute("data-alarm")
    status = page.evaluate("""async (id) => {
        const session = await (await fetch('/api/v1/session')).json();
        const answer = await fetch(`/api/v1/alarms/${id}/ack`, {method: 'POST', body: '{"note": "x"}',
            headers: {'Content-Type': 'application/json', 'X-CSRF-Token': session.csrf}});
        return answer.status;
    }""", alarm_id)
    assert status == 403
    pit.tables["bj-04"].status()
    page.context.close()


def test_a_wrong_password_is_refused_then_rate_limited_in_the_page(pit: PitFloor, browser: Browser):
    page = browser.new_context().new_page()
    page.goto(f"{pit.url}/login")
    notice = page.locator("#notice")
    for attempt in range(5):
        page.get_by_label("User").fill("tom")
        page.get_by_label("Password").fill(f"wrong {attempt}")
        page.get_by_role("button", name="Log in").click()
        expect(notice).to_have_text("Wrong user or password")
        page.evaluate("document.getElementById('notice').textContent = ''")
    page.get_by_label("User").fill("tom")
    page.get_by_label("Password").fill("wrong again")
    page.get_by_role("button", name="Log in").click()
    expect(notice).to_contain_text("Too many failed log-ins")
    expect(page).to_have_url(f"{pit.url}/login")
    page.context.close()


def test_html_in_a_device_s_text_or_a_player_s_name_is_shown_as_text(pit: PitFloor, browser: Browser):
    page = log_in(browser, pit, "ada")
    dialogs: list[str] = []

    def dialog_opened(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()
    page.on("dialog", dialog_opened)
    table = pit.tables["bj-03"]
    table.state(devices=[{"role": HOSTILE, "state": HOSTILE, "connected": True}])
    table.publish("events", table.events_payload([table.event(reason="SETTLED", who=HOSTILE, message=f"box 1 {HOSTILE}")]))
    expect(tile(page, "bj-03")).to_contain_text(HOSTILE)
    page.goto(f"{pit.url}/tables/{SITE}/bj-03")
    expect(page.locator("table.records")).to_contain_text(f"box 1 {HOSTILE}")
    expect(page.locator("table.list").first).to_contain_text(HOSTILE)  # the device's role and state
    assert page.locator("main img").count() == 0
    assert page.evaluate("window.__ran") is None
    assert dialogs == []
    page.context.close()


def test_an_open_page_survives_a_cardfloor_restart(pit: PitFloor, browser: Browser):
    page = log_in(browser, pit, "ada")
    banner = page.locator("#connection")
    expect(tile(page, "bj-02")).to_contain_text("Online")
    assert pit.floor.stop() == 0
    expect(banner).to_contain_text("Connection lost")
    table = pit.tables["bj-02"]
    table.state(alarms=[{"reason": "SHOE_REFUSED", "since": stamp()}])  # while the page cannot hear
    pit.floor.start()
    expect(banner).to_be_hidden(timeout=30000)
    expect(tile(page, "bj-02")).to_contain_text("SHOE_REFUSED", timeout=10000)
    table.state()
    page.context.close()


def test_an_open_page_survives_a_broker_restart(pit: PitFloor, browser: Browser):
    """The page's connection to cardfloor stands while the broker restarts: cardfloor's own link to
    it is the broker banner, in words, until it is back; what a table did meanwhile then arrives."""
    page = log_in(browser, pit, "ada")
    broker_banner, connection = page.locator("#broker"), page.locator("#connection")
    expect(tile(page, "bj-03")).to_contain_text("Online")
    expect(page.locator("body")).to_have_attribute("data-broker", "connected")
    expect(broker_banner).to_be_hidden()
    assert pit.broker.stop() == 0
    expect(broker_banner).to_contain_text(re.compile(
        r"^cardfloor has lost the broker since \d\d:\d\d — tables' changes are held at the tables and will arrive$"))
    expect(connection).to_be_hidden()  # the page still hears cardfloor
    table = pit.tables["bj-03"]
    table.state(alarms=[{"reason": "MISSING_READ", "since": stamp()}], wait=False)  # held at the table
    pit.broker.start()
    expect(broker_banner).to_be_hidden(timeout=30000)
    expect(tile(page, "bj-03")).to_contain_text("MISSING_READ", timeout=30000)
    expect(connection).to_be_hidden()
    wait_until(table.client.is_connected, "the table back at the broker", 60)
    table.state()
    page.context.close()
