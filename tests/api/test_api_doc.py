"""docs/api.md shows every message class with examples that the protocol's own types accept,
and docs/api-schema.json is what the types generate."""
from __future__ import annotations

import json
import re
from pathlib import Path

import msgspec
import pytest

from cardd.api import schema
from cardd.api.protocol import (CLIENT_CLASSES, COMMAND_TYPES, PROTOCOL_VERSION, SERVER_CLASSES, Command, ApiEvent,
                                LogQuery, LogReply, Version, class_name, encode_line, reply_decoder, request_decoder)
from cardd.daemon.app import release
from cardd.daemon.backend import journal_reasons
from cardd.daemon.commands import command_table
from cardd.journal import KIND_INPUT

DOCS = Path(__file__).resolve().parents[2] / "docs"
API_MD = DOCS / "api.md"
FENCE = re.compile(r"^```json\n(.*?)^```", re.S | re.M)


def section(title: str) -> str:
    text = API_MD.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def examples(title: str) -> list[str]:
    return [block.strip() for block in FENCE.findall(section(title))]


@pytest.mark.parametrize("title, decoder, classes", [
    ("Client to server", request_decoder, CLIENT_CLASSES),
    ("Server to client", reply_decoder, SERVER_CLASSES),
], ids=["client", "server"])
def test_every_example_parses_and_every_class_has_one(title, decoder, classes):
    shown = set()
    for example in examples(title):
        message = decoder.decode(example)  # a wrong example fails here with msgspec's reason
        shown.add(type(message))
        # nothing in the example that the type would drop (the daemon's messages allow unknown fields)
        assert json.loads(example).items() <= json.loads(encode_line(message)).items(), example
    assert shown == set(classes), f"no example of {sorted(class_name(c) for c in set(classes) - shown)}"


def test_every_command_example_with_typed_args_parses_with_its_args_type():
    typed = [message for message in map(request_decoder.decode, examples("Client to server"))
             if isinstance(message, Command) and message.name in COMMAND_TYPES]
    assert {message.name for message in typed} == set(COMMAND_TYPES), "a command with typed args has no example"
    for message in typed:
        args_type, _ = COMMAND_TYPES[message.name]
        decoded = msgspec.convert(message.args, args_type)  # strict: a wrong or unknown arg fails here
        assert msgspec.to_builtins(decoded).items() >= message.args.items()
    with pytest.raises(msgspec.ValidationError, match="colour"):
        msgspec.convert({"colour": "red"}, COMMAND_TYPES["export_journal"][0])


def test_the_examples_use_the_daemons_own_reason_codes_and_commands():
    """An example a reader copies must work: a reason code that no record carries finds nothing."""
    requests = [request_decoder.decode(e) for e in examples("Client to server")]
    replies = [reply_decoder.decode(e) for e in examples("Server to client")]
    journaled = journal_reasons()
    events = [m for m in replies if isinstance(m, ApiEvent)]
    events += [r for m in replies if isinstance(m, LogReply) for r in m.records]
    assert events
    for event in events:  # a table input's record has no reason; every other record one the daemon writes
        assert (event.reason == "") == (event.kind == KIND_INPUT), event
        assert event.kind == KIND_INPUT or event.reason in journaled, f"no record carries {event.reason!r}"
    for query in requests:
        if isinstance(query, LogQuery) and query.reason is not None:
            assert query.reason in journaled, f"no record carries {query.reason!r}"
        if isinstance(query, Command):
            assert query.name in command_table(simulated=True), query.name
    (version,) = [m for m in replies if isinstance(m, Version)]
    assert version.release == release(), "VERSION's release is what the daemon says"


def test_the_doc_names_the_protocol_version():
    assert API_MD.read_text(encoding="utf-8").startswith(f"# The cardd local API — protocol {PROTOCOL_VERSION}\n")


def test_every_json_block_in_the_doc_is_in_a_message_section():
    total = len(FENCE.findall(API_MD.read_text(encoding="utf-8")))
    assert total == len(examples("Client to server")) + len(examples("Server to client"))


def test_the_schema_file_is_fresh():
    assert (DOCS / "api-schema.json").read_text(encoding="utf-8") == schema.render(), \
        "docs/api-schema.json is stale: run `make api-schema` and commit it"


def test_the_schema_check_fails_on_a_stale_file(tmp_path, capsys):
    stale = tmp_path / "api-schema.json"
    stale.write_text(schema.render().replace('"ACK"', '"OK"'))
    assert schema.main(["--check", str(stale)]) == 1
    assert "is stale" in capsys.readouterr().err
    assert schema.main(["--write", str(stale)]) == 0
    assert schema.main(["--check", str(stale)]) == 0


def test_the_schema_covers_both_directions_and_every_class():
    generated = json.loads(schema.render())
    defs = generated["$defs"]
    for name, classes in (("ClientMessage", CLIENT_CLASSES), ("ServerMessage", SERVER_CLASSES)):
        mapping = defs[name]["discriminator"]["mapping"]
        assert set(mapping) == {class_name(c) for c in classes}
    assert defs["Watch"]["additionalProperties"] is False  # requests are strict
    for args_type, result_type in COMMAND_TYPES.values():  # the typed commands' args and results too
        assert defs[args_type.__name__]["additionalProperties"] is False and result_type.__name__ in defs
