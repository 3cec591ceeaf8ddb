"""cardctl's and cardbench's output to a pipe (not a terminal): plain text, one line per line
printed, whatever its length — nothing wrapped or cut at $COLUMNS (or rich's 80), no colours or
control codes even with $FORCE_COLOR set. The real programs, their stdout and stderr pipes."""
from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

from tests.cli.cli_rig import CARDCTL, cardctl
from tests.daemon.daemon_rig import Daemon, shuffle_and_load

CARDBENCH = Path(sys.executable).with_name("cardbench")
#: a narrow terminal's width and a request for colours: neither is a pipe's
NARROW_AND_COLOURED = ("env", "COLUMNS=40", "FORCE_COLOR=1")
ESCAPE = "\x1b"


def test_cardbench_run_names_a_scenario_under_a_long_path_on_one_line(tmp_path: Path) -> None:
    folder = tmp_path / ("scenarios-of-the-friday-night-table-" * 5)  # 180 characters
    folder.mkdir()
    path = folder / "latin-1.toml"
    path.write_bytes('description = "x"\n# caf\u00e9\nstep = []\n'.encode("latin-1"))
    done = subprocess.run([*NARROW_AND_COLOURED, str(CARDBENCH), "run", str(path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1, done.stderr
    assert f"FAIL {path}:2: not UTF-8 text (byte 23)" in done.stderr.splitlines(), done.stderr
    assert any(re.fullmatch(rf"FAIL {re.escape(str(path))} \(\d+\.\d s\)", line) for line in done.stderr.splitlines()), \
        done.stderr
    assert ESCAPE not in done.stdout + done.stderr


def bets_with_long_names(daemon: Daemon, players: int, each: int) -> int:
    """A shoe shuffled, loaded and burnt, a round opened, and ``each`` bets of every one of
    ``players`` players (a box takes at most 3) on every box, each name over 60 characters; how many bets."""
    names = [f"player-{n}-of-the-friday-night-table-{'x' * 20}-alice" for n in range(players)]
    client = daemon.client()
    try:
        shuffle_and_load(client, lambda: client.ok("sim_load_shoe"), lambda n: client.ok("sim_deal", cards=n))
        client.ok("open_round")
        for _ in range(each):
            for box in range(1, 8):
                for name in names:
                    client.ok("place_bet", box=box, player=name, amount=1000)
    finally:
        client.close()
    return each * 7 * players


def test_log_into_a_pipe_is_one_whole_line_per_record(daemon: Daemon) -> None:
    bets = bets_with_long_names(daemon, players=3, each=2)  # a journal message and an input record each
    journaled = cardctl(daemon.socket_path, "log", "--limit", "10000", "--json").json()["records"]
    run = cardctl(daemon.socket_path, "log", "--limit", "10000", prefix=NARROW_AND_COLOURED)
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert len(lines) >= len(journaled) and max(map(len, lines)) > 160  # records since the --json ones may follow
    assert sum("alice bets" in line for line in lines) == bets == 42  # grep -c "alice bets": every bet
    by_seq = {int(line.split("\t")[0]): line.split("\t") for line in lines}
    for record in journaled:
        seq, _, severity, reason, message, who = by_seq[record["seq"]]
        assert (int(seq), severity, reason, who) == (record["seq"], record["severity"], record["reason"] or "",
                                                     record["who"] or ""), by_seq[record["seq"]]
        if record["kind"] != "input":  # an input record shows its input, not its message (test_cardctl.py)
            assert message == record["message"]
    assert ESCAPE not in run.out + run.err


def test_status_into_a_pipe_is_not_wrapped_or_coloured(daemon: Daemon) -> None:
    client = daemon.client()
    try:
        state = client.wait_state(lambda s: s["retention"] is not None)  # its line: over 100 characters
    finally:
        client.close()
    run = cardctl(daemon.socket_path, "status", prefix=NARROW_AND_COLOURED)
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert re.fullmatch(rf"cardd \S+ — rules {state['rules']}, journal seq \d+", lines[0]), run.out
    for name, device in state["devices"].items():  # each device's row on one line, every column in it
        ident = device["ident"]
        assert any(re.search(rf"\b{name}\b.*\b{device['link']}\b.*{ident['model']}.*{ident['serial']}.*"
                             rf"{re.escape(ident['firmware'])}", line) for line in lines), run.out
    retention = [line for line in lines if line.startswith("retention (")]
    assert len(retention) == 1 and re.fullmatch(
        r"retention \(\d+-day horizon\): pruned through seq \d+, exported through seq \d+, \d+ record\(s\) not "
        r"exported \(oldest \S+\)", retention[0]), run.out
    assert ESCAPE not in run.out + run.err


def test_watch_into_a_file_writes_its_frame_as_wide_as_its_content(daemon: Daemon, directory: Path) -> None:
    """Redirected, the view writes its last frame: each line whole, and its panels and tables not
    stretched to a width (a pipe has none)."""
    shown = directory / "watch.txt"
    client = daemon.client()
    try:
        with shown.open("w") as out:
            watching = subprocess.Popen(["env", "COLUMNS=40", str(CARDCTL), "--socket", str(daemon.socket_path),
                                         "watch", "--frames", "2"], stdout=out, stderr=subprocess.PIPE, text=True)
            try:
                deadline = time.monotonic() + 30
                while watching.poll() is None:  # an event after the view's STATE draws its second frame
                    assert time.monotonic() < deadline, "cardctl watch --frames 2 never ended"
                    client.ok("counters", device="shoe")
                    time.sleep(0.2)
                _, err = watching.communicate(timeout=20)
            finally:
                if watching.poll() is None:
                    watching.kill()
                    watching.wait()
    finally:
        client.close()
    assert (watching.returncode, err) == (0, "")
    lines = shown.read_text().splitlines()
    assert any(re.fullmatch(r"cardd table — cardd \S+ — rules casino-000 — journal seq \d+ — \d\d:\d\d:\d\d", line)
               for line in lines), lines
    # each line whole, the longest the export's (about 140 characters), no table stretched to a width
    assert "shoe idle" in shown.read_text() and max(map(len, lines)) < 200, lines
    assert ESCAPE not in shown.read_text()
