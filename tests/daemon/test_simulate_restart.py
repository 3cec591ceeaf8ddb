"""``cardd --simulate`` restarted on its ``--state-dir`` mid-round (a SIGKILL, as a crash or a power
cut would): the simulated shoe and shuffler keep what they held, as real devices beside a restarted
table computer do, so the round a supervisor continues is dealt to its end; a ``sim_deal`` the
simulated shoe cannot do is refused rather than ACKed with cards that never come."""
from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

from tests.daemon.daemon_rig import (Client, Daemon, open_and_bet, play_out, run_cardd, shuffle_and_load, sim_deal,
                                     simulate, wait_devices)


def _start(directory: Path) -> Daemon:
    return Daemon(["--simulate", "--state-dir", str(directory)], directory / "cardd.sock")


#: a local user who is neither root nor the daemon's
OTHER_UID = 64399


def _cards_out(client: Client, count: int) -> dict[str, object]:
    return client.wait_state(lambda s: s["shoe"]["cards_out"] == count)


def test_a_round_continued_after_a_sigkill_restart_is_dealt_to_its_end(directory: Path) -> None:
    daemon = _start(directory)
    client = daemon.client()
    deal = sim_deal(client)
    shuffle_and_load(client, lambda: client.ok("sim_load_shoe"), deal)  # casino-000 burns one card
    open_and_bet(client)  # boxes 1 and 3, no more bets
    client.ok("sim_deal", cards=3)
    _cards_out(client, 4)
    client.close()
    daemon.kill()  # SIGKILL: nothing of the daemon's stop runs

    again = _start(directory)
    client = again.client()
    state = wait_devices(client)
    assert state["round"]["held"] is not None and state["shoe"]["state"] == "in_play"
    assert "reconnecting" not in json.dumps(state), state  # both devices are up: no stale claim about them
    client.ok("resume")
    client.ok("sim_deal", cards=1)
    _cards_out(client, 5)  # the card came: the simulated shoe kept its stack
    final = play_out(client, sim_deal(client), lambda s: None)
    assert final["round"]["state"] == "complete" and final["alarms"] == [], final
    client.close()
    code, err = again.stop()
    assert code == 0, err


def test_sim_deal_from_an_empty_simulated_shoe_is_refused_naming_the_way_forward(directory: Path) -> None:
    with simulate(directory) as daemon:
        client = daemon.client()
        wait_devices(client)
        refused = client.command("sim_deal", cards=1)
        assert refused["class"] == "ERROR", refused
        assert refused["message"] == ("sim_deal: the simulated shoe holds no cards to deal (the table's shoe is "
                                      "idle): load one with sim_load_shoe first")
        assert client.state()["shoe"]["cards_out"] == 0
        client.close()


def test_a_damaged_device_memory_stops_the_start_in_one_line_naming_the_file(directory: Path) -> None:
    code, err = _start(directory).stop()  # the table's journal, beside which the memory is its devices'
    assert code == 0, err
    (directory / "shoe.nvram.json").write_text("{half a fi")
    done = run_cardd("--simulate", "--state-dir", str(directory), timeout=60)
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1 and last.startswith(
        f"cardd: cannot start the simulated devices: {directory / 'shoe.nvram.json'}: cannot be read back: "), last
    assert last.endswith(": remove the file to start that device empty, as from the factory"), last


def test_the_devices_memory_without_its_journal_is_dropped_and_the_new_table_starts_empty(directory: Path) -> None:
    """A shoe played on a --state-dir, the journal removed to start over, the devices' memory files
    left: kept, the shoe would come back with 306 cards the new table never saw and its first card
    raise MISSING_READ. Memory beside no journal belongs to no table: it is dropped, said in the log."""
    daemon = _start(directory)
    client = daemon.client()
    shuffle_and_load(client, lambda: client.ok("sim_load_shoe"), sim_deal(client))
    client.close()
    code, err = daemon.stop()
    assert code == 0, err
    assert (directory / "shoe.nvram.json").exists()
    for journal_file in directory.glob("journal.sqlite3*"):
        journal_file.unlink()

    again = _start(directory)
    client = again.client()
    state = wait_devices(client)
    assert state["shoe"]["state"] == "idle" and state["alarms"] == [], state
    refused = client.command("sim_deal", cards=1)  # the simulated shoe is empty, as the new table's is
    assert refused["class"] == "ERROR" and "holds no cards" in refused["message"], refused
    assert client.state()["alarms"] == []
    client.close()
    code, err = again.stop()
    assert code == 0, err
    dropped = [json.loads(line) for line in again.stderr().splitlines() if '"sim_memory_dropped"' in line]
    assert sorted(Path(line["path"]).name for line in dropped) == ["shoe.nvram.json", "shuffler.nvram.json"]


def test_a_shoe_that_lost_cards_while_the_daemon_was_stopped_raises_the_count_alarm_at_the_restart(
        directory: Path) -> None:
    """Three cards taken out of the loaded shoe while cardd was stopped (its memory on the --state-dir
    says what it holds): the restarted daemon asks the shoe for its Status after the handshake, and
    its count against the table's is a SHOE_COUNT_MISMATCH alarm that stops play until a supervisor
    clears it."""
    daemon = _start(directory)
    client = daemon.client()
    state = shuffle_and_load(client, lambda: client.ok("sim_load_shoe"), sim_deal(client))  # one burn card out
    verified, out = state["shoe"]["cards_in_shoe"], state["shoe"]["cards_out"]
    client.close()
    code, err = daemon.stop()
    assert code == 0, err
    memory = directory / "shoe.nvram.json"
    held = json.loads(memory.read_text())
    assert len(held["stack"]) == verified - out
    held["stack"] = held["stack"][3:]  # the next three cards leave the shoe unseen
    memory.write_text(json.dumps(held))

    again = _start(directory)
    client = again.client()
    state = client.wait_state(lambda s: any(a["reason"] == "SHOE_COUNT_MISMATCH" for a in s["alarms"]))
    [alarm] = [a for a in state["alarms"] if a["reason"] == "SHOE_COUNT_MISMATCH"]
    expected = verified - out
    assert (f"the shoe reader holds {expected - 3} card(s), the table expects {expected}" in alarm["message"]
            and "3 fewer: cards left the shoe unseen" in alarm["message"]), alarm
    refused = client.command("open_round")
    assert refused["class"] == "ERROR" and f"shoe count mismatch alarm {alarm['id']} is open" in refused["message"]
    client.ok("clear_alarm", alarm_id=alarm["id"])
    client.ok("open_round")  # the supervisor looked: the shoe deals on as it is
    client.close()
    code, err = again.stop()
    assert code == 0, err


def _readable_by_another_user(path: Path) -> bool:
    return subprocess.run(["cat", str(path)], user=OTHER_UID, group=OTHER_UID, cwd="/", capture_output=True,
                          timeout=30).returncode == 0


def test_the_devices_memory_is_readable_by_the_daemons_user_alone(directory: Path) -> None:
    """The shoe's memory is its undealt cards in order (the shuffler's, its shuffled stack): a local
    user who could read it would know the next cards of the table. Each file is 0600 from its first
    write, and one an older version left 0644 is made 0600 when the device starts keeping it."""
    assert stat.S_IMODE(directory.stat().st_mode) & 0o005  # others may enter the directory (the socket's)
    daemon = _start(directory)
    client = daemon.client()
    shuffle_and_load(client, lambda: client.ok("sim_load_shoe"), sim_deal(client))
    client.close()
    memories = [directory / "shoe.nvram.json", directory / "shuffler.nvram.json"]
    assert len(json.loads(memories[0].read_text())["stack"]) > 300  # what must not be read: the order
    for memory in memories:
        assert stat.S_IMODE(memory.stat().st_mode) == 0o600, memory
        assert not _readable_by_another_user(memory), memory
    code, err = daemon.stop()
    assert code == 0, err

    os.chmod(memories[0], 0o644)  # as an older cardd wrote it
    assert _readable_by_another_user(memories[0])
    again = _start(directory)
    client = again.client()
    wait_devices(client)
    assert stat.S_IMODE(memories[0].stat().st_mode) == 0o600
    assert not _readable_by_another_user(memories[0])
    client.close()
    code, err = again.stop()
    assert code == 0, err
