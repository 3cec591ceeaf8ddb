"""Text from a person, a device or the journal in the views of cardctl and cardbench: shown as
text (cardd.cli.shown), never read as rich's markup or emoji codes, never styling the view, never
ending it. The real programs against the real daemon, on a real terminal (tmux) and off one."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

from click.testing import CliRunner

from cardd.bench.program import cardbench
from cardd.bench.scenario import LIBRARY
from simulators.rig import SimulatedTable
from tests.cli.cli_rig import CARDCTL, cardctl
from tests.daemon.daemon_rig import Daemon, shuffle_and_load, simulate, wait_devices, write_config
from tests.support.terminal import Tmux, kept_open

SESSION_PREFIX = "cardctl-text-test"
ROOT = Path(__file__).resolve().parents[2]
#: names that are markup to rich: a closing tag with nothing to close (a MarkupError), a colour,
#: an emoji code, a tag of no style (dropped without a word)
MARKUP_NAMES = ("[/]", "[red]MALLORY[/red]", ":joy:", "[firmware]")
#: an SGR code of tmux's capture: where a colour or an attribute starts or ends
SGR = re.compile(r"\x1b\[[0-9;:]*m")


def test_watch_shows_markup_in_a_name_as_text_unstyled_and_a_closing_tag_ends_nothing(directory):
    with simulate(directory) as daemon:
        client = daemon.client()
        wait_devices(client)
        tmux = Tmux(f"{SESSION_PREFIX}-{directory.name}",
                    kept_open(str(CARDCTL), "--socket", str(daemon.socket_path), "watch"), width=200)
        try:
            shuffle_and_load(client, lambda: client.ok("sim_load_shoe"), lambda n: client.ok("sim_deal", cards=n))
            tmux.wait_for(lambda s: "in_play" in s)  # watching: the bets are events it follows
            client.ok("open_round")
            for box, name in enumerate(MARKUP_NAMES, 1):
                client.ok("place_bet", box=box, player=name, amount=1000 * box)
            # with its colour codes: a stake shown as text has none inside it (markup would colour
            # MALLORY and drop the tags)
            stakes = [f"{name} {box}0.00" for box, name in enumerate(MARKUP_NAMES, 1)]
            bets = [f"round 1: {name} bets {box}0.00 on box {box}" for box, name in enumerate(MARKUP_NAMES, 1)]

            def drawn(screen: str) -> bool:
                return all(stake in screen for stake in stakes) and all(bet in screen for bet in bets)
            screen = tmux.wait_for(lambda s: drawn(s) or "ended with" in s, escapes=True)
            assert drawn(screen), screen
            assert "\U0001f602" not in screen, screen  # no emoji for :joy:
        finally:
            tmux.close()
            client.close()


def test_log_on_a_terminal_and_off_it_shows_markup_in_names_as_text(directory):
    with simulate(directory) as daemon:
        client = daemon.client()
        for name in MARKUP_NAMES:
            client.ok("take_seat", player=name)
        client.close()
        tmux = Tmux(f"{SESSION_PREFIX}-{directory.name}",
                    kept_open(str(CARDCTL), "--socket", str(daemon.socket_path), "log", "--limit", "1000"), width=250)
        try:
            screen = tmux.wait_for(lambda s: "ended with" in s, escapes=True)
        finally:
            tmux.close()
        assert "ended with 0" in screen, screen
        for name in MARKUP_NAMES:
            assert f"{name} takes a seat" in screen, (name, screen)
        piped = cardctl(daemon.socket_path, "log", "--limit", "1000")
        assert piped.code == 0, piped.err
        for name in MARKUP_NAMES:
            assert f"{name} takes a seat" in piped.out, (name, piped.out)


def test_status_and_watch_show_a_devices_markup_as_text(directory):
    """A device's Ident strings are its own: shown as the device sent them (escaped where they
    enter the host), markup-looking or not."""
    serial = "[red]SN[/red][/]"
    with SimulatedTable.over_ptys(serial=serial) as sim:
        config = write_config(directory, sim.shoe.url, sim.shuffler.url)
        daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
        try:
            client = daemon.client()
            wait_devices(client)
            client.close()
            status = cardctl(daemon.socket_path, "status")
            assert status.code == 0, status.err
            assert status.out.count(serial) == 2, status.out  # the shuffler's and the shoe's
            tmux = Tmux(f"{SESSION_PREFIX}-{directory.name}",
                        kept_open(str(CARDCTL), "--socket", str(daemon.socket_path), "watch"), width=200)
            try:
                screen = tmux.wait_for(lambda s: s.count(serial) == 2 or "ended with" in s, escapes=True)
            finally:
                tmux.close()
            assert screen.count(serial) == 2, screen
        finally:
            code, err = daemon.stop()
    assert code == 0, err


def test_an_error_line_shows_the_control_characters_of_what_it_quotes(tmp_path):
    """A path typed with an escape sequence in it (a pasted colour code) is quoted in the error,
    visible: it does not colour the technician's terminal."""
    socket = tmp_path / "\x1b[31mred" / "cardd.sock"
    run = cardctl(socket, "status")
    assert run.code == 3, run.err
    assert "\x1b" not in run.err and "/\\x1b[31mred/cardd.sock" in run.one_line_error(), run.err


def test_cardbench_reports_a_path_with_markup_as_it_is(tmp_path):
    folder = tmp_path / "[red]bench[" / "][" / "]"  # a path of ".../[red]bench[/][/]/...": one tag too many to close
    folder.mkdir(parents=True)
    path = folder / "clean-round.toml"
    shutil.copy(LIBRARY / "casino-000" / "clean-round.toml", path)
    result = CliRunner().invoke(cardbench, ["run", str(path)])
    assert result.exit_code == 0, result.output
    assert f"pass {path}" in " ".join(result.output.split()), result.output


def test_the_tmux_capture_keeps_a_colour_code_inside_a_coloured_text(tmp_path):
    """The watch test's check can fail: a text a program colours has its colour codes inside it."""
    tmux = Tmux(f"{SESSION_PREFIX}-colour-{tmp_path.name}",
                ["sh", "-c", r"printf '[red]\033[31mMALLORY\033[0m[/red]\n'; sleep 600"], width=80)
    try:
        screen = tmux.wait_for(lambda s: "MALLORY" in s, escapes=True)
    finally:
        tmux.close()
    assert "[red]MALLORY[/red]" not in screen and "[red]MALLORY[/red]" in SGR.sub("", screen)
