"""What a power cut mid-write leaves of an SQLite WAL, shared by the journal's and the daemon's
power-cut tests: where the durable part of the WAL ends (read from the -shm a killed writer
left behind) and the damage to what follows it (cut at a random byte, or the last page torn)."""
from __future__ import annotations

import os
import random
import struct
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
