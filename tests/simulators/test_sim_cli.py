"""`python -m simulators`: every bad option is one clear error before anything starts."""
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from core.cards import Card
from simulators.__main__ import StackSpecError, parse_options, parse_stack
from simulators.pty_endpoint import PtyEndpoint
from simulators.shoe import SimulatedShoe

ROOT = Path(__file__).resolve().parents[2]


def refused(capsys, *argv: str) -> str:
    """The error line: argparse's usage block may come first, but the last line is the one message."""
    with pytest.raises(SystemExit) as exit_:
        parse_options(list(argv))
    assert exit_.value.code == 2
    last = capsys.readouterr().err.rstrip("\n").splitlines()[-1]
    assert last.startswith("python -m simulators: error: ")
    return last


def test_a_stack_from_codes_or_a_file(tmp_path):
    stack_file = tmp_path / "stack.txt"
    stack_file.write_text("AS KD\n7h, 10D\n")
    expected = [Card.parse(c) for c in ("AS", "KD", "7H", "TD")]
    assert parse_stack("AS,KD,7H,TD") == expected
    assert parse_stack(str(stack_file)) == expected


def test_a_bad_card_in_a_stack_file_names_the_file_and_the_position(tmp_path):
    stack_file = tmp_path / "stack.txt"
    stack_file.write_text("AS KD\n7H ZZ QS\n")
    with pytest.raises(StackSpecError, match=rf"--stack file {stack_file}: card 4 of 5: 'ZZ' is not a card"):
        parse_stack(str(stack_file))


@pytest.mark.parametrize("text, why", [
    ("nosuchfile.txt", "--stack 'nosuchfile.txt': no such file"),
    ("/tmp/nowhere/stack", "no such file"),
    ("AS,XX", "--stack: card 2 of 2: 'XX' is not a card"),
    (" , ", "--stack: no card codes in it"),
])
def test_bad_stacks_are_refused_with_what_and_where(capsys, text, why):
    err = refused(capsys, "shuffler", "--pty", "--stack", text)
    assert why in err and "python -m simulators: error:" in err


def test_an_empty_stack_file_is_refused(capsys, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    assert f"--stack file {empty}: no card codes in it" in refused(capsys, "shoe", "--pty", "--stack", str(empty))


@pytest.mark.parametrize("argv, why", [
    (["shoe", "--pty", "--decks", "-1"], "argument --decks: '-1': expected a whole number, 0 or more"),
    (["shoe", "--pty", "--decks", "two"], "argument --decks: 'two': expected a whole number, 0 or more"),
    (["shoe", "--pty", "--cut-at", "0"], "argument --cut-at: '0': expected a whole number, 1 or more"),
    (["shoe", "--pty", "--pace", "-0.5"], "argument --pace: '-0.5': expected a number, 0 or more"),
    (["shuffler", "--pty", "--shuffle-time", "-3"], "argument --shuffle-time: '-3': expected a number, 0 or more"),
    (["shuffler", "--pty", "--heartbeat", "x"], "argument --heartbeat: 'x': expected a number, 0 or more"),
    (["shoe", "--pty", "--pace", "nan"], "argument --pace: 'nan': expected a number, 0 or more"),
    (["shuffler", "--pty", "--decks", "6"], "--decks, --cut-at and --pace are shoe options"),
    (["shoe", "--pty", "--decks", "6", "--stack", "AS"], "--stack or --decks, not both"),
    (["shoe", "--pty", "--link", "/nonexistent/dir/shoe"], "--link /nonexistent/dir/shoe: the directory /nonexistent/dir does not exist"),  # core.files, as cardctl and cardd say it
    (["shuffler", "--pty", "--faults", "jam=abc"], "--faults: fault switch jam=abc: expected a number of seconds, 0 or more"),
    (["shoe", "--pty", "--faults", "bit_flip_rate=2"], "fault switch bit_flip_rate=2: expected a probability from 0 to 1"),
    (["shoe", "--pty", "--faults", "jam=2"], "--faults: fault switch jam is for the shuffler only: a shoe does not shuffle"),
    (["shoe", "--pty", "--faults", "door_open"], "fault switch door_open is for the shuffler only"),
    (["shuffler", "--pty", "--faults", "unreadable_at=3"], "fault switch unreadable_at is for the shoe only"),
    (["shoe", "--pty", "--cut-at", "999", "--decks", "1"],
     "--cut-at 999: beyond the stack: the shoe is loaded with 52 cards, so the cut card goes after card 1 to 52"),
    (["shoe", "--pty", "--cut-at", "4", "--stack", "AS,KD,7H"], "--cut-at 4: beyond the stack: the shoe is loaded with 3 cards"),
    (["shoe", "--pty", "--cut-at", "5"], "--cut-at 5: no cards in the shoe to put a cut card in"),
    (["shoe"], "the following arguments are required: --pty"),
    (["shoe", "--pty", "--decks", "1261"], "a shoe holds at most 65535 cards (1260 decks)"),
    (["shoe", "--pty", "--serial", "S" * 256], "--serial: serial 'SSSSSSSSSSSSSSSS...': expected 1 to 255 UTF-8 bytes"),
    (["shuffler", "--pty", "--serial", ""], "--serial: serial '': expected 1 to 255 UTF-8 bytes"),
    (["shoe", "--pty", "--firmware-key", str(ROOT / "README.md")],
     f"--firmware-key {ROOT / 'README.md'}: not an Ed25519 public key (32 raw bytes or PEM): "),
    (["shoe", "--pty", "--firmware-key", "/nonexistent/fw.pub"], "--firmware-key /nonexistent/fw.pub: the directory /nonexistent does not exist"),
    (["shoe", "--pty", "--protocol", "1.0"], "argument --protocol: invalid choice: '1.0' (choose from '1.1', '2.0')"),
])
def test_bad_options_are_one_argparse_error_naming_the_option(capsys, argv, why):
    assert why in refused(capsys, *argv)


def test_good_options_parse(tmp_path):
    args, faults, stack = parse_options(["shoe", "--pty", "--decks", "6", "--cut-at", "200", "--pace", "0",
                                         "--faults", "unreadable_at=3", "--link", str(tmp_path / "shoe")])
    assert (args.decks, args.cut_at, args.pace, faults.unreadable_at, stack) == (6, 200, 0.0, 3, None)
    assert args.protocol == "1.1" and parse_options(["shoe", "--pty", "--protocol", "2.0"])[0].protocol == "2.0"


@pytest.mark.timeout(30)
def test_a_link_that_cannot_be_made_is_one_error_and_exit_code_1(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "shoe.new").mkdir()  # in the way of the symlink, whoever we run as
    proc = subprocess.run([sys.executable, "-m", "simulators", "shoe", "--pty", "--link", str(locked / "shoe")],
                          cwd=ROOT, capture_output=True, text=True, timeout=20)
    assert proc.returncode == 1 and proc.stdout == ""
    assert "python -m simulators: error: simulator SHOE0001 did not start" in proc.stderr
    assert "Traceback" not in proc.stderr.split("python -m simulators: error:")[-1]


def test_an_endpoint_that_cannot_make_its_link_leaks_no_pty(tmp_path):
    (tmp_path / "shoe.new").mkdir()
    fds, threads = set(os.listdir("/proc/self/fd")), threading.active_count()
    with pytest.raises(RuntimeError, match="did not start"):
        PtyEndpoint(SimulatedShoe(heartbeat_s=0), link=str(tmp_path / "shoe")).start()
    assert set(os.listdir("/proc/self/fd")) <= fds and threading.active_count() == threads
