"""The times ``cardctl log --since/--until`` takes, as journalctl takes them: ``now``, ``today``,
``yesterday``, ``tomorrow`` (midnight, or at a time of day: ``yesterday 18:00``), a time of day
alone (today), ``N minutes ago`` (seconds, minutes, hours, days, weeks), an ISO 8601 time or Unix
seconds. The clock is passed in, so the answer for a given text and moment is exact."""
from __future__ import annotations

import re
from datetime import datetime, time, timedelta

from cardd.api.protocol import MAX_UNIX_TIME

ACCEPTED = ("'now', 'today', 'yesterday', 'yesterday 18:00', '18:00', '1 hour ago', '30 minutes ago', "
            "'2 days ago', an ISO 8601 time (2026-11-23T10:00:00) or Unix seconds")

#: a unit of "N units ago", by each spelling, in seconds
UNITS = {**dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1),
         **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60),
         **dict.fromkeys(("h", "hour", "hours"), 3600),
         **dict.fromkeys(("d", "day", "days"), 86400),
         **dict.fromkeys(("w", "week", "weeks"), 7 * 86400)}
AGO = re.compile(r"(\d{1,9})\s*([a-z]+)\s+ago")
OUT_OF_RANGE = "a time from 1970 to 2262 (what the journal's times can be)"
DAYS = {"today": 0, "yesterday": -1, "tomorrow": 1}
TIME_OF_DAY = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}))?")


class BadTime(ValueError):
    """A text that is none of the accepted forms, or a time the journal cannot hold: one line."""


def unix_seconds(text: str, now: datetime) -> float:
    """``text`` as Unix seconds, read against ``now``. Wall-clock forms (today, yesterday 18:00, an
    ISO time without an offset) are in ``now``'s zone: the system's local time if ``now`` is naive."""
    words = " ".join(text.strip().lower().split())
    try:
        seconds = _relative(words, now)
        if seconds is None:
            seconds = _absolute(text.strip(), now)
    except BadTime as exc:
        raise BadTime(f"{text!r}: {exc}") from None
    if not 0 <= seconds <= MAX_UNIX_TIME:  # nan and inf too: the API would refuse it in msgspec's words
        raise BadTime(f"{text!r}: {OUT_OF_RANGE}")
    return seconds


def _relative(words: str, now: datetime) -> float | None:
    if words == "now":
        return now.timestamp()
    ago = AGO.fullmatch(words)
    if ago is not None:
        unit = UNITS.get(ago.group(2))
        if unit is None:
            raise BadTime(f"{ago.group(2)!r} is not a unit (seconds, minutes, hours, days, weeks); give {ACCEPTED}")
        return now.timestamp() - int(ago.group(1)) * unit
    day, _, clock = words.partition(" ")
    if day in DAYS:
        return _wall(now, DAYS[day], clock)
    if TIME_OF_DAY.fullmatch(words):
        return _wall(now, 0, words)
    return None


def _wall(now: datetime, days: int, clock: str) -> float:
    """A wall-clock time ``days`` from ``now``'s date, at ``clock`` (midnight if empty)."""
    at = time()
    if clock:
        match = TIME_OF_DAY.fullmatch(clock)
        if match is None:
            raise BadTime(f"{clock!r} is not a time of day (18:00 or 18:00:30); give {ACCEPTED}")
        hour, minute, second = int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)
        if hour > 23 or minute > 59 or second > 59:
            raise BadTime(f"{clock!r} is not a time of day (00:00 to 23:59:59)")
        at = time(hour, minute, second)
    date = now.date() + timedelta(days=days)
    return datetime.combine(date, at, tzinfo=now.tzinfo).timestamp()


def _absolute(text: str, now: datetime) -> float:
    try:
        return float(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise BadTime(f"not a time; give {ACCEPTED}") from None
    try:
        return (when if when.tzinfo is not None else when.replace(tzinfo=now.tzinfo)).timestamp()
    except (OverflowError, OSError, ValueError):
        raise BadTime(OUT_OF_RANGE) from None
