"""Simulators reached the ways a technician, the demo and cardd reach them: sim:// URLs, the
shuffler-to-shoe rig, the standalone CLI, and unplug/replug; plus the timing-shaped faults."""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

import pytest

from core.cards import Card, Orientation, shoe_composition
from firmware_bridge.messages import (CardRead, CutCardSeen, DeckCheckResult, Heartbeat, ShoeLoaded,
                                      ShuffleComplete, StartShuffle, Status, StatusRequest)
from firmware_bridge.session import SessionEventKind
from simulators import sim_url
from simulators.faults import Faults
from simulators.rig import SimulatedTable
from simulators.shoe import SimulatedShoe
from simulators.stack import full_shoe

from tests.e2e.e2e_rig import PATHS, make_endpoint, open_host


def test_sim_url_opens_an_in_process_simulator_through_the_serial_driver():
    async def main():
        host = await open_host("sim://shoe?serial=SIMSHOE9&faults=face_up_at=2")
        try:
            assert host.ident.serial == "SIMSHOE9"
            [endpoint] = sim_url.running().values()
            endpoint.call(endpoint.device.load, full_shoe(1))
            endpoint.call(endpoint.device.deal, 3)
            await host.until(lambda: len(host.of(CardRead)) == 3)
            assert [r.orientation for r in host.of(CardRead)] == [Orientation.FACE_DOWN, Orientation.FACE_UP,
                                                                  Orientation.FACE_DOWN]
        finally:
            await host.conn.close()
    try:
        asyncio.run(main())
    finally:
        sim_url.stop_all()


@pytest.mark.timeout(60)
def test_rig_shuffles_verifies_hands_off_and_deals_a_six_deck_shoe():
    async def main(table):
        shuffler = await open_host(table.shuffler.url)
        shoe = await open_host(table.shoe.url)
        try:
            await shuffler.conn.send(StartShuffle(6))
            await shuffler.until(lambda: shuffler.of(DeckCheckResult))
            assert shuffler.of(DeckCheckResult)[0].ok
            assert table.hand_off() == 312
            await shoe.until(lambda: shoe.of(ShoeLoaded))
            table.shoe.call(table.shoe.device.deal, 400)
            await shoe.until(lambda: len(shoe.of(CardRead)) == 312)
            seen: dict = {}
            for read in shoe.of(CardRead):
                seen[read.card] = seen.get(read.card, 0) + 1
            assert seen == shoe_composition(6)
            assert shoe.of(CutCardSeen)[0].index == 208  # a third from the back
        finally:
            await shuffler.conn.close()
            await shoe.conn.close()

    with SimulatedTable.over_ptys(heartbeat_s=0) as table:
        asyncio.run(main(table))


@pytest.mark.timeout(30)
def test_standalone_cli_prints_the_path_serves_and_stops_cleanly(tmp_path):
    link = tmp_path / "shoe-SIM1"
    proc = subprocess.Popen([sys.executable, "-m", "simulators", "shoe", "--pty", "--decks", "1",
                             "--link", str(link), "--serial", "SIM1"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None  # piped
    try:
        assert proc.stdout.readline().strip() == str(link)

        async def main():
            host = await open_host(f"serial://{link}")
            try:
                assert host.ident.serial == "SIM1"
                status = await host.conn.request(StatusRequest(), expect=Status)
                assert status.cards_held == 52
                proc.send_signal(signal.SIGUSR1)  # the dealer draws everything (benchmarks/link.py)
                await host.until(lambda: len(host.of(CardRead)) == 52)
                assert sorted(r.card for r in host.of(CardRead)) == sorted(full_shoe(1))
            finally:
                await host.conn.close()
        asyncio.run(main())
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        assert not os.path.lexists(link)
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


def test_cli_refuses_a_bad_fault_switch_naming_the_known_ones():
    result = subprocess.run([sys.executable, "-m", "simulators", "shoe", "--pty", "--faults", "jamm"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and "no fault switch 'jamm'" in result.stderr and "byte_at_a_time" in result.stderr


@pytest.mark.timeout(60)
@pytest.mark.parametrize("path", PATHS)
def test_disconnect_for_t_then_the_device_is_back_at_the_same_address(path):
    device = SimulatedShoe(faults=Faults(disconnect_for=0.3, disconnect_at=2), heartbeat_s=0)
    endpoint, target = make_endpoint(path, device)

    async def main():
        host = await open_host(**target())
        endpoint.call(device.load, full_shoe(1))
        endpoint.call(device.deal, 5)
        await host.until(lambda: SessionEventKind.DISCONNECTED in host.kinds())
        await host.conn.close()
        for _ in range(100):  # a reconnecting host retries the open; the device is back after T
            try:
                again = await open_host(**target())
                break
            except Exception:
                await asyncio.sleep(0.05)
        else:
            raise AssertionError("device did not come back")
        try:
            assert again.ident.boot_id == host.ident.boot_id  # not a reboot
            endpoint.call(device.deal, 2)
            await again.until(lambda: len(again.of(CardRead)) == 7)
            # the shoe kept its place, and every card: no host that kept no journal confirmed one
            assert [r.index for r in again.of(CardRead)] == [1, 2, 3, 4, 5, 6, 7]
        finally:
            await again.conn.close()

    with endpoint:
        asyncio.run(main())


@pytest.mark.timeout(60)
@pytest.mark.parametrize("path", PATHS)
def test_ftdi_batching_and_slow_acks_still_deliver_everything(path):
    device = SimulatedShoe(faults=Faults(ftdi_batching_ms=16, slow_ack_ms=25), heartbeat_s=0)
    endpoint, target = make_endpoint(path, device)

    async def main():
        host = await open_host(**target())
        try:
            endpoint.call(device.load, full_shoe(2))
            endpoint.call(device.deal, 104)
            await host.until(lambda: len(host.of(CardRead)) == 104, timeout=30)
            assert [r.card for r in host.of(CardRead)] == full_shoe(2)
            wire = endpoint.state()["wire"]
            assert wire.writes < 104 / 2  # frames arrive in 16 ms batches, not one write each
            assert host.conn.session is not None
            rtt_min = host.conn.session.link.stats.rtt_min
            assert rtt_min is not None and rtt_min >= 0.025  # every answer came at least 25 ms late
        finally:
            await host.conn.close()

    with endpoint:
        asyncio.run(main())


@pytest.mark.timeout(30)
def test_state_and_reset_to_defaults_while_serving():
    device = SimulatedShoe(faults=Faults(face_up_at=1), heartbeat_s=0.02)
    endpoint, target = make_endpoint("pty", device)

    async def main():
        host = await open_host(**target())
        try:
            endpoint.call(device.load, full_shoe(1))
            endpoint.call(device.deal, 1)
            await host.until(lambda: host.of(CardRead))
            state = endpoint.state()
            assert state["cards_out"] == 1 and state["fault_switches"] == {"face_up_at": 1}
            assert state["link_state"] == "up" and state["wire"].bytes_to_host > 0
            assert str(full_shoe(1)[1]) not in str(state) and "Card(" not in str(state)  # never an undealt card
            endpoint.set_faults(unreadable_at=2)
            endpoint.reset()
            state = endpoint.state()
            assert state["fault_switches"] == {"face_up_at": 1}  # back to the switches it was built with
            assert state["cards_held"] == 0 and state["cards_out"] == 0 and state["counters"]["cards"] == 0
            beats = len(host.of(Heartbeat))
            await host.until(lambda: len(host.of(Heartbeat)) > beats + 1)  # still alive after the reset
        finally:
            await host.conn.close()

    with endpoint:
        asyncio.run(main())


@pytest.mark.timeout(30)
def test_cli_shuffler_in_stacked_mode_shuffles_exactly_the_given_cards(tmp_path):
    stack_file = tmp_path / "stack.txt"
    stack_file.write_text("AS KD\n7H, 7H\n")
    proc = subprocess.Popen([sys.executable, "-m", "simulators", "shuffler", "--pty", "--shuffle-time", "0",
                             "--stack", str(stack_file)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None  # piped
    try:
        path = proc.stdout.readline().strip()

        async def main():
            host = await open_host(f"serial://{path}")
            try:
                await host.conn.send(StartShuffle(1))
                await host.until(lambda: host.of(DeckCheckResult))
                [complete] = host.of(ShuffleComplete)
                assert complete.card_count == 4
                assert {str(c): n for c, n in complete.composition.items() if n} == {"AS": 1, "KD": 1, "7H": 2}
                [check] = host.of(DeckCheckResult)
                assert not check.ok and len(check.missing) == 49 and dict(check.extra) == {Card.parse("7H"): 1}
            finally:
                await host.conn.close()
        asyncio.run(main())
        proc.send_signal(signal.SIGINT)
        assert proc.wait(10) == 0
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
