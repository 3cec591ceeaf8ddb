"""cardd/logs.py: console on a real terminal, JSON lines elsewhere, stdlib logging routed, no forged lines."""
from __future__ import annotations

import io
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import pytest
import structlog

from cardd.logs import configure_logging, escape_control_characters, resolve_format

FORGERY = "SHOE0001\n2026-11-23T10:00:00Z [error    ] shoe_voided\x1b[2J"


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """configure_logging is process-wide: put structlog and the root logger back afterwards."""
    saved = structlog.get_config()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.reset_defaults()
    structlog.configure(**saved)
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def terminal() -> Iterator[tuple[TextIO, int]]:
    """(a stream on a real pty's terminal side, the pty's master fd to read it from)."""
    master, slave = os.openpty()
    stream = open(slave, "w", encoding="utf-8")
    yield stream, master
    stream.close()
    os.close(master)


def lines(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


def test_auto_is_console_on_a_terminal(terminal):
    stream, master = terminal
    assert configure_logging("auto", stream=stream, environ={}) == "console"
    structlog.get_logger().info("shoe_verified", cards=312)
    output = os.read(master, 4096).decode()
    assert "shoe_verified" in output and "cards" in output and "312" in output
    assert "\x1b[" in output  # colours on a terminal
    assert not output.lstrip().startswith("{")


def test_auto_is_json_when_stderr_is_not_a_terminal(tmp_path):
    with open(tmp_path / "log", "w") as stream:
        assert configure_logging("auto", stream=stream, environ={}) == "json"
        structlog.get_logger().warning("link_retrying", device="usb://1209:c4d0", attempt=3)
    [line] = (tmp_path / "log").read_text().splitlines()
    record = json.loads(line)
    assert record["event"] == "link_retrying" and record["level"] == "warning"
    assert record["device"] == "usb://1209:c4d0" and record["attempt"] == 3
    assert record["timestamp"].endswith("Z")


def test_under_the_journal_each_line_carries_its_syslog_priority(tmp_path):
    with open(tmp_path / "log", "w") as stream:
        found = os.fstat(stream.fileno())
        environ = {"JOURNAL_STREAM": f"{found.st_dev}:{found.st_ino}"}
        assert configure_logging("auto", "debug", stream=stream, environ=environ) == "json"
        log = structlog.get_logger()
        log.debug("tick")
        log.info("ready")
        log.warning("link_down")
        log.error("journal_corrupt")
    priorities = [line[:3] for line in (tmp_path / "log").read_text().splitlines()]
    assert priorities == ["<7>", "<6>", "<4>", "<3>"]
    assert json.loads((tmp_path / "log").read_text().splitlines()[0][3:])["event"] == "tick"


def test_another_processs_journal_stream_is_not_ours(terminal):
    stream, _ = terminal  # JOURNAL_STREAM inherited from a service, but stderr is a terminal
    assert resolve_format("auto", stream, {"JOURNAL_STREAM": "8:12345"}) == "console"


def test_a_forced_format_wins(terminal):
    stream, _ = terminal
    assert configure_logging("json", stream=stream, environ={}) == "json"
    assert configure_logging("console", stream=io.StringIO(), environ={}) == "console"


def test_json_escapes_device_text():
    stream = io.StringIO()
    configure_logging("json", stream=stream, environ={})
    structlog.get_logger().info("device_identified", serial=FORGERY)
    [line] = lines(stream)
    assert json.loads(line)["serial"] == FORGERY
    assert "\x1b" not in line


def test_console_writes_device_text_with_control_characters_as_its_repr():
    stream = io.StringIO()
    configure_logging("console", stream=stream, environ={})
    structlog.get_logger().info("device_identified", serial=FORGERY, model="Shoe\u2028Mk2", firmware="1.4")
    [line] = lines(stream)
    assert repr(FORGERY) in line and repr("Shoe\u2028Mk2") in line
    assert "firmware=1.4" in line  # clean text is left as it is
    assert "\x1b" not in line  # no colours off a terminal, and none smuggled in


def test_the_event_text_itself_is_escaped_too():
    event = escape_control_characters(None, "info", {"event": "read\r\nfake", "count": 3, "ok": "plain"})
    assert {key: str(value) for key, value in event.items()} == {"event": repr("read\r\nfake"), "count": "3", "ok": "plain"}
    stream = io.StringIO()
    configure_logging("console", stream=stream, environ={})
    structlog.get_logger().info("dealt\x1b[2J")
    [line] = lines(stream)
    assert repr("dealt\x1b[2J") in line


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_standard_logging_goes_through_the_same_renderer(fmt):
    stream = io.StringIO()
    configure_logging(fmt, stream=stream, environ={})
    logging.getLogger("asyncio").warning("slow callback %s", "took\n5 s")
    [line] = lines(stream)
    if fmt == "json":
        record = json.loads(line)
        assert (record["event"], record["level"], record["logger"]) == ("slow callback took\n5 s", "warning", "asyncio")
    else:
        assert repr("slow callback took\n5 s") in line and "asyncio" in line and "warning" in line


def test_the_level_filters_both_paths():
    stream = io.StringIO()
    configure_logging("json", "warning", stream=stream, environ={})
    structlog.get_logger().info("quiet")
    logging.getLogger("cardd.test").info("quiet too")
    structlog.get_logger().warning("loud")
    logging.getLogger("cardd.test").error("loud too")
    assert [json.loads(line)["event"] for line in lines(stream)] == ["loud", "loud too"]


def test_configuring_again_replaces_the_handler():
    first, second = io.StringIO(), io.StringIO()
    configure_logging("json", stream=first, environ={})
    configure_logging("json", stream=second, environ={})
    logging.getLogger("cardd.test").warning("once")
    assert first.getvalue() == "" and len(lines(second)) == 1


def test_exceptions_are_one_json_line(tmp_path: Path):
    stream = io.StringIO()
    configure_logging("json", stream=stream, environ={})
    try:
        raise ValueError("bad frame\nfrom device")
    except ValueError:
        structlog.get_logger().exception("frame_refused")
    [line] = lines(stream)
    assert "ValueError: bad frame\nfrom device" in json.loads(line)["exception"]
