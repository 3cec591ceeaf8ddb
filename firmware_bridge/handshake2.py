"""The protocol 2.0 handshake: both sides prove their Ed25519 identity, and an X25519
exchange gives the session's keys (:class:`firmware_bridge.framing2.SessionKeys`).

Three messages, each one link payload (docs/protocol.md, §8):

1. host → device **HELLO2**: the versions, the host's identity key, a fresh 32-byte challenge,
   a fresh X25519 public key, the host's name;
2. device → host **IDENT2**: the versions, who the device is (role, model, serial, firmware,
   boot id), its identity key, its own fresh challenge and X25519 key, and its Ed25519
   signature over the HELLO2 (the host's challenge in it) and everything before the signature;
3. host → device **PROOF2**: the host's signature over both messages (the device's challenge in them).

The session key: HKDF-SHA256 over the X25519 secret, salted with both challenges, its info
binding the version and the hash of both messages (both identity keys and both ephemeral
keys are in them). Each side checks the other's signature before it uses the key; a
man in the middle who swaps an ephemeral key breaks a signature, one who rewrites the version
offered breaks both. Only ``cryptography``'s primitives: no home-made ones.
"""
from __future__ import annotations

import enum
import hashlib
import os
import struct
from dataclasses import dataclass, replace
from typing import Callable

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from core.text import printable
from firmware_bridge.errors import DeviceNotTrusted, HandshakeError
from firmware_bridge.framing2 import KEY_LEN, SESSION_ID_LEN, SessionKeys

PROTOCOL_2 = (2, 0)
CHALLENGE_LEN = 32
PUBLIC_KEY_LEN = 32
SIGNATURE_LEN = 64
HELLO2_TYPE = 0x40
IDENT2_TYPE = 0x41
PROOF2_TYPE = 0x42

_DEVICE_PROOF = b"cardd protocol 2.0 device proof\x00"
_HOST_PROOF = b"cardd protocol 2.0 host proof\x00"
_KEY_INFO = b"cardd protocol 2.0 session keys\x00"


class TrustFailure(enum.Enum):
    """What failed when a peer is refused: the reason a DEVICE_NOT_TRUSTED alarm names."""

    UNKNOWN_KEY = "unknown key"  # no device enrolled under this serial, nor this key
    KEY_MISMATCH = "key does not match the enrolled one"  # the serial is enrolled with another key: a clone
    BAD_PROOF = "identity proof failed"  # the signature over our challenge does not verify
    DOWNGRADE = "downgrade offered"  # an enrolled 2.0 device (or a HELLO2 peer) speaking 1.x
    ROGUE_HOST = "host proof failed"  # (device side) the host's signature does not verify
    BAD_TAG = "frames failed their authentication tag"  # after the handshake: forged or replayed frames


def raw_public_key(key: Ed25519PublicKey | X25519PublicKey) -> bytes:
    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)


def fingerprint(public_key: bytes) -> str:
    """What a technician compares with the device's display or label: the first 16 bytes of
    the SHA-256 of the raw 32-byte key, in groups of four hex digits."""
    digest = hashlib.sha256(public_key).hexdigest()[:32]
    return "-".join(digest[i : i + 4] for i in range(0, 32, 4))


@dataclass(frozen=True, slots=True)
class Hello2:
    version: tuple[int, int]
    host_key: bytes
    challenge: bytes
    ephemeral: bytes
    host_name: str


@dataclass(frozen=True, slots=True)
class Ident2:
    version: tuple[int, int]
    role: str
    model: str
    serial: str
    firmware: str
    boot_id: int
    device_key: bytes
    challenge: bytes
    ephemeral: bytes
    signature: bytes

    @property
    def unit(self) -> tuple[str, str, str]:
        return self.role, self.model, self.serial


# ---- the messages' bytes -------------------------------------------------------------

def _text(value: str) -> bytes:
    raw = value.encode("utf-8")
    if len(raw) > 255:
        raise ValueError(f"text of {len(raw)} bytes is longer than 255")
    return bytes([len(raw)]) + raw


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data, self.pos, self.what = bytes(data), 0, what

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise HandshakeError(f"{self.what} of {len(self.data)} bytes ends inside a field at byte {self.pos}: "
                                 f"{self.data[:48].hex(' ')}")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def text(self) -> str:
        raw = self.take(self.take(1)[0])
        try:
            return printable(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise HandshakeError(f"{self.what}: text at byte {self.pos - len(raw)} is not UTF-8") from None

    def end(self) -> None:
        if self.pos != len(self.data):
            raise HandshakeError(f"{self.what}: {len(self.data) - self.pos} bytes after its last field")


def encode_hello(hello: Hello2) -> bytes:
    return (bytes([HELLO2_TYPE, *hello.version]) + hello.host_key + hello.challenge + hello.ephemeral
            + _text(hello.host_name))


def decode_hello(data: bytes) -> Hello2:
    r = _Reader(data, "HELLO2")
    if r.take(1)[0] != HELLO2_TYPE:
        raise HandshakeError(f"not a HELLO2 (type 0x{data[0]:02x})")
    version = tuple(r.take(2))
    hello = Hello2((version[0], version[1]), r.take(PUBLIC_KEY_LEN), r.take(CHALLENGE_LEN),
                   r.take(PUBLIC_KEY_LEN), r.text())
    r.end()
    return hello


def ident_signed_part(ident: Ident2) -> bytes:
    return (bytes([IDENT2_TYPE, *ident.version]) + _text(ident.role) + _text(ident.model) + _text(ident.serial)
            + _text(ident.firmware) + struct.pack(">I", ident.boot_id) + ident.device_key + ident.challenge
            + ident.ephemeral)


def encode_ident(ident: Ident2) -> bytes:
    return ident_signed_part(ident) + ident.signature


def decode_ident(data: bytes) -> Ident2:
    r = _Reader(data, "IDENT2")
    if not data or r.take(1)[0] != IDENT2_TYPE:
        raise HandshakeError(f"not an IDENT2 (type 0x{data[:1].hex() or 'none'})")
    version = tuple(r.take(2))
    role, model, serial, firmware = r.text(), r.text(), r.text(), r.text()
    (boot_id,) = struct.unpack(">I", r.take(4))
    ident = Ident2((version[0], version[1]), role, model, serial, firmware, boot_id, r.take(PUBLIC_KEY_LEN),
                   r.take(CHALLENGE_LEN), r.take(PUBLIC_KEY_LEN), r.take(SIGNATURE_LEN))
    r.end()
    return ident


def encode_proof(signature: bytes) -> bytes:
    return bytes([PROOF2_TYPE]) + signature


def decode_proof(data: bytes) -> bytes:
    r = _Reader(data, "PROOF2")
    if r.take(1)[0] != PROOF2_TYPE:
        raise HandshakeError(f"not a PROOF2 (type 0x{data[0]:02x})")
    signature = r.take(SIGNATURE_LEN)
    r.end()
    return signature


# ---- what is signed and derived ------------------------------------------------------

def device_signed_bytes(hello_bytes: bytes, ident_signed_part: bytes) -> bytes:
    """What the device signs: the HELLO2 as received (the host's challenge) and its IDENT2's
    bytes up to the signature. Always the bytes as sent, never re-encoded from decoded fields
    (the host escapes a device's text as it decodes it)."""
    return _DEVICE_PROOF + hashlib.sha256(hello_bytes).digest() + ident_signed_part


def host_signed_bytes(hello_bytes: bytes, ident_bytes: bytes) -> bytes:
    """What the host signs: both messages whole (the device's challenge in the IDENT2)."""
    return _HOST_PROOF + hashlib.sha256(hello_bytes + ident_bytes).digest()


def derive_session_keys(shared_secret: bytes, hello: Hello2, ident: Ident2, hello_bytes: bytes,
                        ident_bytes: bytes) -> tuple[bytes, bytes, bytes]:
    """(host → device key, device → host key, session id) from the X25519 secret, bound to the
    version, both identities (in the messages) and both challenges (the salt and the messages)."""
    info = (_KEY_INFO + bytes(ident.version) + hello.host_key + ident.device_key
            + hashlib.sha256(hello_bytes + ident_bytes).digest())
    okm = HKDF(algorithm=hashes.SHA256(), length=2 * KEY_LEN + SESSION_ID_LEN,
               salt=hello.challenge + ident.challenge, info=info).derive(shared_secret)
    return okm[:KEY_LEN], okm[KEY_LEN : 2 * KEY_LEN], okm[2 * KEY_LEN :]


def _exchange(private: X25519PrivateKey, peer: bytes, who: str) -> bytes:
    try:
        return private.exchange(X25519PublicKey.from_public_bytes(peer))
    except ValueError:  # a low-order point gives the all-zero secret: cryptography refuses it
        raise HandshakeError(f"{who}'s X25519 key {peer.hex()} gives no shared secret") from None


def _verify(key: bytes, signature: bytes, data: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(key).verify(signature, data)
    except (InvalidSignature, ValueError):
        return False
    return True


# ---- the two sides -------------------------------------------------------------------

#: the host's trust store as the handshake asks it: the key enrolled for (role, model, serial), or None
EnrolledKey = Callable[[tuple[str, str, str]], "bytes | None"]


class HostHandshake:
    """The host's side of one handshake: :meth:`hello`, then :meth:`on_ident` gives the keys
    and the PROOF2 to send, or raises DeviceNotTrusted naming what failed."""

    def __init__(self, identity: Ed25519PrivateKey, host_name: str, enrolled_key: EnrolledKey,
                 random_bytes: Callable[[int], bytes] = os.urandom,
                 new_ephemeral: Callable[[], X25519PrivateKey] = X25519PrivateKey.generate) -> None:
        """``random_bytes`` and ``new_ephemeral``: the challenge's and the X25519 key's source
        (fixed only for the worked examples of docs/protocol.md)."""
        self._identity = identity
        self._enrolled_key = enrolled_key
        self._ephemeral = new_ephemeral()
        self.hello_message = Hello2(PROTOCOL_2, raw_public_key(identity.public_key()), random_bytes(CHALLENGE_LEN),
                                    raw_public_key(self._ephemeral.public_key()), host_name)
        self.hello_bytes = encode_hello(self.hello_message)

    def hello(self) -> bytes:
        return self.hello_bytes

    def on_ident(self, ident_bytes: bytes) -> tuple[Ident2, SessionKeys, bytes]:
        ident = decode_ident(ident_bytes)
        who = f"{ident.role} {ident.model} {ident.serial}"
        if ident.version[0] < PROTOCOL_2[0]:
            raise DeviceNotTrusted(TrustFailure.DOWNGRADE, f"{who} answered HELLO2 with protocol "
                                   f"{ident.version[0]}.{ident.version[1]}")
        if not _verify(ident.device_key, ident.signature,
                       device_signed_bytes(self.hello_bytes, ident_bytes[:-SIGNATURE_LEN])):
            raise DeviceNotTrusted(TrustFailure.BAD_PROOF, f"{who}: its signature over our challenge does not "
                                   f"verify with the key it sent ({fingerprint(ident.device_key)})")
        enrolled = self._enrolled_key(ident.unit)
        if enrolled is None:
            raise DeviceNotTrusted(TrustFailure.UNKNOWN_KEY, f"{who} is not enrolled (its key "
                                   f"{fingerprint(ident.device_key)})")
        if enrolled != ident.device_key:
            raise DeviceNotTrusted(TrustFailure.KEY_MISMATCH, f"{who} proved key {fingerprint(ident.device_key)}, "
                                   f"enrolled is {fingerprint(enrolled)}: another device with its serial")
        secret = _exchange(self._ephemeral, ident.ephemeral, who)
        to_device, to_host, session_id = derive_session_keys(secret, self.hello_message, ident, self.hello_bytes,
                                                            ident_bytes)
        proof = encode_proof(self._identity.sign(host_signed_bytes(self.hello_bytes, ident_bytes)))
        return ident, SessionKeys(to_device, to_host, session_id), proof


@dataclass(frozen=True, slots=True)
class HostProven:
    """The device's outcome: the keys, and whether the host is the one it was enrolled with
    (only that host may send firmware and technician commands)."""

    keys: SessionKeys
    host_key: bytes
    host_enrolled: bool


class DeviceHandshake:
    """The device's side: :meth:`on_hello` gives the IDENT2 to send; :meth:`on_proof` checks the
    host's PROOF2 and gives the keys, or raises DeviceNotTrusted(ROGUE_HOST)."""

    def __init__(self, identity: Ed25519PrivateKey, role: str, model: str, serial: str, firmware: str,
                 boot_id: int, enrolled_host_key: bytes | None,
                 random_bytes: Callable[[int], bytes] = os.urandom,
                 new_ephemeral: Callable[[], X25519PrivateKey] = X25519PrivateKey.generate) -> None:
        self._identity = identity
        self._fields = (role, model, serial, firmware, boot_id)
        self._enrolled_host_key = enrolled_host_key
        self._random_bytes = random_bytes
        self._new_ephemeral = new_ephemeral
        self._pending: tuple[Hello2, bytes, bytes, SessionKeys] | None = None

    def on_hello(self, hello_bytes: bytes, version: tuple[int, int] = PROTOCOL_2) -> bytes:
        hello = decode_hello(hello_bytes)
        if hello.version[0] != PROTOCOL_2[0]:
            raise HandshakeError(f"HELLO2 offers protocol {hello.version[0]}.{hello.version[1]}, this side speaks "
                                 f"{PROTOCOL_2[0]}.x")
        ephemeral = self._new_ephemeral()  # a new one for every HELLO2
        role, model, serial, firmware, boot_id = self._fields
        unsigned = Ident2(version, role, model, serial, firmware, boot_id, raw_public_key(self._identity.public_key()),
                          self._random_bytes(CHALLENGE_LEN), raw_public_key(ephemeral.public_key()), bytes(SIGNATURE_LEN))
        signature = self._identity.sign(device_signed_bytes(hello_bytes, ident_signed_part(unsigned)))
        ident = replace(unsigned, signature=signature)
        ident_bytes = encode_ident(ident)
        secret = _exchange(ephemeral, hello.ephemeral, "the host")
        to_device, to_host, session_id = derive_session_keys(secret, hello, ident, hello_bytes, ident_bytes)
        self._pending = (hello, hello_bytes, ident_bytes, SessionKeys(to_host, to_device, session_id))
        return ident_bytes

    @property
    def pending_keys(self) -> SessionKeys | None:
        """The keys derived for the IDENT2 sent last: install them (tagging once the host does)
        as soon as the IDENT2 is on its way, so the tagged PROOF2 can be checked."""
        return None if self._pending is None else self._pending[3]

    def on_proof(self, proof_bytes: bytes) -> HostProven:
        if self._pending is None:
            raise HandshakeError("PROOF2 before any HELLO2")
        hello, hello_bytes, ident_bytes, keys = self._pending
        if not _verify(hello.host_key, decode_proof(proof_bytes), host_signed_bytes(hello_bytes, ident_bytes)):
            raise DeviceNotTrusted(TrustFailure.ROGUE_HOST, f"host {hello.host_name}: its signature over our challenge "
                                   f"does not verify with the key it sent ({fingerprint(hello.host_key)})")
        enrolled = self._enrolled_host_key is not None and self._enrolled_host_key == hello.host_key
        return HostProven(keys, hello.host_key, enrolled)
