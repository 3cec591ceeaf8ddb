"""Device URLs: one string in config names a device and how to talk to it::

    serial:///dev/cardd/shuffler-A1?baud=115200&parity=N&stopbits=1&bytesize=8
    usb://1209:c4d0?serial=SHOE0001
    NAME-SCHEME://NAME?key=value   (a scheme registered with drivers.register_scheme)

:func:`parse_url` returns a :class:`DeviceURL` or raises one :class:`BadURL`."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

from drivers.errors import BadURL

#: scheme -> its form in error messages ([...] is optional); serial and usb are parsed here,
#: the others are added by drivers.register_scheme and parse as NAME plus a free query
_FORMS: dict[str, str] = {
    "serial": "serial:///dev/PATH[?baud=115200&parity=N&stopbits=1&bytesize=8]",
    "usb": "usb://VID:PID[?serial=SN]",
}
BUILT_IN_SCHEMES = frozenset(_FORMS)
#: schemes that parse and open but are not offered in error messages: mem:// reaches only a
#: listener in the same process (tests, simulators), never a device a config file could name
_UNLISTED: set[str] = set()

SERIAL_DEFAULTS = {"baud": "115200", "parity": "N", "stopbits": "1", "bytesize": "8"}
_SERIAL_ALLOWED = {
    "parity": ("N", "E", "O", "M", "S"),
    "stopbits": ("1", "1.5", "2"),
    "bytesize": ("5", "6", "7", "8"),
}
_VID_PID = re.compile(r"^([0-9a-fA-F]{4}):([0-9a-fA-F]{4})$")
_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")  # a registered scheme, and a device name under it


@dataclass(frozen=True, slots=True)
class SerialSettings:
    baud: int = 115200
    parity: str = "N"
    stopbits: float = 1
    bytesize: int = 8


@dataclass(frozen=True, slots=True)
class DeviceURL:
    """A parsed device URL. Only the fields of its scheme are set."""

    text: str  # the URL as written, for messages
    scheme: str  # "serial", "usb" or "sim" (or a scheme registered later)
    path: str | None = None  # serial: device path
    serial_settings: SerialSettings | None = None
    vid: int | None = None  # usb
    pid: int | None = None
    serial_number: str | None = None  # usb: ?serial=
    name: str | None = None  # sim: what to simulate
    params: dict[str, str] = field(default_factory=dict)  # the query, as given

    def __str__(self) -> str:
        return self.text


def add_scheme(scheme: str, form: str | None = None, *, listed: bool = True) -> None:
    """Let ``scheme://NAME?key=value`` URLs parse (called by drivers.register_scheme); an
    unlisted scheme is left out of the accepted forms that error messages show."""
    if not _NAME.match(scheme):
        raise ValueError(f"scheme {scheme!r}: lower-case letters, digits, - and _, starting with a letter")
    _FORMS[scheme] = form or f"{scheme}://NAME"
    if listed:
        _UNLISTED.discard(scheme)
    else:
        _UNLISTED.add(scheme)


def remove_scheme(scheme: str) -> None:
    """Forget a scheme added with :func:`add_scheme` (serial and usb stay)."""
    if scheme not in BUILT_IN_SCHEMES:
        _FORMS.pop(scheme, None)
        _UNLISTED.discard(scheme)


def accepted_forms() -> str:
    """The accepted forms, one short line: ``serial:///dev/PATH[?...] | usb://VID:PID[?serial=SN] | ...``."""
    return " | ".join(form for scheme, form in _FORMS.items() if scheme not in _UNLISTED)


def bad_url(url: str, what: str) -> BadURL:
    """The one error for a URL that cannot be used: what is wrong, then the accepted forms."""
    return BadURL(url, f"{what}; accepted forms: {accepted_forms()}")


def _query(url: str, query: str, allowed: set[str] | None) -> dict[str, str]:
    """The query's parameters; ``allowed=None`` takes any key (a registered scheme's factory checks)."""
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise bad_url(url, f"malformed query {query!r}") from None
    params: dict[str, str] = {}
    for key, value in pairs:
        if allowed is not None and key not in allowed:
            raise bad_url(url, f"unknown parameter {key!r} (allowed: {', '.join(sorted(allowed))})")
        if key in params:
            raise bad_url(url, f"parameter {key!r} given twice")
        params[key] = value
    return params


def _serial_settings(url: str, params: dict[str, str]) -> SerialSettings:
    merged = {**SERIAL_DEFAULTS, **params}
    merged["parity"] = merged["parity"].upper()
    for key, allowed in _SERIAL_ALLOWED.items():
        if merged[key] not in allowed:
            raise bad_url(url, f"{key}={merged[key]!r} is not one of {', '.join(allowed)}")
    if not merged["baud"].isdigit() or not 50 <= int(merged["baud"]) <= 4_000_000:
        raise bad_url(url, f"baud={merged['baud']!r} is not a whole number from 50 to 4000000")
    stopbits = float(merged["stopbits"])
    return SerialSettings(
        baud=int(merged["baud"]),
        parity=merged["parity"],
        stopbits=int(stopbits) if stopbits.is_integer() else stopbits,
        bytesize=int(merged["bytesize"]),
    )


def parse_url(url: str | DeviceURL) -> DeviceURL:
    """Parse a device URL (one already parsed is returned as is); raises :class:`BadURL` naming
    the problem and the accepted forms."""
    if isinstance(url, DeviceURL):
        return url
    if not isinstance(url, str) or "://" not in url:
        raise bad_url(str(url), "not a device URL (no scheme://)")
    scheme = url.split("://", 1)[0].lower()
    if scheme not in _FORMS:
        raise bad_url(url, f"unknown scheme {scheme!r}")
    if "#" in url:  # urlsplit would drop the rest silently, and another device would be opened
        raise bad_url(url, "'#' is not part of any device URL (in a serial number write it as %23)")
    try:
        parts = urlsplit(url)
    except ValueError:  # '[' or ']' after scheme://: urllib takes them for an IPv6 host
        raise bad_url(url, "not a valid host part: '[' and ']' belong to no device URL (in a serial number write "
                      "them as %5B and %5D)") from None
    if scheme == "serial":
        if parts.netloc or not parts.path.startswith("/") or parts.path == "/":
            raise bad_url(url, "serial URLs need an absolute device path after serial://")
        params = _query(url, parts.query, set(SERIAL_DEFAULTS))
        return DeviceURL(url, "serial", path=parts.path,
                         serial_settings=_serial_settings(url, params), params=params)
    if scheme == "usb":
        match = _VID_PID.match(parts.netloc)
        if not match or parts.path not in ("", "/"):
            raise bad_url(url, f"{parts.netloc + parts.path!r} is not a hex VID:PID like 1209:c4d0")
        params = _query(url, parts.query, {"serial"})
        if params.get("serial") == "":
            raise bad_url(url, "serial= is empty")
        return DeviceURL(url, "usb", vid=int(match[1], 16), pid=int(match[2], 16),
                         serial_number=params.get("serial"), params=params)
    # a registered scheme (sim:// ...): a name plus free query parameters its factory checks
    name = parts.netloc or parts.path.lstrip("/")
    if not _NAME.match(name or ""):
        raise bad_url(url, f"{name!r} is not a device name (lower-case letters, digits, - and _)")
    return DeviceURL(url, scheme, name=name, params=_query(url, parts.query, None))
