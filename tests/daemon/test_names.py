"""Players' names through the real daemon (``cardd --simulate``, its socket, its journal): one
policy for every command that takes a name (core.names, docs/api.md "Names")."""
from __future__ import annotations

from tests.daemon.daemon_rig import shuffle_and_load, simulate

#: texts no view could show as themselves: a C1 control (an 8-bit terminal's CSI), NEL, a bidi
#: override and isolate, zero-width characters, a line separator (a lone surrogate is no JSON the
#: API decodes: it never reaches a command)
NOT_NAMES = ("p\u009bx", "p\x9b31mX", "a\u0085b", "evil\u202egnp.exe", "\u2067x\u2069", "al\u200bice",
             "zw\u200dj", "a\u2028b")


def test_no_name_is_acked_or_journaled_as_who_and_one_name_typed_two_ways_is_one_player(directory):
    with simulate(directory) as daemon:
        client = daemon.client()
        shuffle_and_load(client, lambda: client.ok("sim_load_shoe"), lambda n: client.ok("sim_deal", cards=n))
        client.ok("open_round")
        for text in NOT_NAMES:
            for name, args in (("take_seat", {}), ("place_bet", {"box": 1, "amount": 2500})):
                reply = client.command(name, player=text, **args)
                assert reply["class"] == "ERROR" and reply["code"] == "bad-args", (name, text, reply)
                assert f"{name}.player: " in reply["message"] and " is not a name: " in reply["message"], reply
        client.ok("take_seat", player="Jos\u00e9")
        again = client.command("take_seat", player="Jose\u0301")  # the same name, its accent combining
        assert again["class"] == "ERROR" and "Jos\u00e9 is already seated" in again["message"], again
        client.ok("place_bet", box=2, player="Jose\u0301", amount=2500)
        client.ok("place_bet", box=2, player="\uff2a\uff4f\uff53\u00e9", amount=1000)  # full-width letters
        assert client.state()["round"]["wagers"]["2"] == {"Jos\u00e9": 3500}
        records = client.request({"class": "LOG", "limit": 1000})["records"]
        whos = {record["who"] for record in records} - {None}
        assert "Jos\u00e9" in whos and not whos & set(NOT_NAMES), whos
        assert all(who.isprintable() for who in whos), whos
        bets = [record["message"] for record in records if record["reason"] == "ACTION" and record["who"] != "root"]
        assert bets == ["round 1: Jos\u00e9 bets 25.00 on box 2", "round 1: Jos\u00e9 bets 10.00 on box 2"], bets
        client.close()
