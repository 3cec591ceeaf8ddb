"""What a power cut mid-write leaves of an SQLite WAL, shared by the journal's and the daemon's
power-cut tests: where the durable part of the WAL ends (read from the -shm a killed writer
left behind) and the damage to what follows it (cut at a random byte, or the last page torn);
and damage inside the durable part, which no power cut makes (a bad sector, a flipped bit)."""
from __future__ import annotations

import os
import random
import shutil
import sqlite3
import struct
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

WAL_HEADER = 32
FRAME_HEADER = 24


@dataclass(frozen=True)
class Committed:
    seq: int  # the last seq whose append() had returned
    mx_frame: int  # WAL frames SQLite had written by then
    salts: bytes  # the 8 salt bytes of that WAL generation


def wal_position(journal_path: str | Path) -> tuple[int, str]:
    """(mxFrame, the salts as hex) from the first copy of the wal-index header: mxFrame is a
    native u32 at byte 16, the salts are the WAL header's 8 bytes copied as they are, at 32.
    SQLite updates it only after a commit's frames were written and fsynced (synchronous=FULL)."""
    with open(f"{journal_path}-shm", "rb") as shm:
        header = shm.read(48)
    return struct.unpack_from("=I", header, 16)[0], header[32:40].hex()


def cut_wal(wal: Path, committed: Committed, rng: random.Random, tear: bool) -> str | None:
    """Damage the WAL after its durable part, as a power cut can; returns what was done."""
    if not wal.exists() or wal.stat().st_size <= WAL_HEADER:
        return None
    data = bytearray(wal.read_bytes())
    frame = FRAME_HEADER + int.from_bytes(data[8:12], "big")
    same_generation = bytes(data[16:24]) == committed.salts
    durable_end = WAL_HEADER + committed.mx_frame * frame if same_generation else WAL_HEADER
    if len(data) <= durable_end:
        return None  # killed between commits: nothing unsynced to lose
    last_frame = WAL_HEADER + ((len(data) - WAL_HEADER) // frame - 1) * frame
    if tear and last_frame >= durable_end and last_frame + frame <= len(data):
        start = rng.randrange(last_frame + FRAME_HEADER, last_frame + frame)
        filler = bytes(last_frame + frame - start) if rng.random() < 0.5 else rng.randbytes(last_frame + frame - start)
        data[start:last_frame + frame] = filler
        wal.write_bytes(data)
        return f"tore the last page from byte {start}"
    cut = rng.randrange(durable_end, len(data))
    os.truncate(wal, cut)
    return f"cut at byte {cut} of {len(data)} (durable up to {durable_end})"


def wal_frames_not_copied(journal_path: str | Path) -> range:
    """The WAL frames (1-based) a killed writer left that no checkpoint had begun to copy into the
    database file: after nBackfill and nBackfillAttempted (u32s at bytes 96 and 128 of the -shm,
    its checkpoint information), up to mxFrame. Damage to one of them is damage only the WAL holds."""
    with open(f"{journal_path}-shm", "rb") as shm:
        header = shm.read(136)
    copied = max(struct.unpack_from("=I", header, 96)[0], struct.unpack_from("=I", header, 128)[0])
    return range(copied + 1, struct.unpack_from("=I", header, 16)[0] + 1)


def middle_of_frame(wal: Path, frame: int) -> int:
    """The offset of the middle of the page WAL frame ``frame`` (1-based) carries."""
    with open(wal, "rb") as file:
        page_size = int.from_bytes(file.read(12)[8:12], "big")
    return WAL_HEADER + (frame - 1) * (FRAME_HEADER + page_size) + FRAME_HEADER + page_size // 2


def flip_bytes(file: Path, at: int, count: int = 8) -> None:
    """Invert ``count`` bytes of ``file`` from offset ``at``, as a bad sector or a flipped bit can."""
    data = bytearray(file.read_bytes())
    data[at:at + count] = bytes(byte ^ 0xFF for byte in data[at:at + count])
    file.write_bytes(data)


def stored_head(journal_path: Path) -> int:
    """The seq of the head as SQLite itself reads a journal and its WAL (no cardd code), on a copy of
    the two, so the files themselves are left as they are."""
    copy = journal_path.with_name(journal_path.name + ".peek")
    for suffix in ("", "-wal"):
        if Path(f"{journal_path}{suffix}").exists():
            shutil.copyfile(f"{journal_path}{suffix}", f"{copy}{suffix}")
    try:
        with closing(sqlite3.connect(copy)) as conn:
            return int(conn.execute("SELECT seq FROM head").fetchone()[0])
    finally:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{copy}{suffix}").unlink(missing_ok=True)
