"""The JSON-lines history format: round trip, schema errors, and the ``okapi check`` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from check_builders import Builder

from okapikv.check.history import (
    HistoryError,
    HistoryRecorder,
    decode_bytes,
    encode_bytes,
    load_history,
    parse_events,
    save_history,
)
from okapikv.cli import main


def test_recorder_round_trip(tmp_path: Path) -> None:
    recorder = HistoryRecorder({"source": "test", "dcs": 2})
    put = recorder.invoke("c1", 0, "put", 5, key="x", value="v1", server=(0, 1))
    tx = recorder.invoke("c2", 1, "rotx", 6, keys=("x", "y"))
    recorder.complete(put, "ok", 9, found=False, timestamp=123)
    recorder.complete(tx, "ok", 12, values=("v1", None))
    scan = recorder.invoke("c2", 1, "scan", 13, start="a", end="z", limit=2)
    recorder.complete(scan, "ok", 15, items=(("x", "v1"),))
    failed = recorder.invoke("c1", 0, "delete", 16, key="x")
    recorder.complete(failed, "fail", 17, error="INVALID_ARGUMENT: nope")
    recorder.invoke("c1", 0, "get", 18, key="x", final=True)  # never completed
    path = tmp_path / "h.jsonl"
    recorder.write(path)
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["type"] == "meta"
    assert [json.loads(line)["type"] for line in lines[1:]] == [
        "invoke", "invoke", "ok", "ok", "invoke", "ok", "invoke", "fail", "invoke"
    ]
    history = load_history(path)
    assert history.meta["dcs"] == 2
    ops = history.by_id()
    assert ops[0].timestamp == 123 and ops[0].found is False and ops[0].server == (0, 1)
    assert ops[1].values == ("v1", None)
    assert ops[2].items == (("x", "v1"),) and ops[2].limit == 2
    assert ops[3].status == "fail" and ops[3].error == "INVALID_ARGUMENT: nope"
    assert ops[4].status is None and ops[4].final
    again = tmp_path / "again.jsonl"
    save_history(history, again)
    reloaded = load_history(again)
    assert [op.describe() for op in reloaded.operations] == [op.describe() for op in history.operations]


def test_bytes_round_trip() -> None:
    raw = bytes(range(256))
    assert encode_bytes(decode_bytes(raw)) == raw
    assert json.loads(json.dumps(decode_bytes(raw))) == decode_bytes(raw)


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"type": "ok", "op": 1, "process": "a", "f": "get", "time_us": 1}'], "never invoked"),
        (['{"type": "invoke", "op": 1, "process": "a", "f": "get", "time_us": 1, "key": "x"}'] * 2, "twice"),
        (['{"type": "invoke", "op": 1, "process": "a", "f": "cas", "time_us": 1}'], "unknown operation"),
        (["not json"], "not JSON"),
        (['{"type": "weird"}'], "unknown event type"),
        (['{"type": "invoke", "op": 1, "f": "get", "time_us": 1}'], "lacks"),
        # what escaped as other exceptions: nesting, huge integers, fields of the wrong type or range
        (["[" * 100_000], "not JSON"),
        (['{"type": "meta", "seed": ' + "9" * 5_000 + "}"], "not JSON"),
        (['{"type": "invoke", "op": 1, "process": "a", "f": "scan", "time_us": 1, "limit": {}}'], "malformed"),
        (['{"type": "invoke", "op": 1, "process": "a", "f": "get", "time_us": 1, "server": [1]}'], "malformed"),
        (['{"type": "invoke", "op": 1, "process": "a", "f": "rotx", "time_us": 1, "keys": 5}'], "malformed"),
        (['{"type": "invoke", "op": 1, "process": "a", "f": "get", "time_us": 1, "key": "x"}',
          '{"type": "ok", "op": 1, "time_us": 1e999}'], "malformed"),
        (['{"type": "invoke", "op": 1, "process": "a", "f": "scan", "time_us": 1}',
          '{"type": "ok", "op": 1, "time_us": 2, "items": [[1, 2, 3]]}'], "malformed"),
        # what the checkers size their work by: a count, not bytes
        (['{"type": "meta", "dcs": 1000000000000}'], "meta dcs must be an integer in 1..255"),
        (['{"type": "meta", "liveness": {"heal_us": "soon"}}'], "liveness.heal_us must be an integer"),
    ],
)
def test_schema_errors_name_the_line(lines: list[str], message: str) -> None:
    with pytest.raises(HistoryError, match=message) as error:
        parse_events(lines, "h.jsonl")
    assert "h.jsonl:" in str(error.value)


def test_okapi_check_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = Builder()
    good.put("a", "x", "x1", 10, at=(0, 10))
    good.get("b", "x", "x1", at=(20, 30))
    path = tmp_path / "good.jsonl"
    save_history(good.history(), path)
    assert main(["check", str(path)]) == 0
    assert "no anomalies" in capsys.readouterr().out

    bad = Builder()
    bad.put("a", "x", "x1", 10, at=(0, 10))
    bad.get("b", "x", None, at=(20, 30))
    path = tmp_path / "bad.jsonl"
    save_history(bad.history(), path)
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "NotLinearizable" in out

    assert main(["check", str(tmp_path / "missing.jsonl")]) == 2
