"""Who is on the other end of the socket, and which roles that gives them.

The kernel tells us the peer's pid, uid and gid (SO_PEERCRED) and its supplementary groups
(SO_PEERGROUPS), both as they were when the peer called connect(): nothing the client says
about itself is trusted. A group in the configured role groups gives that role; root holds
every role (it can read the journal and stop the daemon anyway), and so does the daemon's own
uid (a process with it can already ptrace the daemon).
"""
from __future__ import annotations

import errno
import grp
import os
import pwd
import socket
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

from cardd.api.errors import PeerCredentialsError
from devices.events import Role  # the tracker's roles: one list of who may do what

#: linux/socket.h: SO_PEERGROUPS (4.13+); Python has no constant for it
SO_PEERGROUPS = 59
#: the largest buffer Python's getsockopt() accepts; more groups than fit fall back to /proc
_GETSOCKOPT_MAX = 1024
_GID = struct.Struct("=I")  # gid_t is a 32-bit unsigned int on Linux
_UCRED = struct.Struct("=iII")  # struct ucred: pid_t pid; uid_t uid; gid_t gid




ALL_ROLES = frozenset(Role)


#: the group of each role, a name or a numeric gid (the daemon's configuration, [roles])
RoleGroups: TypeAlias = Mapping[Role, str | int]


def resolve_role_groups(groups: RoleGroups) -> dict[int, Role]:
    """gid -> role. A group name that does not exist gives its role to nobody but root and the
    daemon's user, so a table computer without the groups still runs for them (the daemon says
    which are missing once, at its start: :func:`missing_groups`)."""
    roles: dict[int, Role] = {}
    for role, group in groups.items():
        if isinstance(group, int):
            roles[group] = role
            continue
        try:
            roles[grp.getgrnam(group).gr_gid] = role
        except KeyError:
            pass
    return roles


def missing_groups(groups: Iterable[str | int]) -> list[str]:
    """The group names among ``groups`` that do not exist on this machine, in their order (a
    numeric gid is taken as it is)."""
    missing: list[str] = []
    for group in groups:
        if isinstance(group, int) or group in missing:
            continue
        try:
            grp.getgrnam(group)
        except KeyError:
            missing.append(group)
    return missing


def groupadd_commands(groups: Iterable[str]) -> str:
    """The commands that create ``groups`` as system groups, as root types them on Debian."""
    return "; ".join(f"groupadd --system {group}" for group in groups)


def roles_text(roles: Iterable[Role]) -> str:
    """The roles a command may be run in, as a message says them: "supervisor or technician"."""
    wanted = set(roles)
    return " or ".join(role.value for role in Role if role in wanted)


@dataclass(frozen=True)
class Caller:
    """The identity of one connection, read from the kernel at connect time."""
    pid: int
    uid: int
    gid: int
    user: str          # the login name, or the uid in decimal when it has none
    groups: frozenset[int]   # primary and supplementary gids
    roles: frozenset[Role]

    def describe(self) -> str:
        return f"{self.user} (uid {self.uid}, pid {self.pid})"


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def group_name(gid: int) -> str | None:
    """The name of group ``gid`` on this machine, or None when it has none."""
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return None


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process that connected ``sock``."""
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    except OSError as exc:
        raise PeerCredentialsError(f"SO_PEERCRED on the API socket failed: {exc.strerror}") from exc
    pid, uid, gid = _UCRED.unpack(raw)
    return pid, uid, gid


def decode_gids(raw: bytes) -> list[int]:
    """An array of gid_t as the kernel writes it."""
    if len(raw) % _GID.size:
        raise PeerCredentialsError(f"SO_PEERGROUPS returned {len(raw)} bytes, not a whole number of gids")
    return [gid for (gid,) in _GID.iter_unpack(raw)]


def peer_groups(sock: socket.socket, pid: int, proc: Path = Path("/proc")) -> list[int]:
    """The peer's supplementary groups: SO_PEERGROUPS, or /proc/PID/status when the kernel lacks
    it or the peer has more groups than Python's getsockopt() buffer holds."""
    try:
        return decode_gids(sock.getsockopt(socket.SOL_SOCKET, SO_PEERGROUPS, _GETSOCKOPT_MAX))
    except OSError as exc:
        if exc.errno not in (errno.ENOPROTOOPT, errno.ERANGE, errno.EINVAL):
            raise PeerCredentialsError(f"SO_PEERGROUPS on the API socket failed: {exc.strerror}") from exc
    return proc_groups(pid, proc)


def proc_groups(pid: int, proc: Path = Path("/proc")) -> list[int]:
    """The ``Groups:`` line of /proc/PID/status (read after connect: a fallback only)."""
    status = proc / str(pid) / "status"
    try:
        text = status.read_text(encoding="ascii", errors="replace")
    except OSError as exc:
        raise PeerCredentialsError(f"cannot read the peer's groups from {status}: {exc.strerror}") from exc
    for line in text.splitlines():
        if line.startswith("Groups:"):
            try:
                return [int(g) for g in line.split()[1:]]
            except ValueError:
                raise PeerCredentialsError(f"{status}: a Groups: line that is not gids: {line[:80]!r}") from None
    raise PeerCredentialsError(f"{status} has no Groups: line")


def roles_for(uid: int, gids: Iterable[int], role_gids: Mapping[int, Role], admin_uids: frozenset[int]) -> frozenset[Role]:
    if uid in admin_uids:
        return ALL_ROLES
    return frozenset(role_gids[g] for g in gids if g in role_gids)


def login_roles(login: str, groups: RoleGroups, admin_uids: frozenset[int] | None = None) -> frozenset[Role]:
    """The roles of the user ``login`` among ``groups``, from the user database (their primary and
    supplementary groups), as a connection of theirs would hold them; none for a login this
    machine does not know."""
    try:
        entry = pwd.getpwnam(login)
    except (KeyError, ValueError):  # ValueError: a NUL in the name
        return frozenset()
    gids = os.getgrouplist(login, entry.pw_gid)
    return roles_for(entry.pw_uid, gids, resolve_role_groups(groups),
                     default_admin_uids() if admin_uids is None else admin_uids)


def identify(sock: socket.socket, role_gids: Mapping[int, Role], admin_uids: frozenset[int]) -> Caller:
    """The caller on ``sock`` and its roles."""
    pid, uid, gid = peer_credentials(sock)
    groups = frozenset([gid, *peer_groups(sock, pid)])
    return Caller(pid=pid, uid=uid, gid=gid, user=user_name(uid), groups=groups,
                  roles=roles_for(uid, groups, role_gids, admin_uids))


def default_admin_uids() -> frozenset[int]:
    """root and the daemon's own uid."""
    return frozenset({0, os.geteuid()})
