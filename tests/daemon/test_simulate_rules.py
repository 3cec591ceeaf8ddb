"""``cardd --simulate --rules``: a simulated table under any casino's house rules, found as a bench
scenario's ``rules =`` finds them (a seed casino's name or a path); ``--config`` with ``--simulate``
is refused in one line rather than silently ignored."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from cardd.bench.scenario import Scenario
from cardd.config import RULES_DIR, rules_file
from tests.daemon.daemon_rig import Daemon, run_cardd, shuffle_and_load, sim_deal, wait_devices, write_config


def _started_with(daemon: Daemon) -> dict[str, object]:
    """The daemon's "cardd started" log line."""
    for line in daemon.stderr().splitlines():
        if line.startswith("{") and json.loads(line).get("event") == "cardd started":
            found: dict[str, object] = json.loads(line)
            return found
    raise AssertionError(f"no 'cardd started' line: {daemon.stderr()[-2000:]}")


def test_simulate_plays_under_the_rules_named_by_rules(directory: Path) -> None:
    daemon = Daemon(["--simulate", "--state-dir", str(directory), "--rules", "casino-001"], directory / "cardd.sock")
    client = daemon.client()
    assert client.state()["rules"] == "casino-001"
    client.close()
    assert daemon.stdout().splitlines()[0].endswith(f"rules {RULES_DIR / 'casino-001.toml'}")
    code, err = daemon.stop()
    assert code == 0, err
    assert _started_with(daemon)["rules"] == "casino-001"


def test_simulate_takes_a_rules_file_by_path_relative_to_the_current_directory(directory: Path) -> None:
    shutil.copy(RULES_DIR / "casino-004.toml", directory / "house.toml")
    (directory / "state").mkdir()
    daemon = Daemon(["--simulate", "--state-dir", str(directory / "state"), "--rules", "house.toml"],
                    directory / "state" / "cardd.sock", cwd=directory)
    client = daemon.client()
    assert client.state()["rules"] == "casino-004"  # the file's own name
    client.close()
    assert daemon.stop()[0] == 0


def test_the_lookup_is_the_bench_scenarios_own(tmp_path: Path) -> None:
    scenario = Scenario(description="x", rules="casino-002", step=[])
    named = RULES_DIR / "casino-002.toml"
    assert scenario.rules_path(tmp_path / "s.toml") == rules_file("casino-002", Path.cwd()) == named
    beside = Scenario(description="x", rules="house.toml", step=[])
    assert beside.rules_path(tmp_path / "s.toml") == rules_file("house.toml", tmp_path) == tmp_path / "house.toml"


def test_config_with_simulate_is_refused_in_one_line(directory: Path) -> None:
    config = write_config(directory, "sim://shoe", "sim://shuffler")
    config.write_text(config.read_text().replace("casino-000", "casino-001"))
    done = run_cardd("--simulate", "--config", str(config), "--state-dir", str(directory / "sim"), timeout=30)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("cardd: --config and --simulate do not go together")
    assert "--rules" in done.stderr
    assert not (directory / "sim").exists()  # refused before anything started


def test_wrong_rules_are_refused_in_one_line_naming_what_rules_offers(directory: Path) -> None:
    done = run_cardd("--simulate", "--rules", "casino-009", "--state-dir", str(directory), timeout=30)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("cardd: --rules casino-009: no such rules file ")
    assert "casino-000, casino-001, casino-002, casino-003, casino-004" in done.stderr
    broken = directory / "broken.toml"
    broken.write_text('name = "broken"\n[shoe]\ndecks = "six"\n')
    done = run_cardd("--simulate", "--rules", str(broken), "--state-dir", str(directory), timeout=30)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"cardd: --rules {broken}: ") and "decks" in done.stderr


def test_rules_or_state_dir_without_simulate_and_check_config_with_simulate_are_refused() -> None:
    done = run_cardd("--rules", "casino-001", timeout=30)
    assert done.returncode == 2 and done.stderr == (
        "cardd: --rules goes with --simulate only: a table's house rules are its configuration's [table] rules "
        "(--config, default /etc/cardd/cardd.toml)\n")
    done = run_cardd("--state-dir", "/tmp", timeout=30)
    assert done.returncode == 2 and done.stderr.startswith("cardd: --state-dir goes with --simulate only: ")
    done = run_cardd("--simulate", "--check-config", timeout=30)
    assert done.returncode == 2 and done.stderr.startswith("cardd: --check-config checks a configuration file")


def test_help_names_rules() -> None:
    done = run_cardd("--help", timeout=30)
    assert "--rules NAME|PATH" in done.stdout and "casino-004" in done.stdout


def test_a_hand_shuffle_table_refuses_a_machine_shuffle_naming_the_rule_and_hand_shuffled(directory: Path) -> None:
    """Casino 003 shuffles by hand ("Chemmy Shuffled" then "Riffled Shuffled", per CCL procedures; its
    sheet names no machine): start_shuffle is refused before the shuffler hears of it, and the way it
    names (hand_shuffled, then the dealer's cards into the shoe) starts the shoe."""
    daemon = Daemon(["--simulate", "--state-dir", str(directory), "--rules", "casino-003"], directory / "cardd.sock")
    client = daemon.client()
    wait_devices(client)
    refused = client.command("start_shuffle")
    assert refused["class"] == "ERROR", refused
    assert refused["message"] == (
        "start_shuffle refused: this table's rules (casino-003) say [shoe] shuffle = \"hand\": the dealer shuffles "
        "the cards by hand, not a machine: shuffle them by hand and declare the shoe with hand_shuffled")
    refused = client.command("shuffle_started")  # the dealer's own declaration of a machine shuffle: the same
    assert refused["class"] == "ERROR" and refused["message"].startswith("shuffle_started refused: this table's rules")
    assert client.state()["shoe"]["state"] == "idle"
    client.ok("hand_shuffled")
    assert client.ok("sim_load_shoe")  # the dealer's hand-shuffled cards into the shoe
    state = client.wait_state(lambda s: s["shoe"]["state"] == "burning")
    assert state["shoe"]["burn_remaining"] == 3  # "the dealer will burn three cards"
    client.ok("sim_deal", cards=3)
    client.wait_state(lambda s: s["shoe"]["state"] == "in_play")
    client.close()
    assert daemon.stop()[0] == 0


def test_other_rules_on_a_state_dir_mid_shoe_are_refused_before_the_devices_start(directory: Path) -> None:
    daemon = Daemon(["--simulate", "--state-dir", str(directory)], directory / "cardd.sock")
    client = daemon.client()
    shuffle_and_load(client, lambda: client.ok("sim_load_shoe"), sim_deal(client))  # casino-000's shoe in play
    client.close()
    assert daemon.stop()[0] == 0
    done = run_cardd("--simulate", "--state-dir", str(directory), "--rules", "casino-001", timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("cardd: --rules casino-001: the table ran under other house rules ('casino-000'")
    assert done.stderr.endswith(f": pass those with --rules (journal {directory / 'journal.sqlite3'})\n")
    daemon = Daemon(["--simulate", "--state-dir", str(directory), "--rules", "casino-000"], directory / "cardd.sock")
    assert daemon.stop()[0] == 0  # the rules it ran under: it goes on


def test_a_socket_path_too_long_for_unix_is_said_in_one_line(tmp_path: Path) -> None:
    """A --state-dir deep enough that its socket's path passes AF_UNIX's 107 bytes: the line said
    '...cardd.sock: None' (the OSError has no errno)."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    done = run_cardd("--simulate", "--state-dir", str(deep))
    sock = deep / "cardd.sock"
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == (
        f"cardd: cannot listen on the API socket {sock}: the path is {len(str(sock))} bytes, more than a Unix "
        f"socket's 107 (choose a shorter directory)"), done.stderr
