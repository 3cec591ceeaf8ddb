"""``cardctl log`` as journalctl's users read it: the newest records by default (``-n``), times
such as "1 hour ago" and "yesterday 18:00", ``-f`` in the lines the log prints, and filters that
compose. The times' own reading has an exact clock; the rest is the real cardctl against the real
``cardd --simulate``."""
from __future__ import annotations

import os
import pwd
import re
import subprocess
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from cardd.api.client import ApiClient
from cardd.cli.log_times import BadTime, unix_seconds
from tests.cli.cli_rig import CARDCTL, cardctl, start_round
from tests.daemon.daemon_rig import Daemon

BERLIN = ZoneInfo("Europe/Berlin")
#: the clock the times are read against: a Monday afternoon in Berlin, the day after the clocks
#: went back (2026-10-25: 25 hours long)
NOW = datetime(2026, 10, 26, 14, 30, 15, tzinfo=BERLIN)


def at(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> float:
    return datetime(year, month, day, hour, minute, second, tzinfo=BERLIN).timestamp()


@pytest.mark.parametrize(("text", "expected"), [
    ("now", NOW.timestamp()),
    ("today", at(2026, 10, 26)),
    ("yesterday", at(2026, 10, 25)),  # midnight of the long day: 24 h + 1 h + 14:30:15 before NOW
    ("Yesterday  18:00", at(2026, 10, 25, 18)),
    ("tomorrow 06:15:30", at(2026, 10, 27, 6, 15, 30)),
    ("09:05", at(2026, 10, 26, 9, 5)),
    ("1 hour ago", NOW.timestamp() - 3600),
    ("30 minutes ago", NOW.timestamp() - 1800),
    ("2 days ago", NOW.timestamp() - 2 * 86400),
    ("10s ago", NOW.timestamp() - 10),
    ("1 week ago", NOW.timestamp() - 7 * 86400),
    ("2026-10-26T10:00", at(2026, 10, 26, 10)),  # no offset: the clock's zone
    ("2026-10-26T10:00:00+00:00", datetime(2026, 10, 26, 10, tzinfo=timezone.utc).timestamp()),
    ("1796150000.5", 1796150000.5),
])
def test_a_time_is_read_as_journalctl_reads_it(text: str, expected: float) -> None:
    assert unix_seconds(text, NOW) == expected


def test_yesterday_is_its_midnight_across_a_change_of_the_clocks() -> None:
    assert NOW.timestamp() - unix_seconds("yesterday", NOW) == timedelta(hours=25 + 14.5, seconds=15).total_seconds()


@pytest.mark.parametrize("text", ["fortnight", "3 parsecs ago", "yesterday 25:00", "today noon", "", "-5", "nan",
                                  "1969-07-20"])
def test_a_time_that_is_none_of_the_forms_is_one_line(text: str) -> None:
    with pytest.raises(BadTime) as refused:
        unix_seconds(text, NOW)
    assert "\n" not in str(refused.value) and repr(text) in str(refused.value)


def test_a_bad_time_lists_the_accepted_forms(directory) -> None:
    run = cardctl(directory / "cardd.sock", "log", "--since", "last tuesday")
    assert run.code == 2, run.err
    error = [line for line in run.err.splitlines() if line.startswith("Error:")]
    assert len(error) == 1 and "'last tuesday'" in error[0], run.err
    for form in ("'now'", "'today'", "'yesterday 18:00'", "'1 hour ago'", "ISO 8601", "Unix seconds"):
        assert form in error[0], (form, error[0])


def seqs(out: str) -> list[int]:
    return [int(line.split("\t")[0]) for line in out.splitlines()]


def test_the_log_shows_the_newest_records_oldest_first_its_hint_on_stderr(daemon: Daemon) -> None:
    start_round(daemon)
    with ApiClient(daemon.socket_path) as client:
        last = client.state()["seq"]
    run = cardctl(daemon.socket_path, "log", "-n", "3")
    assert run.code == 0, run.err
    assert seqs(run.out) == [last - 2, last - 1, last], run.out  # the last three, as they were written
    assert "(more" not in run.out and run.err.strip() == \
        "(more: older records match: raise -n/--lines, or narrow the query with --since/--until)"
    default = cardctl(daemon.socket_path, "log")
    assert seqs(default.out) == list(range(last - 19, last + 1)), default.out  # 20: about a screenful
    everything = cardctl(daemon.socket_path, "log", "--lines", "10000")
    assert seqs(everything.out) == list(range(1, last + 1)) and everything.err == ""


def test_follow_prints_the_lines_the_log_prints(daemon: Daemon) -> None:
    printed = cardctl(daemon.socket_path, "log", "-n", "5").out.splitlines()
    follower = subprocess.Popen([str(CARDCTL), "--socket", str(daemon.socket_path), "log", "-f", "-n", "5"],
                                stdout=subprocess.PIPE, text=True)
    try:
        assert follower.stdout is not None
        followed = [follower.stdout.readline().rstrip("\n") for _ in range(5)]
        assert followed == printed
        assert cardctl(daemon.socket_path, "counters", "shoe").code == 0  # the device's answer is journaled
        live = follower.stdout.readline().rstrip("\n")  # the new record, in the same line format
        fields = live.split("\t")
        assert len(fields) == 6 and int(fields[0]) > int(printed[-1].split("\t")[0]), live
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", fields[1]), live
        assert fields[4].startswith("input: "), live
    finally:
        follower.terminate()
        follower.wait(10)


def test_the_filters_compose(daemon: Daemon) -> None:
    start_round(daemon)
    sock = daemon.socket_path
    me = pwd.getpwuid(os.getuid()).pw_name  # who sent the commands, as the daemon names this test's user
    with ApiClient(sock) as client:
        records = client.log(limit=10_000).records
    bets = [r.seq for r in records
            if r.reason == "ACTION" and (r.data or {}).get("round") == 1 and " bets " in r.message]
    alice = [r.seq for r in records if r.seq in bets and r.who == "alice"]  # a bet's record: the player's
    sent = [r.seq for r in records if r.kind == "input" and r.who == me and (r.data or {}).get("type") == "PlaceBet"]
    assert (len(bets), len(alice), len(sent)) == (3, 1, 3), records  # alice's, bob's and carol's bets
    run = cardctl(sock, "log", "-n", "100", "--reason", "ACTION", "--round", "1", "--grep", " bets ")
    assert run.code == 0, run.err
    assert seqs(run.out) == bets, run.out
    both = cardctl(sock, "log", "-n", "100", "--reason", "ACTION", "--round", "1", "--grep", " bets ", "--who", "alice")
    assert seqs(both.out) == alice, both.out
    inputs = cardctl(sock, "log", "-n", "100", "--who", me, "--grep", "^input: place_bet")  # the message as shown
    assert seqs(inputs.out) == sent, inputs.out
    assert cardctl(sock, "log", "--who", me, "--reason", "ACTION").out.strip() == "no records match"
    assert cardctl(sock, "log", "--grep", "ALICE").out.strip() == "no records match"  # a capital: case counts
    newest = cardctl(sock, "log", "--grep", "bets 10", "-n", "1")  # bob's and carol's: the newest, carol's
    assert seqs(newest.out) == [bets[-1]] and "(more:" in newest.err, (newest.out, newest.err)
    bad = cardctl(sock, "log", "--grep", "(alice")
    assert bad.code == 2 and "'(alice': not a regular expression" in bad.err, bad.err


def test_since_and_until_take_the_words_people_use(daemon: Daemon) -> None:
    sock = daemon.socket_path
    everything = cardctl(sock, "log", "-n", "10000").out
    assert everything
    assert cardctl(sock, "log", "-n", "10000", "--since", "1 hour ago").out == everything
    assert cardctl(sock, "log", "-n", "10000", "--since", "yesterday", "--until", "now").out == everything
    assert cardctl(sock, "log", "--until", "1 hour ago").out.strip() == "no records match"
    assert cardctl(sock, "log", "--since", "tomorrow").out.strip() == "no records match"
