"""cardbench randomness --device: a real shuffler qualified from the orders a real shoe reads. Without
hardware the "real" devices are simulated ones behind this test's own ptys: the bench knows them only
by their URLs (a serial port's bare path for the shuffler) and opens them as the daemon does; this
test is the person at the lab's table, doing each ``hands:`` line the bench prints."""
from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from cardd.bench.program import cardbench
from simulators.faults import Faults
from simulators.pty_endpoint import PtyEndpoint
from simulators.shoe import SimulatedShoe
from simulators.shuffler import SimulatedShuffler
from simulators.stack import StackCard

CARDBENCH = Path(sys.executable).with_name("cardbench")
CARDCTL = Path(sys.executable).with_name("cardctl")


class Lab:
    """The person at the shuffler and the shoe: each ``hands:`` line of the bench done on the devices
    (the shuffled stack into the shoe and dealt out, the dealt pile back into the shuffler), and Enter
    pressed where the bench asks for it, once the move is done."""

    def __init__(self, shuffler: PtyEndpoint[SimulatedShuffler], shoe: PtyEndpoint[SimulatedShoe],
                 bench: subprocess.Popen[str]) -> None:
        self.shuffler, self.shoe, self.bench = shuffler, shoe, bench
        self.asked: list[str] = []
        self.other: list[str] = []
        self.pile: list[StackCard] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        assert self.bench.stdout is not None
        for line in self.bench.stdout:
            line = line.rstrip("\n")
            if not line.startswith("hands: "):
                self.other.append(line)
                continue
            self.asked.append(line)
            if line.startswith("hands: put the shuffled stack into the shoe"):
                self.pile = self.shuffler.call(self.shuffler.device.unload)
                self.shoe.call(self.shoe.device.load, self.pile, None)
                self.shoe.call(self.shoe.device.deal, len(self.pile))
            elif line.startswith("hands: put the ") and "back into the shuffler" in line:
                self.shuffler.call(self.shuffler.device.load, self.pile)
            if line.endswith("; then press Enter"):
                assert self.bench.stdin is not None
                self.bench.stdin.write("\n")
                self.bench.stdin.flush()


def qualify_on_devices(tmp_path: Path, shuffler: SimulatedShuffler, shuffles: int) -> tuple[int, Lab]:
    """``cardbench randomness --device PATH --shoe URL`` against ``shuffler`` and a shoe behind ptys."""
    with PtyEndpoint(shuffler, link=str(tmp_path / "shuffler")) as shuffler_end, \
            PtyEndpoint(SimulatedShoe("LAB-SHOE"), link=str(tmp_path / "shoe")) as shoe_end:
        with (tmp_path / "stderr").open("w+") as stderr:
            bench = subprocess.Popen([str(CARDBENCH), "randomness", "--shuffles", str(shuffles),
                                      "--device", str(tmp_path / "shuffler"), "--shoe", shoe_end.url],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True)
            lab = Lab(shuffler_end, shoe_end, bench)
            try:
                bench.wait(timeout=100)
            finally:
                bench.kill()
                lab.thread.join(10)
            stderr.seek(0)
            assert "Traceback" not in stderr.read()
    return bench.returncode, lab


def test_a_shuffler_at_a_device_url_passes_on_the_orders_its_shoe_reads(tmp_path: Path) -> None:
    shuffles = 260  # the minimum for a verdict (MINIMUM_SHUFFLES)
    code, lab = qualify_on_devices(tmp_path, SimulatedShuffler("LAB-SHUF", shuffle_rng=random.Random(7)), shuffles)
    out = " ".join(lab.other)
    assert code == 0, out
    assert f"PASS ({shuffles} shuffles of 1 deck(s), shuffler serial://{tmp_path / 'shuffler'}, read by " in out
    assert re.search(r"pass +chi-squared card x position: .* pass +runs up and down: .* pass +correlation", out), out
    # one shuffle more than tested: the first one's order is what the second is loaded with
    assert lab.asked[0] == "hands: load 1 full deck(s) into the shuffler, in any order; the shoe empty; then press Enter"
    into_shoe = [line for line in lab.asked if line.startswith("hands: put the shuffled stack into the shoe")]
    back = [line for line in lab.asked if "back into the shuffler" in line]
    assert len(into_shoe) == shuffles + 1 and len(back) == shuffles
    assert all(line.endswith("(not cut or mixed); then press Enter") for line in back)
    assert into_shoe[0] == "hands: put the shuffled stack into the shoe without a cut card and deal all 52 cards"


def test_a_single_riffle_at_a_device_url_fails(tmp_path: Path) -> None:
    riffle = SimulatedShuffler("LAB-SHUF", faults=Faults.parse("riffle_once"), shuffle_rng=random.Random(7))
    code, lab = qualify_on_devices(tmp_path, riffle, 30)
    out = " ".join(lab.other)
    assert code == 1, out
    assert re.search(r"FAIL +runs up and down: .* FAIL +correlation of consecutive shuffles", out), out
    assert "FAIL (30 shuffles of 1 deck(s), shuffler serial://" in out


def _one_line(args: list[str]) -> tuple[int, str]:
    done = subprocess.run([str(CARDBENCH), "randomness", "--shuffles", "2", *args], capture_output=True, text=True,
                          timeout=60)
    assert "Traceback" not in done.stderr and done.stdout == "", done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return done.returncode, lines[0]


def test_a_missing_device_is_one_line(tmp_path: Path) -> None:
    code, line = _one_line(["--device", str(tmp_path / "ttyUSB9"), "--shoe", str(tmp_path / "ttyUSB8")])
    assert code == 4
    assert line.startswith("cardbench: ") and f"{tmp_path / 'ttyUSB9'}" in line and "cardctl devices" in line


def test_a_busy_device_is_one_line_naming_who_holds_it(tmp_path: Path) -> None:
    with PtyEndpoint(SimulatedShuffler("LAB-SHUF"), link=str(tmp_path / "shuffler")) as shuffler, \
            PtyEndpoint(SimulatedShoe("LAB-SHOE")) as shoe:
        # cardctl monitor holds the port (an exclusive open, as the daemon does) while it listens
        holder = subprocess.Popen([str(CARDCTL), "monitor", shuffler.url], stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout is not None and "link=open" in holder.stdout.readline()
            code, line = _one_line(["--device", shuffler.url, "--shoe", shoe.url])
        finally:
            holder.terminate()
            holder.wait(10)
    assert code == 4
    # the pty's holders: this test (the simulator keeps its side open) and the monitor
    assert line.startswith(f"cardbench: {shuffler.url}: busy: held by ") and f"pid {holder.pid} (cardctl)" in line
    assert line.endswith("(if it is cardd, use `cardctl status` or stop the daemon)")


def test_stdin_ending_before_the_cards_are_moved_is_one_line(tmp_path: Path) -> None:
    """No tray sensor in the protocol: the bench starts a shuffle only on the person's Enter, and with
    nobody there (stdin at its end) it stops in one line rather than shuffle an empty tray."""
    with PtyEndpoint(SimulatedShuffler("LAB-SHUF"), link=str(tmp_path / "shuffler")) as shuffler, \
            PtyEndpoint(SimulatedShoe("LAB-SHOE")) as shoe:
        done = subprocess.run([str(CARDBENCH), "randomness", "--shuffles", "2", "--device", shuffler.url,
                               "--shoe", shoe.url], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=60)
        shuffles = shuffler.call(lambda: shuffler.device.counters["shuffles"])
    assert done.returncode == 4 and "Traceback" not in done.stderr, done
    assert done.stdout == "hands: load 1 full deck(s) into the shuffler, in any order; the shoe empty; then press Enter\n"
    assert done.stderr.strip().splitlines() == [
        "cardbench: stdin ended before the cards were moved: the run needs a person at the devices pressing "
        "Enter after each move"]
    assert shuffles == 0


def test_a_silent_device_is_one_line(tmp_path: Path) -> None:
    master, slave = os.openpty()  # a port that opens, where nothing answers
    name = os.ttyname(slave)
    try:
        with PtyEndpoint(SimulatedShoe("LAB-SHOE")) as shoe:
            code, line = _one_line(["--device", name, "--shoe", shoe.url])
    finally:
        os.close(slave)
        os.close(master)
    assert code == 4
    assert line.startswith(f"cardbench: serial://{name}: ") and "no handshake within" in line, line
    assert line.endswith("(not a cardd device, the wrong baud rate, or powered off?)"), line


@pytest.mark.parametrize("args, message", [
    (["--device", "/dev/ttyUSB0"], "--device needs --shoe URL: no message of the protocol carries a shuffled order "
                                   "(docs/protocol.md, section 4), so each order is what a shoe reads as the cards "
                                   "are dealt out of it"),
    (["--shoe", "/dev/ttyUSB1"], "--shoe reads a real shuffler's orders: give the shuffler with --device URL"),
    (["--device", "/dev/ttyUSB0", "--shoe", "/dev/ttyUSB1", "--fault", "riffle_once"],
     "--fault and --seed switch the simulated shuffler: a real one (--device) has neither"),
    (["--device", "ftp://x", "--shoe", "/dev/ttyUSB1"], "ftp://x: unknown scheme 'ftp'"),
])
def test_a_device_run_asked_wrongly_is_one_usage_error(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cardbench, ["randomness", *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert result.output.count("Error:") == 1 and "Traceback" not in result.output


def _served(kind: str, link: Path) -> subprocess.Popen[str]:
    """``python -m simulators KIND --pty --link LINK``, once it serves (its first line: the path)."""
    served = subprocess.Popen([sys.executable, "-m", "simulators", kind, "--pty", "--link", str(link)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert served.stdout is not None and served.stdout.readline().strip()
    return served


def test_a_missing_shoe_beside_a_served_shuffler_is_one_line_naming_the_shoe(tmp_path: Path) -> None:
    served = _served("shuffler", tmp_path / "shuffler")
    try:
        code, line = _one_line(["--device", str(tmp_path / "shuffler"), "--shoe", str(tmp_path / "shoe")])
    finally:
        served.terminate()
        served.wait(10)
    assert code == 4
    assert line.startswith(f"cardbench: {tmp_path / 'shoe'}: no such device") and "cardctl devices" in line


def test_a_shoe_given_as_the_shuffler_is_one_line(tmp_path: Path) -> None:
    served = _served("shoe", tmp_path / "shoe")
    try:
        code, line = _one_line(["--device", str(tmp_path / "shoe"), "--shoe", str(tmp_path / "shoe")])
    finally:
        served.terminate()
        served.wait(10)
    assert code == 4
    assert re.fullmatch(rf"cardbench: serial://{re.escape(str(tmp_path / 'shoe'))}: a shoe \(OS-1 sim SHOE0001\), "
                        "not a shuffler", line), line
