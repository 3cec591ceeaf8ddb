"""Signed firmware images: build, sign, verify, and move them to a device chunk by chunk
(Ed25519 over header and image, checked by the host before it sends and by the device before it
installs; a CRC-32 per chunk). The image file and the transfer: docs/protocol.md §5."""
from __future__ import annotations

import asyncio
import hashlib
import math
import re
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, TypeVar

import structlog
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
# (cryptography's serialization, the key files' formats with its SSH and cipher modules, is imported
# by the functions that read or write a key file: a daemon starts without it)

from core.files import read_regular_file
from drivers.errors import PortClosed
from firmware_bridge.errors import (
    FirmwareArgumentError,
    FirmwareDowngradeRefused,
    FirmwareError,
    FirmwareFormatError,
    FirmwareSameVersion,
    FirmwareSignatureError,
    FirmwareTargetMismatch,
    FirmwareTransferError,
    LinkError,
    RequestRefused,
    SessionError,
    hex_preview,
)
from firmware_bridge.framing import MAX_PAYLOAD
from firmware_bridge.messages import (
    FirmwareAbort,
    FirmwareAllowDowngrade,
    FirmwareBegin,
    FirmwareChunk,
    FirmwareCommit,
    FirmwareResult,
    FirmwareStage,
    Ident,
    Message,
    encode,
)

log = structlog.get_logger(__name__)

MAGIC = b"CDFW"
FORMAT_VERSION = 1
SIGNATURE_LEN = 64
DEFAULT_CHUNK = 512
#: the largest chunk a FirmwareChunk message carries within one frame's payload
MAX_CHUNK = MAX_PAYLOAD - len(encode(FirmwareChunk(0, 0, b"")))
MAX_IMAGE_SIZE = 64 * 1024 * 1024
#: the largest image file a host reads (whole, into memory): cardd's firmware_update, cardctl firmware flash
MAX_IMAGE_FILE_BYTES = 16 << 20
#: the largest public key file: 32 raw bytes, or a PEM block of about a hundred
MAX_KEY_FILE_BYTES = 64 << 10
_SIZE = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class FirmwareHeader:
    model: str
    version: str
    size: int

    def to_bytes(self) -> bytes:
        parts = [MAGIC, bytes([FORMAT_VERSION])]
        for name, text in (("model", self.model), ("version", self.version)):
            raw = text.encode("utf-8")
            if not 0 < len(raw) <= 255:
                raise FirmwareFormatError(f"header {name} must be 1..255 UTF-8 bytes, got {len(raw)}", raw)
            parts += [bytes([len(raw)]), raw]
        return b"".join(parts) + _SIZE.pack(self.size)

    @classmethod
    def parse(cls, data: bytes) -> tuple["FirmwareHeader", int]:
        """The header at the start of ``data`` and its length in bytes."""
        if data[:4] != MAGIC:
            magic = data[:4].hex(" ")
            raise FirmwareFormatError(f"not a firmware image: magic {magic}, expected 43 44 46 57 ('CDFW')", data)
        if len(data) < 5 or data[4] != FORMAT_VERSION:
            fmt = data[4:5].hex() or "missing"
            raise FirmwareFormatError(f"image format {fmt}, this host reads format {FORMAT_VERSION}", data)
        pos, texts = 5, []
        for name in ("model", "version"):
            n = data[pos] if pos < len(data) else 0
            if n == 0 or pos + 1 + n > len(data):
                raise FirmwareFormatError(f"header {name} at byte {pos} is empty or runs past the data", data)
            try:
                texts.append(data[pos + 1 : pos + 1 + n].decode("utf-8"))
            except UnicodeDecodeError:
                raise FirmwareFormatError(f"header {name} at byte {pos} is not UTF-8", data) from None
            pos += 1 + n
        if pos + _SIZE.size > len(data):
            raise FirmwareFormatError(f"header ends at byte {len(data)} before the image size field", data)
        (size,) = _SIZE.unpack_from(data, pos)
        if size > MAX_IMAGE_SIZE:
            raise FirmwareFormatError(f"image size {size} exceeds the limit of {MAX_IMAGE_SIZE} bytes", data)
        return cls(texts[0], texts[1], size), pos + _SIZE.size


@dataclass(frozen=True, slots=True)
class SignedImage:
    header: FirmwareHeader
    header_bytes: bytes
    image: bytes
    signature: bytes

    @property
    def sha256(self) -> bytes:
        return hashlib.sha256(self.image).digest()

    def to_bytes(self) -> bytes:
        return self.header_bytes + self.image + self.signature

    @classmethod
    def from_bytes(cls, data: bytes) -> "SignedImage":
        """Parse an image file; refuses (FirmwareFormatError) anything short, long or malformed."""
        header, start = FirmwareHeader.parse(data)
        end = start + header.size
        sig = data[end:]
        if len(data) < end or len(sig) != SIGNATURE_LEN:
            have = max(0, len(data) - start)
            raise FirmwareFormatError(
                f"header says {header.size} image bytes + {SIGNATURE_LEN} signature bytes, "
                f"file has {have} bytes after the header",
                data[-16:],
            )
        return cls(header, bytes(data[:start]), bytes(data[start:end]), bytes(sig))


def generate_dev_keypair() -> tuple[Ed25519PrivateKey, Ed25519PublicKey]:
    """A fresh key pair for tests and the demo. Production keys never live in the repository."""
    private = Ed25519PrivateKey.generate()
    return private, private.public_key()


def public_key_bytes(key: Ed25519PublicKey) -> bytes:
    from cryptography.hazmat.primitives import serialization
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def public_key_pem(key: Ed25519PublicKey) -> bytes:
    """The public key as a PEM block (SubjectPublicKeyInfo): what ``[firmware] public_key`` and the
    simulators' ``--firmware-key`` take, as the 32 raw bytes are."""
    from cryptography.hazmat.primitives import serialization
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def private_key_pem(key: Ed25519PrivateKey) -> bytes:
    """The private key as an unencrypted PKCS #8 PEM block (the file's mode keeps it: 0600)."""
    from cryptography.hazmat.primitives import serialization
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def load_private_key(data: bytes) -> Ed25519PrivateKey:
    """An Ed25519 private key from a PEM block (PKCS #8, unencrypted)."""
    from cryptography.hazmat.primitives import serialization
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):  # cryptography's text names its internals; TypeError: an encrypted key
        what = ("a PEM block whose private key cannot be read (damaged, encrypted, or a public key)"
                if data.lstrip().startswith(b"-----BEGIN") else f"{len(data)} bytes, not PEM")
        raise FirmwareError(f"not an Ed25519 private key (PEM): {what}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise FirmwareError(f"private key is {type(key).__name__}, firmware needs Ed25519")
    return key


def read_private_key_file(path: Path) -> Ed25519PrivateKey:
    """:func:`load_private_key` of the file at ``path``, read as :func:`read_public_key_file` reads a key."""
    return load_private_key(read_regular_file(path, MAX_KEY_FILE_BYTES))


def read_image_file(path: Path) -> SignedImage:
    """The signed image in the file at ``path``, parsed, not verified. Only a regular file of at most
    :data:`MAX_IMAGE_FILE_BYTES` is read (``core.files.read_regular_file``: a device or a FIFO is
    :class:`~core.files.FileRefused`, never read without end or waited on); FirmwareFormatError
    when it is not an image; OSError as the OS raises it. It blocks on the disk: off the event loop."""
    return SignedImage.from_bytes(read_regular_file(path, MAX_IMAGE_FILE_BYTES))


def read_public_key_file(path: Path) -> Ed25519PublicKey:
    """:func:`load_public_key` of the file at ``path``, read as :func:`read_image_file` reads an image
    (at most :data:`MAX_KEY_FILE_BYTES`)."""
    return load_public_key(read_regular_file(path, MAX_KEY_FILE_BYTES))


def load_public_key(data: bytes) -> Ed25519PublicKey:
    """An Ed25519 public key from 32 raw bytes or a PEM file's contents."""
    from cryptography.hazmat.primitives import serialization
    try:
        if len(data) == 32:
            return Ed25519PublicKey.from_public_bytes(data)
        key = serialization.load_pem_public_key(data)
    except ValueError:  # cryptography's text names its own internals (ASN.1 tags, a FAQ link): ours says what the file is
        what = ("a PEM block whose public key cannot be read (damaged, or a private key or certificate)"
                if data.lstrip().startswith(b"-----BEGIN") else f"{len(data)} bytes, not PEM")
        raise FirmwareError(f"not an Ed25519 public key (32 raw bytes or PEM): {what}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise FirmwareError(f"public key is {type(key).__name__}, firmware needs Ed25519")
    return key


def sign_image(model: str, version: str, image: bytes, private_key: Ed25519PrivateKey) -> SignedImage:
    header = FirmwareHeader(model, version, len(image))
    header_bytes = header.to_bytes()
    return SignedImage(header, header_bytes, bytes(image), private_key.sign(header_bytes + image))


def verify_signature(
    header_bytes: bytes, image: bytes, signature: bytes, public_key: Ed25519PublicKey
) -> FirmwareHeader:
    """The header, if ``signature`` is a valid signature of header + image; else FirmwareSignatureError."""
    if len(signature) != SIGNATURE_LEN:
        raise FirmwareSignatureError(
            f"signature is {len(signature)} bytes, Ed25519 needs {SIGNATURE_LEN}: {hex_preview(signature, 16)}"
        )
    try:
        public_key.verify(signature, header_bytes + image)
    except InvalidSignature:
        raise FirmwareSignatureError(
            f"signature {hex_preview(signature, 8)} does not verify against public key "
            f"{public_key_bytes(public_key).hex()}: image refused"
        ) from None
    header, end = FirmwareHeader.parse(header_bytes)
    if end != len(header_bytes) or header.size != len(image):
        raise FirmwareFormatError(f"header says {header.size} bytes, image has {len(image)}", header_bytes)
    return header


def verify_image(signed: SignedImage, public_key: Ed25519PublicKey) -> FirmwareHeader:
    return verify_signature(signed.header_bytes, signed.image, signed.signature, public_key)


# ---- versions -------------------------------------------------------------------------

_VERSION = re.compile(r"\d{1,9}(\.\d{1,9})*")


def _version_key(version: str) -> tuple[int, ...] | None:
    """``"1.10.0"`` -> (1, 10); None for a version that is not dotted numbers."""
    if not _VERSION.fullmatch(version):
        return None
    parts = [int(p) for p in version.split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()  # 1.0 and 1.0.0 are the same version
    return tuple(parts)


def downgrade_reason(running: str, new: str) -> str | None:
    """Why installing ``new`` over ``running`` counts as a downgrade, or None if it does not.
    Versions are dotted numbers compared part by part; a version that is not cannot be shown
    to be newer, so it counts as one (host and device apply the same rule)."""
    running_key, new_key = _version_key(running), _version_key(new)
    if running_key is None or new_key is None:
        return f"versions {running!r} (running) and {new!r} cannot be compared: dotted numbers expected"
    if new_key < running_key:
        return f"version {new} is lower than the running {running}"
    return None


# ---- device side ----------------------------------------------------------------------


def verify_on_device(
    header_bytes: bytes,
    image: bytes,
    sha256: bytes,
    signature: bytes,
    public_key: bytes | Ed25519PublicKey,
    *,
    model: str,
) -> str:
    """What a device checks before it installs a received image; returns the new version.

    Refuses (a FirmwareError saying which check failed) a SHA-256 that differs from the one
    announced in BEGIN, a signature that does not verify, or an image for another model.
    """
    digest = hashlib.sha256(image).digest()
    if digest != sha256:
        raise FirmwareTransferError(f"SHA-256 of the received image is {digest.hex()}, BEGIN announced {sha256.hex()}")
    key = load_public_key(public_key) if isinstance(public_key, (bytes, bytearray)) else public_key
    header = verify_signature(header_bytes, image, signature, key)
    if header.model != model:
        raise FirmwareTargetMismatch(f"image is for model {header.model!r}, this device is {model!r}")
    return header.version


def _fit_text(text: str, limit: int = 255) -> str:
    """``text`` cut to fit a Text field (``limit`` UTF-8 bytes)."""
    return text.encode("utf-8")[:limit].decode("utf-8", errors="ignore")


# ---- host side ------------------------------------------------------------------------


_M = TypeVar("_M", bound=Message)


class Requester(Protocol):
    """What :func:`update_firmware` needs from a session."""

    ident: Ident | None

    async def request(self, msg: Message, expect: type[_M], timeout: float = ...) -> _M: ...


@dataclass(frozen=True, slots=True)
class FirmwareUpdate:
    """What :func:`update_firmware` did, for the journal: the device's COMMIT result, the
    versions, and the technician who allowed a downgrade (None when it was none)."""

    result: FirmwareResult
    model: str
    from_version: str | None
    to_version: str
    downgrade_allowed_by: str | None


def check_update_arguments(chunk_size: Any, timeout: Any, allow_downgrade_by: Any) -> None:
    """FirmwareArgumentError naming the first argument :func:`update_firmware` cannot use."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or not 1 <= chunk_size <= MAX_CHUNK:
        raise FirmwareArgumentError(f"chunk_size {chunk_size!r}: expected a whole number of bytes from 1 to "
                                    f"{MAX_CHUNK} (what one frame carries)")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
        raise FirmwareArgumentError(f"timeout {timeout!r}: expected a number of seconds above 0")
    if allow_downgrade_by is not None and (
        not isinstance(allow_downgrade_by, str) or not allow_downgrade_by.strip()
        or not allow_downgrade_by.isprintable() or len(allow_downgrade_by.encode("utf-8")) > 255
    ):
        raise FirmwareArgumentError(f"allow_downgrade_by {allow_downgrade_by!r}: expected the technician's "
                                    f"name, 1 to 255 UTF-8 bytes of printable text on one line")


@dataclass(frozen=True, slots=True)
class FirmwarePlan:
    """What :func:`check_update` found an update would do: the image's header, the device's running
    version, why it counts as a downgrade (None when it does not) and who allowed that."""

    header: FirmwareHeader
    from_version: str | None
    downgrade: str | None
    allowed_by: str | None


def same_version(running: str, new: str) -> bool:
    """Whether ``new`` is the version ``running`` already is (1.0 and 1.0.0 are one version)."""
    running_key, new_key = _version_key(running), _version_key(new)
    return running == new if running_key is None or new_key is None else running_key == new_key


def check_update(ident: Ident | None, signed: SignedImage, public_key: Ed25519PublicKey, *,
                 chunk_size: int = DEFAULT_CHUNK, timeout: float = 5.0,
                 allow_downgrade_by: str | None = None, reflash: bool = False) -> FirmwarePlan:
    """Every check :func:`update_firmware` makes before it sends a byte, against the device's IDENT:
    the arguments, the signature, the model, the version (see there for what each raises). A tool
    calls it first to show nothing of a transfer (a progress bar) that would not start. The version
    the device runs already is FirmwareSameVersion unless ``reflash``: flashing it again is
    seldom what was meant (the wrong file picked), and costs the device a reboot."""
    check_update_arguments(chunk_size, timeout, allow_downgrade_by)
    header = verify_image(signed, public_key)
    if ident is not None and ident.model != header.model:
        raise FirmwareTargetMismatch(
            f"image is for model {header.model!r}, the device is {ident.model!r} ({ident.serial})"
        )
    running = ident.firmware_version if ident is not None else None
    if ident is not None and running is not None and not reflash and same_version(running, header.version):
        raise FirmwareSameVersion(f"{header.model} {header.version} runs on {ident.model} {ident.serial} already")
    downgrade = ("the device has not identified, so its running version is unknown" if running is None
                 else downgrade_reason(running, header.version))
    if downgrade is not None and allow_downgrade_by is None:
        device = f"{ident.model} {ident.serial}" if ident is not None else "the device"
        raise FirmwareDowngradeRefused(f"{header.model} {header.version} for {device} refused: {downgrade} "
                                       f"(it goes only when someone allows it, by name)")
    return FirmwarePlan(header, running, downgrade, allow_downgrade_by if downgrade is not None else None)


#: aborts sent on behalf of a cancelled transfer, kept until done (asyncio holds tasks weakly)
_ABORTS: set[asyncio.Task] = set()


async def _abort(session: Requester, reason: str, timeout: float) -> None:
    try:
        await session.request(FirmwareAbort(_fit_text(reason)), expect=FirmwareResult, timeout=timeout)
    except (SessionError, LinkError, PortClosed):
        pass  # the device is gone; it keeps its running firmware without a COMMIT


async def update_firmware(
    session: Requester,
    signed: SignedImage,
    public_key: Ed25519PublicKey,
    *,
    chunk_size: int = DEFAULT_CHUNK,
    timeout: float = 5.0,
    progress: Callable[[int, int], None] | None = None,
    allow_downgrade_by: str | None = None,
    reflash: bool = False,
) -> FirmwareUpdate:
    """Verify ``signed`` and transfer it; returns what was done, with the device's COMMIT result.

    Before anything is sent (:func:`check_update`) it raises FirmwareArgumentError (a bad argument),
    FirmwareSignatureError, FirmwareTargetMismatch, or FirmwareDowngradeRefused: an image whose
    version is lower than the device's (or not comparable) goes only with
    ``allow_downgrade_by`` naming the technician who allowed it; the device is told so
    (FirmwareAllowDowngrade) and refuses a downgrade without it. The running version again goes
    only with ``reflash`` (else FirmwareSameVersion). Once FirmwareBegin is sent,
    any failure sends FirmwareAbort first: a refused step raises FirmwareTransferError, the
    caller's own exception (from ``progress``, a cancellation) propagates unchanged.
    """
    plan = check_update(session.ident, signed, public_key, chunk_size=chunk_size, timeout=timeout,
                        allow_downgrade_by=allow_downgrade_by, reflash=reflash)
    header, running, downgrade, allowed_by = plan.header, plan.from_version, plan.downgrade, plan.allowed_by

    async def step(msg: Message, stage: FirmwareStage) -> FirmwareResult:
        result = await session.request(msg, expect=FirmwareResult, timeout=timeout)
        assert isinstance(result, FirmwareResult)
        if result.stage is not stage or not result.ok:
            raise FirmwareTransferError(f"device refused {stage.name} at offset {result.offset}: {result.detail}")
        return result

    log.info("firmware_update_start", model=header.model, version=header.version, size=header.size,
             running=running)
    if allowed_by is not None:
        log.warning("firmware_downgrade_allowed", model=header.model, running=running, version=header.version,
                    by=allowed_by, why=downgrade)
    try:
        if allowed_by is not None:
            try:
                await step(FirmwareAllowDowngrade(allowed_by), FirmwareStage.ALLOW_DOWNGRADE)
            except RequestRefused:
                pass  # a protocol 1.0 device does not know the message: it checks no version either
        await step(FirmwareBegin(header.size, chunk_size, signed.sha256, signed.signature, signed.header_bytes),
                   FirmwareStage.BEGIN)
        for offset in range(0, header.size, chunk_size):
            data = signed.image[offset : offset + chunk_size]
            await step(FirmwareChunk(offset, zlib.crc32(data), data), FirmwareStage.CHUNK)
            if progress is not None:
                progress(offset + len(data), header.size)
        result = await step(FirmwareCommit(), FirmwareStage.COMMIT)
    except asyncio.CancelledError:
        task = asyncio.ensure_future(_abort(session, "transfer cancelled by the host", timeout))
        _ABORTS.add(task)
        task.add_done_callback(_ABORTS.discard)
        raise
    except Exception as exc:
        await _abort(session, str(exc) or type(exc).__name__, timeout)
        if isinstance(exc, (SessionError, LinkError, PortClosed)):  # PortClosed: a connection whose device went away
            raise FirmwareTransferError(f"transfer of {header.model} {header.version} stopped: {exc}") from exc
        raise
    return FirmwareUpdate(result, header.model, running, header.version, allowed_by)
