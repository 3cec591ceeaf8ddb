"""Fixtures shared by several test directories."""
from __future__ import annotations

import gc
import os
import signal
import threading

import pytest
import structlog
from hypothesis import settings

# make test (and CI) draws the same examples on every run, so a submission that passed here passes
# there: a property's new counterexample is found by exploring, not by a CI run that then fails to
# land. CARDD_FULL=1 explores: fresh random examples each run, at each property's full size, its
# failures kept in .hypothesis/ and replayed first next time.
settings.register_profile("make-test", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile("explore" if os.environ.get("CARDD_FULL") == "1" else "make-test")


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _fd_target(fd: str) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return f"fd {fd}"


@pytest.fixture
def no_leaks():
    """The test leaves no thread, fd or open port behind (driver threads, simulators, ptys).
    A directory turns it on for all its tests with an autouse fixture that requests it."""
    gc.collect()
    threads, fds = set(threading.enumerate()), _fds()
    yield
    gc.collect()
    leaked_threads = [t.name for t in set(threading.enumerate()) - threads]
    assert not leaked_threads, f"leaked threads: {leaked_threads}"
    leaked_fds = _fds() - fds
    assert not leaked_fds, f"leaked fds: {[_fd_target(fd) for fd in sorted(leaked_fds)]}"


@pytest.fixture(autouse=True)
def _structlog_config_restored():
    """A command run in-process (cardbench, cardctl through CliRunner) configures structlog for the
    whole process, e.g. a WARNING filter: put the configuration back so a later test that reads the
    log sees what the library writes, whatever ran before it."""
    saved = structlog.get_config()
    yield
    structlog.reset_defaults()
    structlog.configure(**saved)


@pytest.fixture(autouse=True)
def _daemons_stopped():
    """A test that fails before it stops its cardd (tests/daemon/daemon_rig.Daemon) must not leave
    it running: an orphaned daemon keeps reopening its ptys and sockets, whose numbers later tests
    reuse, and fails them. Daemons of wider-scoped fixtures, started before the test, are theirs."""
    from tests.daemon.daemon_rig import STARTED
    before = len(STARTED)
    yield
    for daemon in STARTED[before:]:
        if daemon.proc.poll() is None:
            daemon.proc.kill()
            daemon.proc.wait(timeout=30)
    del STARTED[before:]


@pytest.fixture(autouse=True)
def _signal_handlers_restored():
    """cardbench run in-process (CliRunner) makes SIGINT, SIGTERM and SIGHUP end it its own way, as its
    program does (core.ctrl_c.end_like_ctrl_c): put them back, so neither this process nor a
    child it forks later ends by an exception where it should end by the signal."""
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


@pytest.fixture(autouse=True, scope="session")
def _sigint_as_in_a_foreground_terminal():
    """A test run started as a background job (`make test &` in a script) has SIGINT ignored, and
    every child it starts inherits that (cardbench and the demo then rightly leave it ignored): the
    tests that press Ctrl-C would send one nobody takes. The tests run as if in the foreground."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield


# the real brokers' fixtures (tests/support/brokers.py), for any test directory
from tests.support.brokers import mosquitto, mosquitto_tls, nats_cluster  # noqa: E402,F401
# a private PostgreSQL per test process, a fresh database per test (tests/support/postgres.py)
from tests.support.postgres import floor_db, postgres  # noqa: E402,F401


@pytest.fixture(autouse=True)
def _brokers_stopped():
    """A broker a test started and left running (tests/support/brokers.py) is killed after it, as
    daemons are: its ports and folders are the test's alone."""
    from tests.support.brokers import STARTED
    before = len(STARTED)
    yield
    for broker in STARTED[before:]:
        broker.kill()
    del STARTED[before:]


#: The test files that take longest, longest first (CI's durations, 2-core machine, seconds of
#: wall each): make test gives each file whole to one worker (--dist loadfile) in collection
#: order (--no-loadscope-reorder), so these start first and the run does not end on one worker
#: still in a minute-long file while the others are idle. The rest keep pytest's own order.
SLOW_FILES_FIRST = (
    "tests/bench/test_scenarios.py",            # the scenario library: a daemon per scenario
    "tests/export/test_export_outages.py",      # brokers black-holed, killed, restarted
    "tests/bench/test_conformance_faults_2_0.py",  # the conformance suite once per 2.0 attack
    "tests/bench/test_conformance.py",          # the conformance suite against each simulator
    "tests/bench/test_conformance_faults_1_1.py",  # the conformance suite once per 1.1 fault
    "tests/cli/test_demo_and_completion.py",    # whole shoes through the demo
    "tests/cli/test_hostile_text.py",           # 600 view examples, then the real programs
    "tests/packaging/test_deb.py",              # the package built, installed in a Debian root
    "tests/packaging/test_wheel.py",            # the wheel built, installed in a fresh venv
    "tests/benchmarks/test_benchmarks_run.py",  # each benchmark run to its figures
    "tests/e2e/test_e2e_events.py",
    "tests/e2e/test_e2e_link.py",
    "tests/daemon/test_daemon_powercut.py",
    "tests/bench/test_soak.py",
    "tests/journal/test_journal_powercut.py",
    "tests/cli/test_cardctl_sim.py",
    "tests/table/test_table_hostile.py",
    "tests/daemon/test_daemon_crash.py",
    "tests/bench/test_replay.py",
    "tests/export/test_brokers.py",
    "tests/export/test_export_crash.py",
    "tests/floor/browser/test_pit_page.py",     # Chromium on a floor, cardfloor and broker restarted
    "tests/floor/browser/test_floor_demo.py",   # make floor-demo's floor, tables dealing
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files of SLOW_FILES_FIRST first, in its order; each file's tests in their own order."""
    rank = {name: n for n, name in enumerate(SLOW_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable
