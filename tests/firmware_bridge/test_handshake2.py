"""The protocol 2.0 handshake: both identities proven, the same keys on both sides, and every
hostile peer refused with the failure named (unknown key, a cloned serial, a failed proof, a
man in the middle, a replayed IDENT2, a downgrade, a rogue host)."""
from __future__ import annotations

import hashlib
import hmac
from dataclasses import replace

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from firmware_bridge.errors import DeviceNotTrusted, HandshakeError
from firmware_bridge.framing import FrameKind
from firmware_bridge.framing2 import Framing2
from firmware_bridge.handshake2 import (
    DeviceHandshake,
    HostHandshake,
    Ident2,
    TrustFailure,
    decode_hello,
    decode_ident,
    device_signed_bytes,
    encode_hello,
    encode_ident,
    fingerprint,
    ident_signed_part,
    raw_public_key,
)

HOST_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
SHOE_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32, 64)))
OTHER_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(64, 96)))
SHOE = ("shoe", "CR-200", "SHOE0001")


def trust(enrolled: dict[tuple[str, str, str], bytes]):
    return enrolled.get


def enrolled_shoe():
    return trust({SHOE: raw_public_key(SHOE_KEY.public_key())})


def host(enrolled=None) -> HostHandshake:
    return HostHandshake(HOST_KEY, "table-7", enrolled or enrolled_shoe())


def shoe(identity=SHOE_KEY, serial="SHOE0001", host_key=HOST_KEY) -> DeviceHandshake:
    return DeviceHandshake(identity, "shoe", "CR-200", serial, "2.0.1", 77,
                           None if host_key is None else raw_public_key(host_key.public_key()))


def refused(failure: TrustFailure, call, *args) -> DeviceNotTrusted:
    with pytest.raises(DeviceNotTrusted) as caught:
        call(*args)
    assert caught.value.failure is failure, str(caught.value)
    assert str(caught.value).startswith(failure.value)
    return caught.value


def test_both_sides_get_the_same_keys_and_their_frames_pass():
    h, d = host(), shoe()
    ident_bytes = d.on_hello(h.hello())
    ident, host_keys, proof = h.on_ident(ident_bytes)
    proven = d.on_proof(proof)
    assert ident.unit == SHOE and ident.boot_id == 77 and ident.firmware == "2.0.1"
    assert proven.host_enrolled and proven.host_key == raw_public_key(HOST_KEY.public_key())
    device_keys = proven.keys
    assert (host_keys.send_key, host_keys.receive_key) == (device_keys.receive_key, device_keys.send_key)
    assert host_keys.session_id == device_keys.session_id
    host_framing, device_framing = Framing2(), Framing2()
    host_framing.install(host_keys)
    device_framing.install(device_keys)
    frames = device_framing.decoder().feed_fields(host_framing.wire_frame(FrameKind.DATA, 0, 0, b"deal"))
    assert frames == [(FrameKind.DATA, 0, 0, b"deal")]
    assert "key" not in repr(host_keys).replace("SessionKeys", "")  # no key in a log line


def test_every_handshake_has_its_own_keys():
    keys = set()
    for _ in range(3):
        h, d = host(), shoe()
        _, host_keys, _ = h.on_ident(d.on_hello(h.hello()))
        keys.add((host_keys.send_key, host_keys.session_id))
    assert len(keys) == 3


def test_session_keys_are_hkdf_sha256_as_documented():
    """An independent HKDF (RFC 5869, from hmac) over the documented inputs gives the same keys."""
    host_eph, dev_eph = (X25519PrivateKey.from_private_bytes(bytes([n]) * 32) for n in (1, 2))
    h = HostHandshake(HOST_KEY, "table-7", enrolled_shoe(), random_bytes=lambda n: b"\x11" * n,
                      new_ephemeral=lambda: host_eph)
    d = DeviceHandshake(SHOE_KEY, *SHOE, "2.0.1", 77, None, random_bytes=lambda n: b"\x22" * n,
                        new_ephemeral=lambda: dev_eph)
    hello_bytes = h.hello()
    ident_bytes = d.on_hello(hello_bytes)
    _, keys, _ = h.on_ident(ident_bytes)
    secret = host_eph.exchange(dev_eph.public_key())
    prk = hmac.digest(b"\x11" * 32 + b"\x22" * 32, secret, hashlib.sha256)
    info = (b"cardd protocol 2.0 session keys\x00" + bytes([2, 0]) + raw_public_key(HOST_KEY.public_key())
            + raw_public_key(SHOE_KEY.public_key()) + hashlib.sha256(hello_bytes + ident_bytes).digest())
    okm, block = b"", b""
    for i in range(1, 4):
        block = hmac.digest(prk, block + info + bytes([i]), hashlib.sha256)
        okm += block
    assert (keys.send_key, keys.receive_key, keys.session_id) == (okm[:32], okm[32:64], okm[64:80])


def test_unknown_key_is_refused():
    h, d = host(trust({})), shoe()
    err = refused(TrustFailure.UNKNOWN_KEY, h.on_ident, d.on_hello(h.hello()))
    assert fingerprint(raw_public_key(SHOE_KEY.public_key())) in str(err)


def test_cloned_serial_with_another_key_is_refused():
    h, clone = host(), shoe(identity=OTHER_KEY)
    err = refused(TrustFailure.KEY_MISMATCH, h.on_ident, clone.on_hello(h.hello()))
    assert "SHOE0001" in str(err) and fingerprint(raw_public_key(OTHER_KEY.public_key())) in str(err)


def test_a_device_that_shows_the_enrolled_key_but_cannot_sign_is_refused():
    h, d = host(), shoe(identity=OTHER_KEY)
    ident = decode_ident(d.on_hello(h.hello()))
    claimed = replace(ident, device_key=raw_public_key(SHOE_KEY.public_key()))  # the real shoe's public key
    refused(TrustFailure.BAD_PROOF, h.on_ident, encode_ident(claimed))


def test_replayed_ident_from_another_handshake_is_refused():
    first, d = host(), shoe()
    captured = d.on_hello(first.hello())
    refused(TrustFailure.BAD_PROOF, host().on_ident, captured)  # the new HELLO2 has a new challenge


def test_man_in_the_middle_swapping_the_ephemeral_key_is_refused():
    h, d = host(), shoe()
    hello = decode_hello(h.hello())
    attacker = X25519PrivateKey.generate()
    forwarded = encode_hello(replace(hello, ephemeral=raw_public_key(attacker.public_key())))
    refused(TrustFailure.BAD_PROOF, h.on_ident, d.on_hello(forwarded))  # the shoe signed the HELLO2 it saw
    ident = decode_ident(shoe().on_hello(h.hello()))
    swapped = replace(ident, ephemeral=raw_public_key(attacker.public_key()))
    refused(TrustFailure.BAD_PROOF, h.on_ident, encode_ident(swapped))


def test_downgrade_offer_is_refused_even_when_signed():
    h, d = host(), shoe()
    hello_bytes = h.hello()
    ident = decode_ident(d.on_hello(hello_bytes))
    downgraded: Ident2 = replace(ident, version=(1, 1))
    signed = replace(downgraded, signature=SHOE_KEY.sign(device_signed_bytes(hello_bytes, ident_signed_part(downgraded))))
    refused(TrustFailure.DOWNGRADE, h.on_ident, encode_ident(signed))


def test_a_rewritten_version_breaks_the_signature():
    h, d = host(), shoe()
    ident = decode_ident(d.on_hello(h.hello()))
    refused(TrustFailure.BAD_PROOF, h.on_ident, encode_ident(replace(ident, version=(2, 9))))


def test_rogue_host_proof_is_refused_by_the_device():
    h, d = host(), shoe()
    ident_bytes = d.on_hello(h.hello())
    rogue = HostHandshake(OTHER_KEY, "rogue", enrolled_shoe())
    # a proof from another host identity than the HELLO2 named
    forged = rogue._identity.sign(b"anything")
    refused(TrustFailure.ROGUE_HOST, d.on_proof, bytes([0x42]) + forged)
    _, _, proof = h.on_ident(ident_bytes)
    assert d.on_proof(proof).host_enrolled


def test_a_host_other_than_the_enrolled_one_is_proven_but_not_enrolled():
    rogue, d = HostHandshake(OTHER_KEY, "rogue", enrolled_shoe()), shoe()
    _, _, proof = rogue.on_ident(d.on_hello(rogue.hello()))
    proven = d.on_proof(proof)
    assert not proven.host_enrolled  # the device refuses it firmware and technician commands


def test_a_device_not_yet_enrolled_with_a_host_takes_its_proof_but_not_as_enrolled():
    h, d = host(), shoe(host_key=None)
    _, _, proof = h.on_ident(d.on_hello(h.hello()))
    assert not d.on_proof(proof).host_enrolled


def test_damaged_messages_are_one_clear_error():
    h, d = host(), shoe()
    ident_bytes = d.on_hello(h.hello())
    for cut in (0, 1, 10, len(ident_bytes) - 1):
        with pytest.raises(HandshakeError):
            h.on_ident(ident_bytes[:cut])
    with pytest.raises(HandshakeError, match="after its last field"):
        h.on_ident(ident_bytes + b"x")
    with pytest.raises(HandshakeError):
        shoe().on_hello(b"\x40\x02")
    with pytest.raises(HandshakeError, match="offers protocol 3.0"):
        shoe().on_hello(encode_hello(replace(decode_hello(h.hello()), version=(3, 0))))
    with pytest.raises(HandshakeError, match="before any HELLO2"):
        shoe().on_proof(bytes(65))


def test_low_order_ephemeral_key_is_refused():
    h, d = host(), shoe()
    ident = decode_ident(d.on_hello(h.hello()))
    zero_point = replace(ident, ephemeral=bytes(32))
    signed = replace(zero_point, signature=SHOE_KEY.sign(device_signed_bytes(h.hello(), ident_signed_part(zero_point))))
    with pytest.raises(HandshakeError, match="no shared secret"):
        h.on_ident(encode_ident(signed))


def test_device_text_is_escaped():
    h = host(trust({}))
    d = DeviceHandshake(SHOE_KEY, "shoe", "CR\x1b[2J", "SN\n1", "2.0", 1, None)
    err = refused(TrustFailure.UNKNOWN_KEY, h.on_ident, d.on_hello(h.hello()))
    assert "\x1b" not in str(err) and "\n" not in str(err)


def test_fingerprint_format():
    assert fingerprint(bytes(32)) == "6668-7aad-f862-bd77-6c8f-c18b-8e9f-8e20"


def test_handshake_over_a_damaged_link_then_only_tagged_frames():
    """The switch-over rules of docs/protocol.md §8 on two real Links over a lossy wire: the
    handshake's plain frames, then every payload in tagged frames, nothing lost or doubled."""
    import asyncio

    from firmware_bridge.framing2 import Decoder2Stats
    from firmware_bridge.link import LinkConfig, LinkState
    from tests.firmware_bridge.fb_wire import Wire, make_pair
    from tests.support.aio import run
    from tests.support.poll import until

    async def main() -> None:
        host_framing, shoe_framing = Framing2(), Framing2()
        config = LinkConfig(initial_rto=0.02, min_rto=0.005, max_rto=0.2)
        h_end, d_end = make_pair(Wire(seed=5, corrupt=0.05, drop=0.05), Wire(seed=6, corrupt=0.05, drop=0.05),
                                 config, framings=(host_framing, shoe_framing))
        h_end.link.start()
        await until(lambda: h_end.link.state is LinkState.UP and d_end.link.state is LinkState.UP)
        h, d = host(), shoe()
        await h_end.link.send(h.hello())
        await until(lambda: len(d_end.delivered) == 1)
        ident_bytes = d.on_hello(d_end.delivered[0])
        sent_ident = d_end.link.send(ident_bytes)
        assert d.pending_keys is not None
        shoe_framing.install(d.pending_keys, tag_once_peer_does=True)
        await until(lambda: len(h_end.delivered) == 1)
        _, host_keys, proof = h.on_ident(h_end.delivered[0])
        host_framing.install(host_keys)
        await asyncio.gather(sent_ident, h_end.link.send(proof))
        await until(lambda: len(d_end.delivered) == 2)
        assert d.on_proof(d_end.delivered[1]).host_enrolled
        cards = [f"card {i}".encode() for i in range(200)]
        await asyncio.gather(*(d_end.link.send(c) for c in cards))
        await until(lambda: len(h_end.delivered) == 201)
        assert h_end.delivered[1:] == cards
        stats = h_end.link.stats.framing
        assert isinstance(stats, Decoder2Stats) and stats.tagged_frames >= 200
        assert stats.replayed == 0
        h_end.link.close()
        d_end.link.close()

    run(main())
