"""Who may use the floor's HTTP API: bearer tokens from a file, each with a role and a name.

The tokens file (named by cardfloor's configuration) holds one token a line::

    # token                              role          name
    4f0c9d0e6b1a2c3d4e5f60718293a4b5     pit           pit-boss-1
    9e8d7c6b5a4938271605f4e3d2c1b0a9     surveillance  surveillance-desk

Blank lines and lines starting with ``#`` are skipped. Only cardfloor may read it (mode 0600):
a file others may read is refused, as is a line that is not ``token role name``, naming the
line. Roles: ``pit`` (reads, acknowledges alarms), ``surveillance`` (reads only), ``admin``.
A request's token is compared with each known token in constant time (their SHA-256, so the
lengths are equal too), so how long a refusal takes tells nothing of the tokens.

:class:`Principal` (a name and a role) is what the API knows of whoever asks; users, sessions
and a login page give the API the same Principal (cardd/floor/users.py, cardd/floor/web.py).
"""
from __future__ import annotations

import hashlib
import hmac
import re
import stat
from pathlib import Path
from typing import Literal, NamedTuple

from core.errors import CarddError
from core.files import FileRefused, read_problem, read_regular_file

Role = Literal["pit", "surveillance", "admin"]
ROLES: tuple[Role, ...] = ("pit", "surveillance", "admin")
#: the roles that may acknowledge a floor alarm
ACKNOWLEDGERS: frozenset[str] = frozenset({"pit", "admin"})
#: the roles that may read the audit (who logged in, from where, who acknowledged what)
AUDITORS: frozenset[str] = frozenset({"admin"})
#: the largest tokens file read (some thousands of lines)
MAX_FILE = 1 << 20
#: a token: at least 16 visible ASCII characters (a random 128 bits in hex is 32)
_TOKEN = re.compile(r"[\x21-\x7e]{16,256}")
NAME_PATTERN = re.compile(r"[A-Za-z0-9_.@-]{1,64}")
#: what a client is told when it has no token or a wrong one (RFC 6750)
CHALLENGE = 'Bearer realm="cardfloor"'


class AuthError(CarddError):
    """A tokens file that cannot be used: one sentence naming the file (and the line)."""


class Principal(NamedTuple):
    """Whoever a request comes from: the name journaled with what they do, their role, and the
    pits whose tables they see (None: every table; a token and the surveillance and admin users
    see every table, a pit user its pits' only)."""
    name: str
    role: str
    pits: tuple[str, ...] | None = None


class Auth:
    """The tokens and whose each is."""

    def __init__(self, tokens: dict[str, Principal]) -> None:
        self._digests = [(_digest(token), who) for token, who in tokens.items()]

    @classmethod
    def load(cls, path: Path) -> Auth:
        """The tokens of the file at ``path``, or AuthError."""
        try:
            mode = path.stat().st_mode
            if stat.S_ISREG(mode) and mode & 0o077:
                raise AuthError(f"{path}: others may read it (mode {mode & 0o777:04o}): only cardfloor may "
                                "(chown cardfloor, chmod 0600)")
            raw = read_regular_file(path, MAX_FILE)
        except FileRefused as exc:
            raise AuthError(str(exc)) from None
        except OSError as exc:
            raise AuthError(read_problem(path, exc)) from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthError(f"{path}: not UTF-8 text") from None
        return cls(parse_tokens(text, str(path)))

    def check(self, authorization: str | None) -> Principal | None:
        """Whose token an ``Authorization`` header carries (``Bearer <token>``); None when there
        is no header, it is not a bearer token or the token is not known."""
        if authorization is None:
            return None
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        digest = _digest(token.strip())
        found = None
        for known, who in self._digests:  # every token compared: no early return on a match
            if hmac.compare_digest(digest, known):
                found = who
        return found


def parse_tokens(text: str, where: str) -> dict[str, Principal]:
    """The tokens of a tokens file's ``text``; ``where`` names the file in errors."""
    tokens: dict[str, Principal] = {}
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        at = f"{where} line {number}"
        if len(fields) != 3:
            raise AuthError(f"{at}: expected `token role name`, got {len(fields)} field{'s' if len(fields) != 1 else ''}")
        token, role, name = fields
        if not _TOKEN.fullmatch(token):
            raise AuthError(f"{at}: a token is 16 to 256 visible ASCII characters")
        if role not in ROLES:
            raise AuthError(f"{at}: the role must be one of {', '.join(ROLES)}")
        if not NAME_PATTERN.fullmatch(name):
            raise AuthError(f"{at}: a name is 1 to 64 of A-Z a-z 0-9 _ . @ -")
        if token in tokens:
            raise AuthError(f"{at}: this token is on an earlier line too (for {tokens[token].name})")
        tokens[token] = Principal(name, role)
    return tokens


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
