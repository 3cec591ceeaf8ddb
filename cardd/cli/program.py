"""``cardctl``'s command group (the entry point, cardd.cli.main, imports it); each group of
subcommands lives in its own module, imported only when one of its subcommands runs (or shows its
``--help``): ``cardctl --version`` and ``cardctl --help`` import none of them, ``cardctl status``
only cardd.cli.table (:mod:`cardd.cli.lazy_group`). :data:`SUBCOMMANDS` is where each
subcommand's one-line help is written.

Shell completion (click's): ``eval "$(_CARDCTL_COMPLETE=bash_source cardctl)"`` (zsh_source,
fish_source for the others); see docs/cardctl.md.
"""
from __future__ import annotations

from pathlib import Path

import click

from cardd.cli.common import Options, socket_option
from cardd.cli.lazy_group import Lazy, LazyProgram

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

_TABLE, _JOURNAL, _DEVICE = "cardd.cli.table", "cardd.cli.journal", "cardd.cli.device"
_FIRMWARE, _TRACE, _WATCH = "cardd.cli.firmware", "cardd.cli.trace", "cardd.cli.watch"
_WHOAMI = "cardd.cli.whoami"
_SIM = "cardd.cli.sim"
#: every subcommand: the module that defines it (in its COMMANDS) and its one-line help, the first
#: paragraph of its ``--help`` (the rest is its docstring)
SUBCOMMANDS = {
    "status": Lazy(_TABLE, "The daemon, its devices, the shoe, the round, the open alarms and the journal's "
                           "retention."),
    "round": Lazy(_TABLE, "The dealer's round (dealer role; continue, redeal, placement-error and "
                          "cards-to-box-without-wager: supervisor)."),
    "alarm": Lazy(_TABLE, "The open alarms, without a subcommand; clear one (clear: supervisor)."),
    "shoe": Lazy(_TABLE, "The shoe (dealer): its start (hand-shuffled, shuffle-started), a card it could not "
                         "read (enter-card), its end (remainder); void (supervisor)."),
    "seat": Lazy(_TABLE, "Who sits at the table, beyond who bets (dealer): kept across rounds. A seated player "
                         "without a box may ask for one; where the house rules give boxes up on request "
                         "(table.give_up_boxes), no more bets is then refused while he waits and no box is free, naming "
                         "the players on several boxes who must give all but one up."),
    "dealer-change": Lazy(_TABLE, "A new dealer takes the table (dealer: the new one sends it, and is named): the "
                                  "house rules' shoe.burn_on_dealer_change cards burn (none unless the rules say), "
                                  "after the live round if there is one."),
    "whoami": Lazy(_WHOAMI, "Who the daemon sees you as (uid, groups), the roles that gives and the commands each "
                            "role allows."),
    "log": Lazy(_JOURNAL, "The newest journal records by time, reason, round, who, --grep; --follow; --export FILE."),
    "verify-journal": Lazy(_JOURNAL, "Walk the journal's hash chain; exit 5 naming the first bad record."),
    "devices": Lazy(_DEVICE, "Serial ports and USB devices on this machine; cardd's shoes and shufflers "
                             "flagged."),
    "probe": Lazy(_DEVICE, "Open the device at URL directly: identity, firmware, protocol version, link "
                           "statistics."),
    "selftest": Lazy(_DEVICE, "Ask DEVICE to test itself (technician); exit 1 if it fails."),
    "counters": Lazy(_DEVICE, "DEVICE's lifetime counters: shuffles, cards, jams, faults (technician)."),
    "clear-fault": Lazy(_DEVICE, "Clear fault CODE (e.g. jam) on DEVICE once its cause is fixed (technician)."),
    "shuffle": Lazy(_DEVICE, "Start the shuffler on a new shoe (technician)."),
    "device": Lazy(_DEVICE, "A device's protocol 2.0 identity: enroll the key of a refused shoe or shuffler, "
                            "or retry one once mended (technician)."),
    "firmware": Lazy(_FIRMWARE, "Device firmware (signed images only)."),
    "capture": Lazy(_TRACE, "Record what the device at URL says into a new trace FILE, until Ctrl-C."),
    "replay": Lazy(_TRACE, "Serve trace FILE's devices on pseudo-terminals: the daemon (or any client) opens "
                           "them like the devices."),
    "monitor": Lazy(_TRACE, "Show the frames the device at URL sends, decoded, and link events, live."),
    "sim": Lazy(_SIM, "The simulated table's hands, for cardd --simulate only (dealer): load the shoe, deal "
                      "cards, raise faults and turn fault switches on and off."),
    "watch": Lazy(_WATCH, "A live full-screen view of the table: devices, shoe, round, holds, alarms, cards "
                          "exposed in error (the next cards, in order), cards drawn in error waiting for the "
                          "dealer, events."),
}


@click.group(cls=LazyProgram, lazy=SUBCOMMANDS, context_settings=CONTEXT)
@socket_option
@click.version_option(package_name="cardd", prog_name="cardctl")
@click.pass_context
def cli(ctx: click.Context, socket_path: Path) -> None:
    """The technician's and supervisor's tool for cardd: devices, the table, the journal.

    Exit codes: 0 ok, 1 failure, 2 usage, 3 device or daemon unreachable, 4 refused by
    role, 5 integrity failure, 130 interrupted (Ctrl-C), 141 stdout closed (| head) (docs/cardctl.md).

    \b
    Example:
      cardctl status
      cardctl --socket /tmp/cardd.sock watch
    """
    ctx.obj = Options(socket=socket_path)
