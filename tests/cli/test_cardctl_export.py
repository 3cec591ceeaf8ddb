"""``cardctl log --export FILE``: the daemon's archive export, journaled, copied and checked."""
from __future__ import annotations

import csv
import hashlib
import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from cardd.api.client import ApiClient
from cardd.cli.common import CliError
from cardd.cli.journal import copy_checked
from tests.cli.cli_rig import cardctl, start_round
from tests.daemon.daemon_rig import Daemon, simulate



@pytest.fixture
def daemon(directory: Path) -> Iterator[Daemon]:
    with simulate(directory) as running:
        yield running


def test_an_archive_export_is_journaled_and_the_copy_is_the_journaled_file(daemon, directory):
    start_round(daemon)
    sock = daemon.socket_path
    target = directory / "archive.csv"
    run = cardctl(sock, "log", "--export", str(target), "--json")
    assert run.code == 0, run.err
    done = run.json()
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    assert done["sha256"] == digest and done["format"] == "csv" and done["first_seq"] == 1
    with ApiClient(sock) as client:
        (noted,) = client.log(reason="JOURNAL_EXPORTED").records
    assert noted.seq == done["record_seq"] and noted.kind == "export"
    message = f"exported {done['exported']} record(s) (seq 1..{done['last_seq']}) to {done['daemon_file']}"
    assert noted.data == {"file": done["daemon_file"], "format": "csv", "sha256": digest, "first_seq": 1,
                          "last_seq": done["last_seq"], "count": done["exported"], "message": message}
    # the text view's message column (wide enough for the whole path)
    shown = cardctl(sock, "log", "--reason", "JOURNAL_EXPORTED", prefix=("env", "COLUMNS=300"))
    assert shown.code == 0 and message in shown.out
    assert Path(done["daemon_file"]).parent == directory / "exports"  # the daemon's copy stays
    assert Path(done["daemon_file"]).read_bytes() == target.read_bytes()
    rows = list(csv.DictReader(target.open(newline="")))
    assert [int(r["seq"]) for r in rows] == list(range(1, done["last_seq"] + 1)) == \
        list(range(1, done["exported"] + 1))
    assert rows[1]["prev"] == rows[0]["hash"]
    assert cardctl(sock, "verify-journal").code == 0
    status = cardctl(sock, "status")  # the export moved STATE's retention, and the status line with it
    assert status.code == 0 and f"-day horizon): pruned through seq 0, exported through seq {done['last_seq']}," in status.out


def test_a_time_range_exports_that_stretch_of_the_chain(daemon, directory):
    sock = daemon.socket_path
    with ApiClient(sock) as client:
        records = client.log(limit=1000).records
    middle = records[len(records) // 2]
    target = directory / "from-the-middle.jsonl"
    # to the millisecond below: a record's time as a float is a few hundred ns off its own ts_ns
    since = math.floor(middle.time * 1000) / 1000
    run = cardctl(sock, "log", "--since", repr(since), "--export", str(target), "--json")
    assert run.code == 0, run.err
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert lines[0]["seq"] <= middle.seq and lines[-1]["seq"] == run.json()["last_seq"]
    assert [line["seq"] for line in lines] == list(range(lines[0]["seq"], lines[-1]["seq"] + 1))
    assert run.json()["first_seq"] == lines[0]["seq"]


def test_a_file_changed_after_its_export_is_caught_and_the_copy_removed(directory):
    source = directory / "journal-export.jsonl"
    source.write_bytes(b'{"seq":1}\n')
    journaled = hashlib.sha256(source.read_bytes()).hexdigest()
    copy_checked(source, directory / "good.jsonl", journaled, 7)
    assert (directory / "good.jsonl").read_bytes() == source.read_bytes()
    source.write_bytes(b'{"seq":2}\n')
    with pytest.raises(CliError, match="is not the journaled") as caught:
        copy_checked(source, directory / "bad.jsonl", journaled, 7)
    assert caught.value.exit_code == 5 and not (directory / "bad.jsonl").exists()


def test_an_existing_file_is_refused_before_the_daemon_exports(daemon, directory):
    target = directory / "exists.jsonl"
    target.write_text("keep me")
    run = cardctl(daemon.socket_path, "log", "--export", str(target))
    assert run.code == 2 and "never overwrites" in run.one_line_error() and target.read_text() == "keep me"
    with ApiClient(daemon.socket_path) as client:
        assert client.log(reason="JOURNAL_EXPORTED").records == []


def test_a_file_in_a_missing_directory_is_refused_before_the_daemon_exports(daemon, directory):
    target = directory / "no-such-dir" / "archive.jsonl"
    run = cardctl(daemon.socket_path, "log", "--export", str(target))
    assert run.code == 2, run.err
    assert run.one_line_error() == f"cardctl: {target}: the directory {target.parent} does not exist"
    with ApiClient(daemon.socket_path) as client:  # no archive journaled for a copy that could not be made
        assert client.log(reason="JOURNAL_EXPORTED").records == []
    assert not (directory / "exports").exists() or not any((directory / "exports").iterdir())


@pytest.mark.parametrize(("extra", "named"), [(["--follow"], "--follow"), (["--limit", "5"], "-n/--lines"),
                                              (["-f", "-n", "5"], "--follow and -n/--lines")])
def test_an_export_refuses_follow_and_limit_instead_of_ignoring_them(directory, extra, named):
    """``log --export FILE --limit 5`` is refused, never an export of every record that says nothing of the limit."""
    target = directory / "archive.jsonl"
    run = cardctl(directory / "no-daemon.sock", "log", "--export", str(target), *extra)  # refused before connecting
    assert run.code == 2, run.err
    assert run.one_line_error() == f"cardctl: --export writes every matching record once: {named} cannot go with it"
    assert not target.exists()
