"""Retention in the running daemon: ``export_journal`` through the real socket writes the file
the chain's export record describes; the daemon's own prune (at start and every
``journal.prune_every_s``) then removes exported records past the horizon and nothing else; the
chain verifies after the prune and after a restart. Roles: a supervisor or a technician may
export, a dealer is refused and the refusal journaled.

The history to prune is a journal built before the daemon starts, with records stamped 200 days
ago and later (the journal takes the time an entry carries): the daemon's clock is the real one,
and so is the SQL guard's, so nothing sleeps and no clock is faked."""
from __future__ import annotations

import hashlib
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


from cardd.config import RULES_DIR
from cardd.daemon.retention import Retention
from cardd.daemon.tracker_service import TableService
from cardd.journal import Entry, Journal
from cardd.journal.records import iso_ns
from devices.game.rules import load_rules
from simulators.rig import SimulatedTable
from tests.support.aio import run
from tests.daemon.daemon_rig import Client, Daemon, write_config
from tests.support.clients import run_client
from tests.journal.journal_helpers import DAY_NS
from tests.support.groups import this_process, unix_groups

DAYS = 190  # history days 0..189, day d stamped (200 - d) days ago, less half a day
PER_DAY = 2
HORIZON_DAYS = 90
GROUPS = this_process({"api": "cardd-r-api", "dealer": "cardd-r-dealer", "supervisor": "cardd-r-super",
                       "technician": "cardd-r-tech"})
DEALER_UID, SUPERVISOR_UID, TECH_UID = 64541, 64542, 64543
RULES = load_rules(RULES_DIR / "casino-000.toml")


def day_ns(now: int, day: int) -> int:
    return now - (200 - day) * DAY_NS + DAY_NS // 2


def build_history(path: Path, now: int) -> None:
    """Two records a day, days 0..189: seqs 2d+1 and 2d+2 are day d. Days before 110 are past the
    90-day horizon (at least 90.5 days old); day 110 and after are not (at most 89.5 days)."""
    with Journal.open(path, create=True) as journal:
        for day in range(DAYS):
            journal.append([Entry("event", "HISTORY", "test", data={"day": day, "index": i}, ts_ns=day_ns(now, day))
                            for i in range(PER_DAY)])


def records(client: Client, **query: Any) -> list[dict[str, Any]]:
    reply = client.request({"class": "LOG", "limit": 10_000, **query})
    assert reply["class"] == "LOG", reply
    found: list[dict[str, Any]] = reply["records"]
    return found


def export(client: Client, **args: Any) -> dict[str, Any]:
    """export_journal; the command record's result, checked against the chain's export record."""
    seq = client.ok("export_journal", **args)
    (done,) = records(client, from_seq=seq, to_seq=seq)
    result: dict[str, Any] = done["data"]["result"]
    (noted,) = records(client, from_seq=result["record_seq"], to_seq=result["record_seq"])
    assert (noted["kind"], noted["reason"], noted["who"]) == ("export", "JOURNAL_EXPORTED", done["who"])
    message = f"exported {result['count']} record(s) (seq {result['first_seq']}..{result['last_seq']}) to {result['file']}"
    assert noted["data"] == {**{k: result[k] for k in ("file", "format", "sha256", "first_seq", "last_seq", "count")},
                             "message": message}
    assert noted["message"] == message  # what cardctl log shows
    return result


def prunes(client: Client) -> list[dict[str, Any]]:
    return records(client, reason="JOURNAL_PRUNED")


def wait_for(check: Any, what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, what
        time.sleep(0.05)
    return found



def test_export_then_prune_removes_only_exported_records_past_the_horizon(directory):
    now = time.time_ns()
    build_history(directory / "journal.sqlite3", now)
    with SimulatedTable.over_ptys() as sim:
        config = write_config(directory, sim.shoe.url, sim.shuffler.url, journal={"prune_every_s": 1})
        daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
        try:
            client, watcher = daemon.client(), daemon.client()
            assert watcher.request({"class": "WATCH"})["class"] == "ACK"
            assert records(client, limit=1)[0]["seq"] == 1  # nothing was exported: nothing pruned at start
            # days 0..49 exported (seqs 1..100): the file is what the chain's export record says
            first = export(client, until=(day_ns(now, 50) - DAY_NS // 4) / 1e9, format="jsonl")
            assert (first["first_seq"], first["last_seq"], first["count"]) == (1, 100, 100)
            exported = Path(first["file"])
            assert exported.parent == directory / "exports"
            assert hashlib.sha256(exported.read_bytes()).hexdigest() == first["sha256"]
            lines = [json.loads(line) for line in exported.read_text().splitlines()]
            assert [line["seq"] for line in lines] == list(range(1, 101))
            assert lines[-1]["data"] == {"day": 49, "index": 1}

            # the periodic prune takes seqs 1..100 and leaves days 50..109: old, but never exported
            (pruned,) = wait_for(lambda: prunes(client), "the daemon never pruned the exported records")
            assert pruned["data"]["through_seq"] == 100 and pruned["data"]["count"] == 100
            assert pruned["data"]["horizon_days"] == HORIZON_DAYS and pruned["who"] == "cardd"
            assert pruned["message"] == f"pruned 100 record(s) (seq 1..100): exported, older than {HORIZON_DAYS} days"
            assert records(client, limit=1)[0]["seq"] == 101
            assert records(client, reason="HISTORY", limit=1)[0]["data"] == {"day": 50, "index": 0}
            # STATE says so: records past the horizon wait for an export
            status = wait_for(lambda: (found := client.state()["retention"]) and found["pruned_through"] == 100
                              and found, "STATE never showed the prune")
            assert status["exported_through"] == 100 and status["unexported_past_horizon"] is True
            assert status["horizon_days"] == HORIZON_DAYS  # the daemon's setting (the config's default)
            assert status["oldest_unexported"].startswith(time.strftime("%Y-%m-%d", time.gmtime(day_ns(now, 50) / 1e9)))

            # everything exported: only what is past the horizon goes (days ..109 = seqs ..220);
            # days 110..189 and the daemon's own records, exported too, are younger and stay
            rest = export(client, format="csv")
            assert (rest["first_seq"], rest["format"]) == (101, "csv") and rest["last_seq"] > 2 * DAYS
            _, second = wait_for(lambda: prunes(client)[1:] and prunes(client), "no second prune")
            assert second["data"]["through_seq"] == 2 * 110 and second["data"]["count"] == 120
            assert second["message"].startswith("pruned 120 record(s) (seq 101..220)")
            history = records(client, reason="HISTORY")
            assert [r["data"]["day"] for r in history[::PER_DAY]] == list(range(110, DAYS))
            assert records(client, limit=1)[0]["seq"] == 221
            status = wait_for(lambda: (found := client.state()["retention"])["pruned_through"] == 220 and found,
                              "STATE never showed the second prune")
            assert status["unexported_past_horizon"] is False
            verified = client.ok("verify_journal")
            assert records(client, from_seq=verified, to_seq=verified)[0]["data"]["result"]["ok"] is True
            # the journal's own records went out live like any other, in seq order, none missing
            watcher.state()
            seqs = [e["seq"] for e in watcher.events]
            assert seqs == list(range(seqs[0], verified + 1))
            assert {first["record_seq"], rest["record_seq"], pruned["seq"], second["seq"]} <= set(seqs)
            client.close()
            watcher.close()
        finally:
            code, err = daemon.stop()
        assert code == 0, err
        assert "journal pruned" in err

        with Journal.open(directory / "journal.sqlite3", readonly=True) as journal:
            assert journal.verify().ok and journal.query(limit=1)[0].seq == 221
        daemon = Daemon(["--config", str(config)], directory / "cardd.sock")  # a restart on the pruned journal
        try:
            client = daemon.client()
            verified = client.ok("verify_journal")
            assert records(client, from_seq=verified, to_seq=verified)[0]["data"]["result"]["ok"] is True
            assert records(client, limit=1)[0]["seq"] == 221 and len(prunes(client)) == 2
            client.close()
        finally:
            code, err = daemon.stop()
        assert code == 0, err


@contextmanager
def journal_held(journal: Journal) -> Iterator[None]:
    """The journal's lock held by another thread, as the writer thread holds it through a commit's
    fsync or a prune chunk, until the block ends (or 10 s pass: the block waited for it)."""
    held, release, waited = threading.Event(), threading.Event(), []

    def hold() -> None:
        with journal._lock:
            held.set()
            if not release.wait(10):
                waited.append(True)

    thread = threading.Thread(target=hold)
    thread.start()
    held.wait()
    try:
        yield
    finally:
        release.set()
        thread.join()
    assert not waited, "the block waited for the journal's lock"


def test_records_after_a_check_that_saw_none_unexported_show_the_oldest_without_a_journal_lookup(tmp_path):
    """A check (the daemon's prune, here the daemon's own Retention over a real journal) that saw
    every record exported notes no oldest; records journaled after it are shown at once, not an
    hour later at the next check, and STATE asks the journal nothing for it (it is answered on
    the loop, while the writer thread may hold the journal's lock). (In the daemon each check
    follows a record of its own, start, export or prune, so the journal it sees is never all
    exported; a new empty one is.)"""
    async def main() -> None:
        with Journal.open(tmp_path / "journal.sqlite3", create=True, retention_days=HORIZON_DAYS) as journal:
            service = TableService(RULES, journal, lambda event: None)
            retention = Retention(service, journal, tmp_path / "exports", every_s=3600)
            try:
                assert await retention.prune() == 0
                assert retention.status_json() == {"pruned_through": 0, "exported_through": 0, "unexported": 0,
                                                   "oldest_unexported": None, "unexported_past_horizon": False,
                                                   "horizon_days": HORIZON_DAYS}
                now = time.time_ns()
                old, new = now - (HORIZON_DAYS + 10) * DAY_NS, now - DAY_NS
                service.add(Entry("event", "HISTORY", "test", data={"age": "old"}, ts_ns=old))
                await service.commit_of(service.add(Entry("event", "HISTORY", "test", data={"age": "new"}, ts_ns=new)))
                with journal_held(journal):
                    status = retention.status_json()
                assert status == {"pruned_through": 0, "exported_through": 0, "unexported": 2,
                                  "oldest_unexported": iso_ns(old), "unexported_past_horizon": True,
                                  "horizon_days": HORIZON_DAYS}
                await service.commit_of(service.add(Entry("event", "HISTORY", "test", data={"age": "newer"},
                                                          ts_ns=now)))
                with journal_held(journal):
                    assert retention.status_json() == {**status, "unexported": 3}  # still the first of them
                assert retention.status_json() == {**journal.retention().to_json_dict()}  # as a check would note
            finally:
                service.flush()

    run(main())


def test_a_supervisor_or_a_technician_may_export_a_dealer_is_refused_and_journaled(directory):
    with unix_groups(GROUPS) as gids, SimulatedTable.over_ptys() as sim:
        roles = {role: GROUPS[role] for role in ("dealer", "supervisor", "technician")}
        config = write_config(directory, sim.shoe.url, sim.shuffler.url, roles=roles, api_group=GROUPS["api"])
        daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
        try:
            sock = directory / "cardd.sock"
            request = {"class": "COMMAND", "id": "x", "name": "export_journal", "args": {}}
            _, refused = run_client(sock, DEALER_UID, [gids["api"], gids["dealer"]], [request])
            assert refused["class"] == "ERROR" and refused["code"] == "refused", refused
            assert "needs the supervisor or technician role" in refused["message"]
            _, by_supervisor = run_client(sock, SUPERVISOR_UID, [gids["api"], gids["supervisor"]], [request])
            _, by_technician = run_client(sock, TECH_UID, [gids["api"], gids["technician"]], [request])
            assert by_supervisor["class"] == by_technician["class"] == "ACK", (by_supervisor, by_technician)
            root = daemon.client()
            assert [(r["who"], r["data"]["file"] != "") for r in records(root, reason="JOURNAL_EXPORTED")] == [
                (str(SUPERVISOR_UID), True), (str(TECH_UID), True)]
            (refusal,) = records(root, reason="COMMAND_REFUSED")
            assert refusal["data"]["command"] == "export_journal" and refusal["data"]["uid"] == DEALER_UID
            assert refusal["data"]["refused"] == "needs the supervisor or technician role"
            assert sorted(p.name for p in (directory / "exports").iterdir())[0].startswith("journal-")
            assert len(list((directory / "exports").iterdir())) == 2  # the dealer's made no file
            # the exports belong to the API group, readable by it (cardctl copies them) and by no one else
            exports = directory / "exports"
            made = sorted(exports.iterdir())[0]
            assert (exports.stat().st_gid, exports.stat().st_mode & 0o777) == (gids["api"], 0o750)
            assert (made.stat().st_gid, made.stat().st_mode & 0o777) == (gids["api"], 0o640)
            for uid, groups, readable in ((SUPERVISOR_UID, [gids["api"], gids["supervisor"]], True),
                                          (SUPERVISOR_UID, [gids["supervisor"]], False)):
                read = subprocess.run(["cat", str(made)], user=uid, group=groups[0], extra_groups=groups[1:],
                                      capture_output=True, timeout=30)
                assert (read.returncode == 0 and read.stdout == made.read_bytes()) is readable, read.stderr
            bad = root.command("export_journal", format="xml")
            assert bad["class"] == "ERROR" and bad["code"] == "bad-args" and "format" in bad["message"]
            root.close()
        finally:
            code, err = daemon.stop()
        assert code == 0, err
