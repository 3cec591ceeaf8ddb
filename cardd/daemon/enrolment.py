"""The devices enrolled at this table: the protocol 2.0 identity key each role's device proved.

The store is a file, ``enrolled_devices.json``, beside the journal and the host key (the
daemon's state directory), not a table in the journal's database: the journal is the record of
what happened, and its records are let go by retention and archived by export, while an
enrolment is the table's standing trust, to be kept, backed up and restored together with the
host key it pairs with (a restored host key with another table's enrolments, or none, is a
table whose devices are all refused). Who enrolled what is journaled all the same (the
``enroll`` command's record). The file is written whole, to a temporary file renamed over it
(fsynced), readable by the cardd user alone; a damaged one stops the start with one line naming
it, as a damaged host key does.

A key is enrolled for a role (``shoe``, ``shuffler``): the device on that port must prove that
key; any other unit is refused (``key does not match the enrolled one``) until a technician
enrols it, which replaces the role's key (a re-enrolment, journaled as such).
"""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from core.errors import CarddError

ENROLMENT_FILE = "enrolled_devices.json"
#: two roles' keys and units: anything far larger is not such a file
_MAX_BYTES = 64 * 1024


class EnrolmentError(CarddError):
    """The enrolment file cannot be read or written; one line naming it."""


@dataclass(frozen=True, slots=True)
class Enrolment:
    """A role's enrolled device: its raw Ed25519 key (hex), the unit it named, who enrolled it and when."""

    key: str
    model: str
    serial: str
    enrolled_by: str
    enrolled_at_ns: int


def enrolment_path(journal_path: Path) -> Path:
    return journal_path.parent / ENROLMENT_FILE


class EnrolmentStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._enrolled = self._load()

    def get(self, role: str) -> Enrolment | None:
        return self._enrolled.get(role)

    def key(self, role: str) -> bytes | None:
        """The raw public key enrolled for ``role``, or None."""
        enrolment = self._enrolled.get(role)
        return None if enrolment is None else bytes.fromhex(enrolment.key)

    def enrol(self, role: str, enrolment: Enrolment) -> Enrolment | None:
        """Store ``enrolment`` for ``role`` (on disk before it is returned); the one it replaced, or None."""
        previous = self._enrolled.get(role)
        enrolled = {**self._enrolled, role: enrolment}
        self._write(enrolled)
        self._enrolled = enrolled
        return previous

    def _load(self) -> dict[str, Enrolment]:
        try:
            with open(self.path, "rb") as source:
                data = source.read(_MAX_BYTES + 1)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise EnrolmentError(f"{self.path}: cannot read the enrolled devices: {exc.strerror}") from None
        try:
            if len(data) > _MAX_BYTES:
                raise ValueError("too large")
            parsed = json.loads(data)
            enrolled = {str(role): Enrolment(**fields) for role, fields in parsed.items()}
            for enrolment in enrolled.values():
                if len(bytes.fromhex(enrolment.key)) != 32:
                    raise ValueError("not a 32-byte key")
        except (ValueError, TypeError, AttributeError):
            raise EnrolmentError(f"{self.path}: damaged: not the enrolled devices this daemon writes (restore it "
                                 "from the backup with the host key, or remove it and enrol every device again: "
                                 "docs/install.md, \"Enrolling a device\")") from None
        return enrolled

    def _write(self, enrolled: dict[str, Enrolment]) -> None:
        text = json.dumps({role: asdict(e) for role, e in sorted(enrolled.items())}, indent=2) + "\n"
        try:
            fd, temporary = tempfile.mkstemp(prefix=".enrolled-", dir=self.path.parent)
        except OSError as exc:
            raise EnrolmentError(f"{self.path}: cannot write the enrolled devices: {exc.strerror}") from None
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:  # mkstemp's file is 0600 already
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, self.path)
        except OSError as exc:
            Path(temporary).unlink(missing_ok=True)
            raise EnrolmentError(f"{self.path}: cannot write the enrolled devices: {exc.strerror}") from None
