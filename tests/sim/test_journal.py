"""An experiment's journal (``okapikv.sim.journal``): finished runs read back, a torn line ignored,
another header or a foreign folder refused, ``fresh`` starting over."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from okapikv.sim.journal import FILE, Journal, JournalMismatch

HEADER = {"experiment": "fig3", "plan": {"partitions": 2, "protocols": ("okapi", "cure")}, "code": "abc"}


def test_runs_come_back_and_a_torn_line_is_left_out(tmp_path: Path) -> None:
    journal = Journal.open(tmp_path, HEADER)
    journal.add("a 6 1", {"clients": 6, "checked": True})
    journal.add("a 6 0", {"clients": 6, "checked": False})
    with (tmp_path / FILE).open("a") as handle:
        handle.write('{"key": "a 12 0", "run": {"cli')  # stopped while writing
    again = Journal.open(tmp_path, HEADER)
    assert again.runs == {"a 6 1": {"clients": 6, "checked": True}, "a 6 0": {"clients": 6, "checked": False}}
    again.add("a 12 0", {"clients": 12})  # on a line of its own, after the torn one
    assert Journal.open(tmp_path, HEADER).get("a 12 0") == {"clients": 12}
    assert Journal.open(tmp_path, HEADER).for_keys("a 6").runs.keys() == {"a 6 1", "a 6 0"}


def test_another_header_is_refused_naming_what_differs(tmp_path: Path) -> None:
    Journal.open(tmp_path, HEADER).add("a 6 0", {})
    other = {**HEADER, "plan": {"partitions": 4, "protocols": ["okapi", "cure"]}}
    with pytest.raises(JournalMismatch, match=r"plan\.partitions 2 there, 4 here") as refused:
        Journal.open(tmp_path, other)
    assert "\n" not in str(refused.value) and "protocols" not in str(refused.value)
    assert Journal.open(tmp_path, other, fresh=True).runs == {}
    assert json.loads((tmp_path / FILE).read_text().splitlines()[0])["header"]["plan"]["partitions"] == 4


def test_a_folder_with_other_files_is_refused_unless_fresh(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text("{}")
    with pytest.raises(JournalMismatch, match="no runs.jsonl"):
        Journal.open(tmp_path, HEADER)
    assert not (tmp_path / FILE).exists()
    assert Journal.open(tmp_path, HEADER, fresh=True).runs == {}
