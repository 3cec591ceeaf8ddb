"""The protocol major-version check against an OLDER major.

Only a newer major was tested, so weakening the check from "different" to "greater" passed the
suite; this test fails on that mutation (checked by hand: `ident.protocol_major > PROTOCOL_MAJOR`).
"""
from __future__ import annotations

import pytest
from tests.firmware_bridge.fb_device import connection, kinds
from tests.support.aio import run

from firmware_bridge.errors import IncompatibleProtocol
from firmware_bridge.messages import PROTOCOL_MAJOR
from firmware_bridge.session import SessionEventKind as K


def test_an_older_major_version_is_refused_naming_both() -> None:
    older = PROTOCOL_MAJOR - 1

    async def main() -> None:
        conn, device, line, _, events = connection(protocol_major=older)
        with pytest.raises(IncompatibleProtocol, match=rf"speaks protocol {older}\.0, this host speaks {PROTOCOL_MAJOR}\."):
            await conn.open()
        assert K.INCOMPATIBLE in kinds(events) and K.CONNECTED not in kinds(events)
        await conn.close()

    assert older >= 0
    run(main())
