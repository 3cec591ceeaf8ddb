"""The pit page's users: a file cardfloor manages (``cardfloor user``), one JSON object a line::

    {"user": "anna", "role": "pit", "pits": ["Pit 1"], "password": "scrypt$32768$8$1$<salt>$<hash>"}

Passwords are hashed with scrypt (hashlib, memory-hard: 32 MiB a try), a random 16-byte salt
each, the parameters kept in the line so they can be raised later without breaking the old
ones. Only cardfloor may read the file (mode 0600): one others may read is refused, as the
tokens file is (cardd/floor/auth.py). It is written whole to a new file and renamed over the
old one, so a reader never sees half of it; the service reads it again when it changed, so a
user added or removed counts from the next log-in.

:func:`main` is ``cardfloor user add|passwd|remove|list``.
"""
from __future__ import annotations

import argparse
import base64
import getpass
import hashlib
import hmac
import os
import pwd
import secrets
import stat
import sys
from pathlib import Path
from typing import NamedTuple

import msgspec

from cardd.floor.auth import NAME_PATTERN, ROLES, Principal
from core.errors import CarddError
from core.files import FileRefused, read_problem, read_regular_file

#: scrypt's cost: N (CPU and memory), r (block size), p (parallelism); 128 * N * r bytes = 32 MiB
SCRYPT_N, SCRYPT_R, SCRYPT_P = 1 << 15, 8, 1
SALT_BYTES, HASH_BYTES = 16, 32
MIN_PASSWORD, MAX_PASSWORD = 8, 1024
MAX_FILE = 4 << 20
EXIT_OK, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2


class UsersError(CarddError):
    """A users file or a user that cannot be used: one sentence naming the file (and the line)."""


class _Line(msgspec.Struct, forbid_unknown_fields=True):
    user: str
    role: str
    pits: list[str]
    password: str


class User(NamedTuple):
    name: str
    role: str
    pits: tuple[str, ...]
    password: str  # scrypt$N$r$p$salt$hash

    def principal(self) -> Principal:
        """Who the API knows: a pit user sees its pits, the other roles every table."""
        return Principal(self.name, self.role, self.pits if self.role == "pit" else None)

    @property
    def generation(self) -> str:
        """Changes with the password: a session made before a new password is not taken."""
        return hashlib.sha256(self.password.encode()).hexdigest()[:16]


def hash_password(password: str, *, n: int = SCRYPT_N, r: int = SCRYPT_R, p: int = SCRYPT_P) -> str:
    salt = secrets.token_bytes(SALT_BYTES)
    digest = _scrypt(password, salt, n, r, p)
    return f"scrypt${n}${r}${p}${_b64(salt)}${_b64(digest)}"


def check_password(password: str, stored: str) -> bool:
    """Whether ``password`` is the one ``stored`` was hashed from (in constant time)."""
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return False
        expected = base64.b64decode(digest, validate=True)
        found = _scrypt(password, base64.b64decode(salt, validate=True), int(n), int(r), int(p))
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(found, expected)


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(password.encode("utf-8", "surrogateescape"), salt=salt, n=n, r=r, p=p,
                          maxmem=256 * n * r + (1 << 20), dklen=HASH_BYTES)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


#: checked against when the user is not known, so an unknown user takes as long as a wrong password
_NOBODY = hash_password(secrets.token_hex(16))


def load_users(path: Path) -> dict[str, User]:
    """The users of the file at ``path`` (none when it is missing), or UsersError."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise UsersError(read_problem(path, exc)) from None
    if stat.S_ISREG(mode) and mode & 0o077:
        raise UsersError(f"{path}: others may read it (mode {mode & 0o777:04o}): only cardfloor may "
                         "(chown cardfloor, chmod 0600)")
    try:
        raw = read_regular_file(path, MAX_FILE)
    except FileRefused as exc:
        raise UsersError(str(exc)) from None
    except OSError as exc:
        raise UsersError(read_problem(path, exc)) from None
    users: dict[str, User] = {}
    for number, line in enumerate(raw.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith(b"#"):
            continue
        try:
            found = msgspec.json.decode(line, type=_Line)
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise UsersError(f"{path} line {number}: not a user's line (edit the file with `cardfloor user` only)") \
                from None
        if not NAME_PATTERN.fullmatch(found.user) or found.role not in ROLES or found.user in users:
            raise UsersError(f"{path} line {number}: a user's name, role or uniqueness is wrong")
        users[found.user] = User(found.user, found.role, tuple(found.pits), found.password)
    return users


def save_users(path: Path, users: dict[str, User]) -> None:
    """Write the users to ``path`` (mode 0600): a new file renamed over the old one."""
    text = "# cardfloor's users: change it with `cardfloor user` (docs/floor-service.md)\n" + "".join(
        msgspec.json.encode(_Line(u.name, u.role, list(u.pits), u.password)).decode() + "\n"
        for u in sorted(users.values()))
    new = path.with_name(f".{path.name}.{os.getpid()}.new")
    fd = os.open(new, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        owner = service_owner(path)
        if owner is not None:
            os.fchown(fd, *owner)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(new, path)
    except BaseException:
        new.unlink(missing_ok=True)
        raise


def service_owner(path: Path) -> tuple[int, int] | None:
    """Whose a file written by root for the service is to be: the owner of the file it replaces,
    else the ``cardfloor`` user's (packaging/cardfloor.service runs as it); None when not root."""
    if os.geteuid() != 0:
        return None
    try:
        info = path.stat()
        return info.st_uid, info.st_gid
    except FileNotFoundError:
        pass
    try:
        found = pwd.getpwnam("cardfloor")
    except KeyError:
        return None
    return found.pw_uid, found.pw_gid


class Users:
    """The users file as the service reads it: read again whenever it changed on disk."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: tuple[int, int, int] | None = None
        self._users: dict[str, User] = {}

    def current(self) -> dict[str, User]:
        try:
            info = self.path.stat()
            seen = (info.st_ino, info.st_mtime_ns, info.st_size)
        except FileNotFoundError:
            seen = (0, 0, 0)
        if seen != self._seen:
            self._users = load_users(self.path)
            self._seen = seen
        return self._users

    def get(self, name: str) -> User | None:
        return self.current().get(name)

    def check(self, name: str, password: str) -> User | None:
        """The user when ``password`` is theirs; None otherwise, after as long either way."""
        user = self.current().get(name)
        right = check_password(password, user.password if user is not None else _NOBODY)
        return user if right and user is not None else None


# ---- cardfloor user ---------------------------------------------------------------------------

def main(argv: list[str]) -> int:
    """``cardfloor user ...``: its exit code."""
    from cardd.floor.config import DEFAULT_PATH, FloorConfigError, load_config

    ap = argparse.ArgumentParser(prog="cardfloor user", description="The pit page's users (http.users_file).")
    ap.add_argument("--config", default=str(DEFAULT_PATH), metavar="FILE",
                    help=f"cardfloor's configuration (default {DEFAULT_PATH})")
    verbs = ap.add_subparsers(dest="verb", required=True, metavar="add|passwd|remove|list")
    add = verbs.add_parser("add", help="a new user")
    add.add_argument("name")
    add.add_argument("--role", choices=ROLES, required=True)
    add.add_argument("--pit", action="append", default=[], metavar="PIT", help="a pit of a pit user (again for more)")
    add.add_argument("--password-stdin", action="store_true", help="the password is stdin's first line")
    passwd = verbs.add_parser("passwd", help="a user's new password (their sessions end)")
    passwd.add_argument("name")
    passwd.add_argument("--password-stdin", action="store_true", help="the password is stdin's first line")
    remove = verbs.add_parser("remove", help="remove a user (their sessions end)")
    remove.add_argument("name")
    verbs.add_parser("list", help="every user, role and pits")
    args = ap.parse_args(argv)
    try:
        config = load_config(args.config)
    except FloorConfigError as exc:
        return _say(str(exc), EXIT_USAGE)
    path = config.http.users_file
    if path is None:
        return _say(f"{args.config}: http.users_file is not set: there are no users to manage", EXIT_USAGE)
    try:
        users = load_users(path)
        if args.verb == "list":
            for user in sorted(users.values()):
                print(f"{user.name}\t{user.role}\t{', '.join(user.pits)}")
            return EXIT_OK
        if args.verb != "add" and args.name not in users:
            return _say(f"{path}: no user {args.name!r}", EXIT_REFUSED)
        if args.verb == "remove":
            del users[args.name]
            save_users(path, users)
            print(f"removed {args.name}")
            return EXIT_OK
        if args.verb == "add":
            if not NAME_PATTERN.fullmatch(args.name):
                return _say("a user's name is 1 to 64 of A-Z a-z 0-9 _ . @ -", EXIT_USAGE)
            if args.name in users:
                return _say(f"{path}: {args.name!r} is a user already (cardfloor user passwd to change the password)",
                            EXIT_REFUSED)
            pits = tuple(dict.fromkeys(args.pit))
            known = [pit.name for pit in config.pit]
            if args.role == "pit" and not pits:
                return _say(f"a pit user needs --pit (the pits: {', '.join(known) or 'none configured'})", EXIT_USAGE)
            if args.role != "pit" and pits:
                return _say(f"--pit is for the pit role: {args.role} sees every table", EXIT_USAGE)
            for pit in pits:
                if pit not in known:
                    return _say(f"no pit {pit!r} in {args.config} (the pits: {', '.join(known) or 'none'})",
                                EXIT_USAGE)
            password = _password(args.password_stdin)
            users[args.name] = User(args.name, args.role, pits, hash_password(password))
        else:
            user = users[args.name]
            users[args.name] = user._replace(password=hash_password(_password(args.password_stdin)))
        save_users(path, users)
        _make_session_key(config.http.session_secret_file, path)
        print(f"{'added' if args.verb == 'add' else 'changed the password of'} {args.name}")
        return EXIT_OK
    except CarddError as exc:  # the users file's or the session key's problem
        return _say(str(exc), EXIT_REFUSED)
    except OSError as exc:
        return _say(f"{path}: cannot write it: {exc.strerror or type(exc).__name__}", EXIT_REFUSED)


def _make_session_key(path: Path | None, users_file: Path) -> None:
    """The session key, made here when missing (the users file's owner's): the service under
    systemd may not write /etc/cardfloor (ProtectSystem=strict)."""
    from cardd.floor.secret import load_or_make_secret

    if path is None or path.exists():
        return
    owner = service_owner(users_file)
    load_or_make_secret(path)
    if owner is not None:
        os.chown(path, *owner)


def _password(from_stdin: bool) -> str:
    if from_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = getpass.getpass("password: ")
        if getpass.getpass("again: ") != password:
            raise UsersError("the two passwords differ: nothing changed")
    if not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        raise UsersError(f"a password is {MIN_PASSWORD} to {MAX_PASSWORD} characters: nothing changed")
    return password


def _say(sentence: str, code: int) -> int:
    print(f"cardfloor user: {sentence}", file=sys.stderr)
    return code
