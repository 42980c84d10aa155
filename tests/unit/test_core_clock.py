"""The HLC and the vectors of a partition server, each with one writer that checks its rule
(``okapikv.core.clock``, ``okapikv.core.stable``; docs/protocol.md, "Timestamps and the HLC"). The
same rules as a property over whole servers, with second writers that break them caught, are in
``tests/property/test_prop_writers.py``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from okapikv.core.clock import Hlc, VersionVector
from okapikv.core.rules import RuleBroken
from okapikv.core.stable import StableVectors
from okapikv.core.timestamps import LOGICAL_MASK, offset_ceiling, pack

T0 = 1_000_000
OFFSET_US = 500_000
SRC = Path(__file__).resolve().parents[2] / "src" / "okapikv"


def make() -> tuple[VersionVector, Hlc]:
    vv = VersionVector(3, 1, OFFSET_US)
    return vv, vv.hlc


def test_issue_is_strictly_increasing_and_at_most_one_above_the_ceiling() -> None:
    vv, hlc = make()
    assert hlc.issue(pack(T0), T0) == pack(T0) and vv.entries == [0, pack(T0), 0]
    with pytest.raises(RuleBroken, match="issued twice"):
        hlc.issue(pack(T0), T0)
    with pytest.raises(RuleBroken, match="issued twice"):
        hlc.issue(pack(T0) - 1, T0)
    ceiling = offset_ceiling(T0, OFFSET_US)
    assert hlc.issue(ceiling + 1, T0) == ceiling + 1  # the carry over a dependency at the ceiling
    assert hlc.issue(ceiling + 2, T0) == ceiling + 2  # one above the HLC, which is the ceiling now
    with pytest.raises(RuleBroken, match="past the ceiling"):
        hlc.issue(ceiling + 4, T0)
    assert hlc.value == ceiling + 2  # a refused move changes nothing


def test_tick_raises_the_hlc_to_the_clock_and_never_lowers_it() -> None:
    _, hlc = make()
    assert hlc.tick(T0) == pack(T0)
    hlc.issue(pack(T0, 5), T0)
    assert hlc.tick(T0) == pack(T0, 5)  # ahead of the clock: stays
    assert hlc.tick(T0 - 10) == pack(T0, 5)
    assert hlc.tick(T0 + 1) == pack(T0 + 1)


def test_observe_raises_the_hlc_to_a_snapshot_within_the_ceiling_only() -> None:
    _, hlc = make()
    hlc.observe(pack(T0 + OFFSET_US, LOGICAL_MASK), T0)
    assert hlc.value == offset_ceiling(T0, OFFSET_US)
    hlc.observe(pack(T0), T0)  # below: nothing
    assert hlc.value == offset_ceiling(T0, OFFSET_US)
    with pytest.raises(RuleBroken, match="observed past the ceiling"):
        hlc.observe(pack(T0 + OFFSET_US + 1), T0)


def test_recover_restarts_above_a_floor_past_the_ceiling_and_the_ceiling_follows() -> None:
    _, hlc = make()
    floor = pack(T0 + 3_600_000_000)
    hlc.recover(floor)
    assert hlc.value == floor and hlc.ceiling(T0) == floor
    hlc.recover(pack(T0))  # below: nothing
    assert hlc.value == floor
    assert hlc.issue(floor + 1, T0) == floor + 1  # the next one above it, without the clock


def test_the_replicas_entries_only_grow_and_never_the_hlc() -> None:
    vv, hlc = make()
    vv.adopt(0, pack(5))
    vv.adopt(0, pack(5))
    with pytest.raises(RuleBroken, match="move back"):
        vv.adopt(0, pack(4))
    with pytest.raises(RuleBroken, match="only Hlc moves it"):
        vv.adopt(1, pack(9))
    assert vv.entries == [pack(5), 0, 0] and hlc.value == 0
    vv.restore((pack(3), pack(7), pack(8)), hlc_floor=pack(9))
    assert vv.snapshot() == (pack(5), pack(9), pack(8))
    with pytest.raises(ValueError, match="does not have 3 entries"):
        vv.restore((0, 0), hlc_floor=0)
    vv.add_dc(pack(2))
    assert vv.snapshot() == (pack(5), pack(9), pack(8), pack(2)) and hlc.value == pack(9)


def test_stable_vectors_only_grow_and_a_rollback_returns_within_the_step() -> None:
    vectors = StableVectors((0, 0), (0, 0), (0, 0))
    assert vectors.advance_stable((pack(3), 0)) == (pack(3), 0)
    vectors.advance_stable((pack(1), pack(2)))
    assert vectors.stable == (pack(3), pack(2))
    assert vectors.advance_gsv((pack(1), 0)) and not vectors.advance_gsv((0, 0))
    vectors.advance_horizon((pack(1), pack(1)))
    vectors.advance_horizon((0, 0))
    assert vectors.gsv == (pack(1), 0) and vectors.horizon == (pack(1), pack(1))
    vectors.take_stabilized((pack(4), pack(2)))  # a round's result, computed from (pack(3), pack(2))
    assert vectors.stable == (pack(4), pack(2))
    before = vectors.stable
    vectors.advance_stable((pack(9), pack(9)))  # a session merged, then the request refused
    vectors.rollback_stable(before)
    assert vectors.stable == before
    with pytest.raises(RuleBroken, match="not below"):
        vectors.rollback_stable((pack(9), 0))
    vectors.add_dc(1, 2, 3)
    assert (vectors.stable, vectors.gsv, vectors.horizon) == ((pack(4), pack(2), 1), (pack(1), 0, 2),
                                                              (pack(1), pack(1), 3))


def moves_an_entry(vector: ast.expr, relative: str) -> bool:
    """Whether ``vector[...] = `` moves a version vector entry: ``vv`` (an attribute, or a local
    alias), or ``entries`` outside ``core/clock.py``."""
    if isinstance(vector, ast.Name):
        return vector.id == "vv"
    return isinstance(vector, ast.Attribute) and (
        vector.attr == "vv" or (vector.attr == "entries" and relative != "core/clock.py"))


#: where a field of one of these names is assigned by its holder, or is not a server's vector
HOLDERS = {"stable": {"core/stable.py", "core/session.py"}, "gsv": {"core/stable.py"},
           "horizon": {"core/stable.py"}, "vv": {"core/state.py"}}
#: the packages that hold or drive a server's state (``wire`` fills protobuf messages of these names)
SERVER_PACKAGES = ("core/", "sim/", "server/", "storage/")


def replaces_a_vector(attribute: str, relative: str) -> bool:
    """Whether ``....attribute = `` replaces a server's vector outside its holder: ``stable``,
    ``gsv``, ``horizon`` outside ``StableVectors`` (``core/session.py``'s is a client's session),
    ``vv`` outside ``PartitionState.__init__``."""
    return (attribute in HOLDERS and relative not in HOLDERS[attribute]
            and relative.startswith(SERVER_PACKAGES))


def writes_outside_the_holders(root: Path = SRC) -> list[str]:
    """Assignments anywhere in the package that move a version vector entry or a held vector
    without its holder: ``vv[i] = `` (an attribute or a local alias), ``....entries[i] = `` outside
    ``core/clock.py``, and ``....stable``, ``.gsv``, ``.horizon`` or ``.vv = `` outside their holders
    (``replaces_a_vector``); one entry per line."""
    found: set[str] = set()
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            for target in targets:
                for part in ast.walk(target):
                    if isinstance(part, ast.Subscript) and moves_an_entry(part.value, relative):
                        found.add(f"{relative}:{part.lineno}")
                    if isinstance(part, ast.Attribute) and replaces_a_vector(part.attr, relative):
                        found.add(f"{relative}:{part.lineno}")
    return sorted(found)


def test_nothing_in_the_package_moves_a_vector_but_its_holder() -> None:
    assert writes_outside_the_holders() == []


def test_the_check_finds_a_second_writer(tmp_path: Path) -> None:
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "rogue.py").write_text(
        "def f(state, now):\n"
        "    state.vv[state.dc] = now\n"
        "    vv = state.vv\n"
        "    vv[1] += 1\n"
        "    state.version_vector.entries[0] = now\n"
        "    state.stable = state.gsv = ()\n"
        "    state.horizon, x = (), 1\n"
        "    state.session.dt = now\n")
    (tmp_path / "wire").mkdir()
    (tmp_path / "wire" / "convert.py").write_text("def g(gst, message):\n    gst.horizon = message.horizon\n")
    assert writes_outside_the_holders(tmp_path) == [f"core/rogue.py:{line}" for line in (2, 4, 5, 6, 7)]
