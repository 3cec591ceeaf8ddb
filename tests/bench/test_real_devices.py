"""cardbench run --device: the scenarios on real hardware. Without hardware, the "real" devices are
simulated ones this test runs behind its own ptys: the runner knows them only by their URLs, starts
no simulated device for those roles, and asks for every card move on stdout, which this test does as
the person at the table would. A scenario that needs a fault, a stacked shoe or an unplug is skipped
with its reason, never failed or passed."""
from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from junitparser import JUnitXml, Skipped

from cardd.bench.program import cardbench
from cardd.bench.runner import needs_simulators
from cardd.bench.scenario import LIBRARY, load_scenario
from simulators.pty_endpoint import PtyEndpoint
from simulators.rig import SimulatedTable
from simulators.shoe import SimulatedShoe
from simulators.shuffler import SimulatedShuffler

ROOT = Path(__file__).resolve().parents[2]
CARDBENCH = Path(sys.executable).with_name("cardbench")

#: no fault, no stack: it runs on real devices (random cards, so no money is expected)
A_ROUND = '''description = "a round on whatever shoe the shuffler made: it completes and settles"
rules = "casino-000"
[[step]]
do = "shuffle"
[[step]]
do = "load"
[[step]]
do = "command"
name = "open_round"
[[step]]
do = "command"
name = "place_bet"
args = { box = 1, player = "p1", amount = 1000 }
[[step]]
do = "command"
name = "no_more_bets"
[[step]]
do = "play"
strategy = "basic"
[[step]]
do = "expect"
state = { "round.state" = "complete", "devices.shuffler.ident.serial" = "REAL-SHUF", "devices.shoe-reader.ident.serial" = "REAL-SHOE" }
events = ["SHOE_VERIFIED", "BURN", "CARD_ASSIGNED", "SETTLED"]
no_events = ["ROUND_HELD"]
'''


class Dealer:
    """The person at the real devices: does each ``hands:`` line of the bench on the devices."""

    def __init__(self, table: SimulatedTable, out: subprocess.Popen[str]) -> None:
        self.table, self.out = table, out
        self.asked: list[str] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        assert self.out.stdout is not None
        for line in self.out.stdout:
            line = line.strip()
            self.asked.append(line)
            if line.startswith("hands: put the shuffled stack into the shoe"):
                self.table.hand_off()
            elif line.startswith("hands: deal "):
                count = int(line.split()[2])
                self.table.shoe.call(self.table.shoe.device.deal, count)


def test_scenarios_run_on_devices_given_by_url_and_those_needing_simulators_are_skipped(tmp_path: Path) -> None:
    scenario = tmp_path / "casino-000" / "a-round.toml"
    scenario.parent.mkdir()
    scenario.write_text(A_ROUND)
    faulted = LIBRARY / "casino-000" / "shoe-voided.toml"  # a shuffler fault from the start
    stepped = LIBRARY / "casino-000" / "shuffler-malfunction.toml"  # a jam switched on at a step
    stacked = LIBRARY / "casino-000" / "clean-round.toml"
    report = tmp_path / "report.xml"
    # serial numbers of their own: STATE shows the daemon identified these, not devices of the bench's
    table = SimulatedTable(PtyEndpoint(SimulatedShuffler("REAL-SHUF")), PtyEndpoint(SimulatedShoe("REAL-SHOE")))
    with table:
        with (tmp_path / "stderr").open("w+") as stderr:
            bench = subprocess.Popen(
                [str(CARDBENCH), "run", str(scenario), str(faulted), str(stepped), str(stacked), "--junit",
                 str(report), "--device", f"shuffler={table.shuffler.url}", "--device", f"shoe={table.shoe.url}"],
                stdout=subprocess.PIPE, stderr=stderr, text=True)
            dealer = Dealer(table, bench)  # reads the bench's stdout until it ends
            try:
                bench.wait(timeout=90)
            finally:
                bench.kill()
                dealer.thread.join(10)
            stderr.seek(0)
            err = stderr.read()
    summary = " ".join(err.split())
    assert bench.returncode == 0, err
    assert "1 passed, 0 failed, 3 skipped" in summary
    assert dealer.asked[0] == "hands: put the shuffled stack into the shoe, the cut card 67 % into the stack"
    assert dealer.asked[1:] and all(line.startswith("hands: deal ") for line in dealer.asked[1:])
    why = {
        faulted: "devices.shuffler.faults = 'extra=KD': a fault injected into the real shuffler, which real "
                 "hardware cannot be made to do",
        stepped: "step 7 (faults): 'jam_needs_clear' injected into the real shuffler, which real hardware cannot "
                 "be made to do",
        stacked: "devices.shuffler.stack: a stacked shoe, which the bench cannot put into real hardware",
    }
    for path, reason in why.items():
        assert f"SKIPPED {path}: {reason}" in summary
    cases = {case.name: case for suite in JUnitXml.fromfile(str(report)) for case in suite}
    assert cases["a-round"].is_passed
    for path, reason in why.items():
        (result,) = cases[path.stem].result
        assert isinstance(result, Skipped) and result.message == f"{path}: {reason}"


def test_a_load_between_a_real_and_a_simulated_device_is_skipped() -> None:
    scenario = load_scenario(LIBRARY / "casino-000" / "placement-error.toml")
    assert needs_simulators(scenario, {"shoe"}, by_hand=False) == \
        "step 2 (load): the stack cannot move between a real shoe and a simulated shuffler"
    assert needs_simulators(scenario, {"shuffler", "shoe"}, by_hand=False) is None
    assert needs_simulators(scenario, {"shoe"}, by_hand=True) is None  # the dealer loads a hand-shuffled shoe


@pytest.mark.parametrize("device, message", [
    ("table=serial:///dev/ttyUSB0", "--device 'table=serial:///dev/ttyUSB0': expected ROLE=URL with ROLE one of "
                                    "shuffler, shoe"),
    ("shoe", "--device 'shoe': expected ROLE=URL with ROLE one of shuffler, shoe"),
    ("shoe=ftp://x", "--device 'shoe=ftp://x': ftp://x: unknown scheme 'ftp'"),
])
def test_a_bad_device_is_one_usage_error(device: str, message: str) -> None:
    result = CliRunner().invoke(cardbench, ["run", str(LIBRARY / "casino-000" / "clean-round.toml"), "--device", device])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())
    assert result.output.count("Error:") == 1 and "Traceback" not in result.output


def test_real_devices_run_one_scenario_at_a_time() -> None:
    result = CliRunner().invoke(cardbench, ["run", str(LIBRARY), "--jobs", "2", "--device", "shoe=serial:///dev/ttyUSB0"])
    assert result.exit_code == 2 and "real devices run one scenario at a time" in result.output
