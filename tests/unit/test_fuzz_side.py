"""``okapi fuzz --counters-ttls``'s check (``okapikv.fuzz.side``): a counter that lost or doubled an
increment, or an expiring key still read after its time, is reported; an unknown outcome widens
the counter's allowed range; the plan keeps side keys out of every SCAN range."""

from __future__ import annotations

import pytest

from okapikv.fuzz import side
from okapikv.fuzz.plan import Command, Plan
from okapikv.fuzz.side import SideLedger


class FakeReader:
    def __init__(self, name: str, values: dict[str, str | None]) -> None:
        self.name = name
        self.values = values

    def side(self, command: Command) -> list[str] | None:
        value = self.values.get(command.key or "")
        return [f"GET {command.key} {'null' if value is None else value}"]


def ledger(increments: int, unknown: int = 0) -> SideLedger:
    found = SideLedger()
    for number in range(increments):
        found.answered("c0", Command("incr", "INCR n", key="n"), [f"INCR n {number + 1}"])
    for _ in range(unknown):
        found.answered("c0", Command("incr", "INCR n", key="n"), ["ERROR outcome unknown: connection broke"])
    return found


def test_counters_must_read_their_acknowledged_increments_in_every_dc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(side, "SETTLE_S", 0.2)
    assert ledger(3).check([FakeReader("a", {"n": "3"}), FakeReader("b", {"n": "3"})], ["n"]) == []
    [lost] = ledger(3).check([FakeReader("a", {"n": "3"}), FakeReader("b", {"n": "2"})], ["n"])
    assert "reads 2 in b's DC" in lost and "number 3" in lost
    assert ledger(3, unknown=1).check([FakeReader("a", {"n": "4"}), FakeReader("b", {"n": "3"})], ["n"]) == []
    assert ledger(3, unknown=1).check([FakeReader("a", {"n": "5"})], ["n"]) != []
    assert ledger(0).check([FakeReader("a", {})], ["n"]) == []  # never incremented: absent


def test_an_expiring_key_read_after_its_time_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(side, "EXPIRY_MARGIN_S", 0.0)
    found = SideLedger()
    found.answered("c0", Command("putex", "PUTEX e v 300", key="e", value="v"), ["PUTEX e not_found"])
    found.expiring["e"] = 0.0  # its time has passed
    assert found.check([FakeReader("a", {"e": None})], []) == []
    [late] = found.check([FakeReader("a", {"e": None}), FakeReader("b", {"e": "v"})], [])
    assert "e still reads v in b's DC" in late


def test_side_keys_lie_outside_every_scan_of_the_run() -> None:
    plan = Plan(3, 400, False, 5, "abc", ("x",), counters_ttls=True)
    keys = plan.all_keys()
    commands = [command for client in range(3) for command in plan.commands(client)]
    sides = [command for command in commands if command.f in ("incr", "putex")]
    assert {command.f for command in sides} == {"incr", "putex"} and 0.1 < len(sides) / len(commands) < 0.3
    for command in sides:
        assert command.key is not None and command.key > max(keys)
    assert all(command.f not in ("incr", "putex") for command in Plan(3, 400, False, 5, "abc", ("x",)).commands(0))
