"""``cardd``: the daemon's command line and start (cardd.daemon.main, the entry point, runs :func:`main`).

    cardd [--config PATH]            run the table configured in PATH (default /etc/cardd/cardd.toml)
    cardd --simulate [--state-dir D] [--rules NAME|PATH]
                                     run on built-in simulated devices behind real ptys, no config file,
                                     under the house rules NAME (a seed casino's) or PATH (default casino-000)
    cardd --check-config [--config PATH]   validate (rules file and firmware key included) and exit
    cardd ... --stop-with-parent PID       for a program that starts cardd as its child, with its own pid:
                                           cardd stops (as on SIGTERM) once that process has ended

Exit codes: 0 stopped cleanly (SIGTERM, SIGINT, the end of a ``--stop-with-parent`` parent) or
the configuration is valid; 130 a Ctrl-C before it serves (its imports, its checks, its simulated
devices' start: cardd.daemon.main), quietly; 1 the daemon could not start safely (corrupt journal, socket in use,
permission, unreadable rules); 2 the configuration or the command line is wrong (a
``--stop-with-parent`` pid that is not cardd's parent included: it ends at once, before opening
anything). Every failure is one line on stderr, never a traceback.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
import structlog

from cardd.config import (DEFAULT_PATH, SIMULATED_RULES, CarddConfig, ConfigError, load_config, load_export_section,
                          named_rules, rule_names, simulated)
from cardd.daemon.app import Daemon, StartupError, release
from cardd.daemon.parent import not_the_parent
from cardd.daemon.tracker_service import journaled_state, stored_table
from cardd.journal import Journal, JournalBusy, JournalError, journal_files
from cardd.logs import configure_logging
from core.errors import CarddError
from core.files import FileRefused, output_directory_problem, read_problem
from core.rundirs import adopt
from devices.game.rules import HouseRules, RulesError, load_rules
from devices.tracker.snapshot import rules_change_refused
from firmware_bridge.firmware import read_public_key_file

if TYPE_CHECKING:  # --simulate only: a table's daemon never loads the simulators
    from cardd.daemon.simulation import Simulation

EXIT_OK, EXIT_STARTUP, EXIT_CONFIG = 0, 1, 2
log = structlog.get_logger("cardd")


def check_config(path: str) -> tuple[CarddConfig, list[str]]:
    """The configuration, its rules file and its firmware key, all loaded, and the journal's directory
    there; ConfigError otherwise. Also what the daemon can run with but the table cannot do (one
    line each, naming the file and the keys): ``--check-config`` prints them, the daemon logs them."""
    config = load_config(path)
    try:
        rules = load_rules(config.table.rules)
    except RulesError as exc:
        raise ConfigError(path, str(exc), "table.rules") from None
    warnings = []
    if rules.shoe.shuffle == "automatic" and config.devices.shuffler is None:
        # the shoe and the API still work (a technician's bench), but no shoe can be verified
        warnings.append(f'{path}: devices.shuffler is not set, but {config.table.rules} says [shoe] shuffle = '
                        f'"automatic": the table cannot start a shoe (hand shuffles are refused); set '
                        f'devices.shuffler, or use rules that say shuffle = "hand"')
    unwritable = journal_not_writable(config.journal.path)
    if unwritable is not None:
        raise ConfigError(path, unwritable, "journal.path")
    refused = rules_change_refused_by(config.journal.path, rules)
    if refused is not None:  # the daemon would refuse to start on this journal
        raise ConfigError(path, f"{config.table.rules}: {refused} (journal {config.journal.path})", "table.rules")
    key = config.firmware.public_key
    if key is not None:
        try:
            read_public_key_file(key)
        except OSError as exc:
            raise ConfigError(path, read_problem(key, exc), "firmware.public_key") from None
        except FileRefused as exc:  # its text names the file
            raise ConfigError(path, str(exc), "firmware.public_key") from None
        except CarddError as exc:
            raise ConfigError(path, f"{key}: {exc}", "firmware.public_key") from None
    return config, warnings


def journal_not_writable(journal: Path) -> str | None:
    """What stops this user (the service's, under ``--check-config`` as docs/install.md runs it)
    from writing ``journal``: its directory, missing or not writable (core.files'
    output_directory_problem, as cardctl's and cardbench's output files; its -wal, -shm and -head
    files are made there too), or one of its files left owned by another user (say, a technician's tool
    run as root); None if nothing."""
    user = f"the user running cardd (uid {os.getuid()})"
    directory = journal.parent
    problem = output_directory_problem(journal, user)
    if problem is not None:
        if not directory.is_dir():  # the daemon creates the journal, never its directory (the unit's StateDirectory)
            return problem
        return (f"{problem} (the journal and its -wal, -shm and -head files are made there): make it the service "
                f"user's (chown cardd:cardd {directory})")
    for file in journal_files(journal):
        if file.exists() and not os.access(file, os.R_OK | os.W_OK):
            return f"{file}: {user} cannot write it: make it the service user's (chown cardd:cardd {file})"
    return None


def rules_change_refused_by(journal: Path, rules: HouseRules) -> str | None:
    """Why the table in ``journal`` may not go on under ``rules`` (other house rules, not between
    shoes after a clean stop: the start would refuse); None for no journal yet, the same rules, an
    allowed change, or a journal whose trouble the start will name."""
    if not journal.exists():
        return None
    try:  # no integrity check here: the start makes its own, and names what it finds
        with Journal.open(journal, readonly=True, quick_check_records=0) as opened:
            stored, inputs = journaled_state(opened)
    except JournalError:
        return None
    return None if stored is None else rules_change_refused(stored_table(stored), rules, clean_stop=not inputs)


def simulated_rules(name: str | None, state_dir: Path | None) -> tuple[Path, HouseRules]:
    """--simulate's --rules: a seed casino's (cardd/rules/NAME.toml), or a path (relative to the current
    directory), as a bench scenario's ``rules =`` names them (cardd.config.rules_file), loaded to be
    sure the table can use them, and allowed on the journal in ``state_dir`` (as --check-config checks a configuration's):
    the file and what it says; ConfigError (the command line) naming what is wrong and the seed
    casinos' names."""
    option = f"--rules {name}" if name is not None else f"--rules (default {SIMULATED_RULES.stem})"
    path = SIMULATED_RULES if name is None else named_rules(name)
    try:
        rules = load_rules(path)
    except RulesError as exc:
        raise ConfigError(option, str(exc)) from None
    journal = None if state_dir is None else simulated(state_dir, path).journal.path
    refused = None if journal is None else rules_change_refused_by(journal, rules)
    if refused is not None:  # the start would refuse it, after starting the devices
        raise ConfigError(option, f"{refused}: pass those with --rules (journal {journal})")
    return path, rules


def command_line_refused(args: argparse.Namespace) -> str | None:
    """Options that do not go together, in one line; None if they do."""
    if args.simulate and args.check_config:
        return ("--check-config checks a configuration file, and --simulate has none: run cardd --simulate (with "
                "--rules) on its own")
    if args.simulate and args.config is not None:
        # a configuration names real devices, a journal and a socket that --simulate replaces with its
        # own: taking only its rules would run a table the file does not describe, silently
        return ("--config and --simulate do not go together: --simulate runs on its own simulated devices, journal "
                "and socket, never a configuration's; to simulate a configuration's house rules, pass its rules "
                "file with --rules PATH (or a seed casino's name, e.g. --rules casino-001)")
    if args.state_dir is not None and not args.simulate:
        return ("--state-dir goes with --simulate only: a table's journal and socket are its configuration's "
                f"[journal] path and [api] socket (--config, default {DEFAULT_PATH})")
    if args.export is not None and not args.simulate:
        return ("--export goes with --simulate only: a table's export is its configuration's [export] section "
                f"(--config, default {DEFAULT_PATH})")
    if args.rules is not None and not args.simulate:
        return ("--rules goes with --simulate only: a table's house rules are its configuration's [table] rules "
                f"(--config, default {DEFAULT_PATH})")
    return None


def make_state_dir(path: Path) -> None:
    """--simulate's --state-dir, made if missing; ConfigError (the command line) naming it otherwise."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:  # mkdir's answer for a file there
        raise ConfigError(f"--state-dir {path}", "not a directory") from None
    except OSError as exc:
        raise ConfigError(f"--state-dir {path}", f"cannot be created: {exc.strerror}") from None


def positive_pid(text: str) -> int:
    """--stop-with-parent's value (0 would be getppid()'s answer for a parent outside cardd's pid namespace)."""
    try:
        pid = int(text)
    except ValueError:
        pid = 0
    if pid <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a process id (a positive number)")
    return pid


async def serve(config: CarddConfig, config_path: str, simulation: Simulation | None,
                stop_with_parent: int | None) -> None:
    daemon = Daemon(config, config_path, simulation=simulation, stop_with_parent=stop_with_parent)
    await daemon.start()
    if simulation is not None:  # the socket listens: the command a person tries first, apart from the log
        print(f"cardd --simulate: ready; try: {simulated_status_command(config.api.socket)}", flush=True)
    # What start-up made (modules, rules, the restored table, the connections) lives as long as
    # the process: frozen out of the collector, whose full passes then walk only what came since
    # (a full pass over the whole heap costs tens of milliseconds of the card path).
    gc.freeze()
    try:
        await daemon.run()
    finally:
        await daemon.stop()


def simulated_status_command(socket: Path) -> str:
    """The cardctl command that asks a simulated table for its state: its socket is not the default one."""
    return f"cardctl --socket {shlex.quote(str(socket))} status"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="cardd", description="The card-handling table daemon (docs/install.md).")
    ap.add_argument("--config", default=None,
                    help=f"configuration file (default {DEFAULT_PATH}); not with --simulate")
    ap.add_argument("--simulate", action="store_true",
                    help="built-in simulated shuffler and shoe behind real ptys; no configuration file (--config is "
                         "refused): the house rules come from --rules")
    ap.add_argument("--rules", default=None, metavar="NAME|PATH",
                    help=f"with --simulate: the house rules, a seed casino's name ({', '.join(rule_names())}) or the "
                         f"path of a rules file (default {SIMULATED_RULES.stem})")
    ap.add_argument("--export", default=None, metavar="FILE",
                    help="with --simulate: a TOML file with an [export] section; the simulated table publishes "
                         "its journal to those MQTT brokers (docs/floor.md)")
    ap.add_argument("--state-dir", type=Path, default=None,
                    help="with --simulate: where the journal, the socket, the devices' ptys and their memory go "
                         "(the cards they hold, kept across a restart there; default: a new temporary directory, "
                         "removed on exit)")
    ap.add_argument("--check-config", action="store_true", help="validate the configuration and exit (0 or 2)")
    ap.add_argument("--log-format", choices=("auto", "console", "json"), default=None,
                    help="auto: readable on a terminal, JSON lines otherwise (default: the configuration's)")
    ap.add_argument("--stop-with-parent", type=positive_pid, default=None, metavar="PID",
                    help="for a program that starts cardd as its child (cardbench, the demo), with its own pid: "
                         "cardd stops as on SIGTERM once that process has ended, however it ended (a SIGKILL "
                         "too); a PID that is not cardd's parent ends cardd at once (exit 2). Never under "
                         "systemd")
    ap.add_argument("--version", action="version", version=release())
    args = ap.parse_args(argv)
    refused = command_line_refused(args)
    if refused is not None:
        print(f"cardd: {refused}", file=sys.stderr)
        return EXIT_CONFIG
    config_file = args.config if args.config is not None else str(DEFAULT_PATH)
    configure_logging(args.log_format or "auto")
    if args.stop_with_parent is not None:
        wrong = not_the_parent(args.stop_with_parent)
        if wrong is not None:  # a wrong pid, or the parent ended already: nobody to serve
            print(f"cardd: {wrong}", file=sys.stderr)
            return EXIT_CONFIG

    if args.check_config:
        try:
            config, cannot = check_config(config_file)
        except ConfigError as exc:
            print(f"cardd: {exc}", file=sys.stderr)
            return EXIT_CONFIG
        print(f"{config_file}: ok (rules {config.table.rules}, journal {config.journal.path}, "
              f"socket {config.api.socket})")
        for warning in cannot:
            print(f"cardd: warning: {warning}", file=sys.stderr)
        return EXIT_OK

    simulation: Simulation | None = None
    warnings: list[str] = []
    try:
        if args.simulate:
            rules_path, rules = simulated_rules(args.rules, args.state_dir)
            if args.state_dir is not None:
                make_state_dir(args.state_dir)
                # a killed `cardd --simulate`'s own directory, given back to resume that table: the dead
                # owner's marker would let the next run (cardbench, the demo, another cardd) remove it
                # under this daemon (a live owner's, the demo's that started this cardd, stays)
                adopt(args.state_dir)
            from cardd.daemon.simulation import Simulation
            simulation = Simulation(args.state_dir, rules_path, rules)
            simulation.claim()  # a directory another cardd runs on is refused before anything is said of it
            config = simulation.config()
            # on stdout, before the first log line (stderr): where the table is, for a person at the terminal
            print(f"cardd --simulate: journal {config.journal.path}, socket {config.api.socket}, shoe "
                  f"{config.devices.shoe}, shuffler {config.devices.shuffler}, rules {config.table.rules}", flush=True)
            export = None if args.export is None else load_export_section(args.export)
            config = simulation.start()
            if export is not None:
                config = msgspec.structs.replace(config, export=export)
            config_path = "(--simulate)"
        else:
            config, warnings = check_config(config_file)
            config_path = config_file
    except ConfigError as exc:
        print(f"cardd: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except JournalBusy as exc:  # nothing started yet: the other daemon's devices are left alone
        print(f"cardd: {exc}: is another cardd --simulate running on --state-dir {args.state_dir}?", file=sys.stderr)
        return EXIT_STARTUP
    except (CarddError, OSError) as exc:
        if simulation is not None:
            simulation.stop()
        why = str(exc) if isinstance(exc, CarddError) else \
            f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else exc.strerror or type(exc).__name__
        print(f"cardd: cannot start the simulated devices: {why}", file=sys.stderr)
        return EXIT_STARTUP
    except KeyboardInterrupt:  # a Ctrl-C before it serves (cardd.daemon.main ends it quietly, 130): the
        if simulation is not None:  # devices it started stop, the directory made for them goes (Daemon.stop's job later)
            simulation.stop()
        raise
    configure_logging(args.log_format or config.log.format, config.log.level)
    logging.getLogger("transitions").setLevel(logging.WARNING)  # every state machine step at info: noise
    for warning in warnings:
        log.warning("config_warning", warning=warning)
    try:
        asyncio.run(serve(config, config_path, simulation, args.stop_with_parent))
    except StartupError as exc:
        print(f"cardd: {exc}", file=sys.stderr)
        return EXIT_STARTUP
    except KeyboardInterrupt:
        pass
    except Exception as exc:  # a fault in the daemon: one line here, the traceback at debug level
        log.debug("cardd failed", exc_info=True)
        print(f"cardd: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_STARTUP
    return EXIT_OK

