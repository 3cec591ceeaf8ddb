"""The pit page's rig: a real mosquitto, PostgreSQL and cardfloor serving the pages on a free
port, tables publishing the contract's payloads (tests/floor/service_rig.py), users made with
``cardfloor user add``, and Debian's Chromium driven by Playwright (never a downloaded browser)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx
from playwright.sync_api import Browser, Locator, Page, expect

from tests.floor.service_rig import CARDFLOOR, Floor, Table, floor_file, wait_until
from tests.support.brokers import Mosquitto, free_port
from tests.support.postgres import PostgresServer

CHROMIUM = "/usr/bin/chromium"
SITE = "floor1"
PITS = {"Pit 1": ["bj-01", "bj-02"], "Pit 2": ["bj-03"]}
UNASSIGNED = ["bj-04"]
#: name -> (role, pits); every password is PASSWORD
USERS = {"ada": ("admin", []), "pat": ("pit", ["Pit 1"]), "pia": ("pit", ["Pit 2"]), "sam": ("surveillance", []),
         "tom": ("pit", ["Pit 1"])}
PASSWORD = "correct horse battery"
QUICK_ALARMS = "offline_s = 1.0\ngap_s = 1.0\nbacklog_min = 0.1\ntable_alarm_min = 0.1\nclock_offset_s = 30.0\n"
TIME_ZONE = "America/Los_Angeles"


class PitFloor:
    """The floor of the pit page's tests: its broker, database, cardfloor and tables."""

    def __init__(self, directory: Path, postgres: PostgresServer, *, site: str = SITE,
                 pits: dict[str, list[str]] | None = None, unassigned: list[str] | None = None,
                 publishers: bool = True) -> None:
        """The floor's ``pits`` (default :data:`PITS`) of ``site``; ``publishers``: each of their
        tables and ``unassigned``'s (default :data:`UNASSIGNED`) a contract publisher with three
        records sent, or none (real tables of the test's own export to :attr:`broker`)."""
        pits = PITS if pits is None else pits
        unassigned = UNASSIGNED if unassigned is None else unassigned
        self.directory, self.site = directory, site
        self.broker = Mosquitto(directory / "broker").start()
        self.dsn = postgres.create_database()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = floor_file(directory, self.broker, self.dsn, alarms=QUICK_ALARMS)
        pit_lines = "".join(f'[[pit]]\nname = "{name}"\ntables = [{", ".join(f"{chr(34)}{site}/{t}{chr(34)}" for t in tables)}]\n'
                            for name, tables in pits.items())
        config.write_text(config.read_text()
                          + f'[http]\nlisten = "127.0.0.1:{self.port}"\nusers_file = "{directory / "users"}"\n'
                            f'secret_file = "{directory / "secret"}"\n'
                            f'[floor]\ntime_zone = "{TIME_ZONE}"\ntarget_rounds_per_hour = 60\n{pit_lines}')
        self.config = config
        for name, (role, user_pits) in USERS.items():
            self.cardfloor("user", "add", name, "--role", role, *[a for p in user_pits for a in ("--pit", p)],
                           "--password-stdin", stdin=PASSWORD + "\n")
        self.floor = Floor(config, self.dsn, self.broker).start()
        self.wait_serving()
        self.tables: dict[str, Table] = {}
        if publishers:
            self.tables = {name: Table(self.broker, site, name) for tables in pits.values() for name in tables}
            self.tables |= {name: Table(self.broker, site, name) for name in unassigned}
        for table in self.tables.values():
            table.status()
            table.state(devices=[{"role": "shoe", "state": "dealing", "connected": True},
                                 {"role": "shuffler", "state": "idle", "connected": True}])
            table.send(3)
        for name, table in self.tables.items():
            self.floor.wait_for_seqs(site, name, [1, 2, 3])

    def cardfloor(self, *args: str, stdin: str = "") -> str:
        done = subprocess.run([CARDFLOOR, args[0], "--config", str(self.config), *args[1:]], input=stdin, capture_output=True,
                              text=True, timeout=60, env={**os.environ})
        assert done.returncode == 0, f"cardfloor {' '.join(args)}: {done.returncode}\n{done.stdout}{done.stderr}"
        return done.stdout

    def wait_serving(self) -> None:
        def answers() -> bool:
            try:
                return httpx.get(f"{self.url}/login", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False
        wait_until(answers, "cardfloor serving the pages", 60)

    def restart(self) -> None:
        assert self.floor.stop() == 0
        self.floor.start()
        self.wait_serving()

    def close(self) -> None:
        for table in self.tables.values():
            table.close()
        self.floor.kill()
        self.broker.kill()


def log_in(browser: Browser, floor: PitFloor, user: str, path: str = "/") -> Page:
    """A new context (its own cookies) logged in as ``user`` through the log-in page, at ``path``."""
    return log_in_at(browser, floor.url, user, PASSWORD, path)


def log_in_at(browser: Browser, url: str, user: str, password: str, path: str = "/", timeout_ms: float = 5000) -> Page:
    """A new context logged in as ``user`` on the cardfloor at ``url`` through its log-in page, at
    ``path`` (benchmarks/floor.py's browsers log in so too, given longer: a floor at full load)."""
    page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    page.goto(url + path, timeout=max(timeout_ms, 30_000))
    expect(page).to_have_url(f"{url}/login?next={path.replace('/', '%2F')}", timeout=timeout_ms)
    page.get_by_label("User").fill(user)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(url + path, timeout=timeout_ms)
    return page


def tile(page: Page, table: str, site: str = SITE) -> Locator:
    return page.locator(f'li.tile[data-table="{site}/{table}"]')
