"""`okapi status` fits the terminal it is drawn on: at 80 columns every line fits
and every server's state (up / DOWN) is visible; on a wide terminal each DC's lag has its column."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from okapikv.cluster.status import Topology, build_table

DCS = ("oregon", "virginia", "ireland")


def _records() -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for index, dc in enumerate(DCS):
        for partition in range(2):
            address = f"127.0.0.1:{20100 + 2 * index + partition}"
            if (dc, partition) == ("virginia", 1):
                records.append({"dc": dc, "partition": partition, "address": address, "reachable": False,
                                "error": "UNAVAILABLE: failed to connect to all addresses"})
                continue
            records.append({
                "dc": dc, "partition": partition, "address": address, "reachable": True,
                "links_down": ["virginia/1"] if (dc, partition) == ("ireland", 0) else [],
                "operations_total": 1_234_567, "operations_per_s": 4321.0, "waits_total": 12, "wait_ms_total": 3.5,
                "queue_messages": 17, "queue_bytes": 123_456, "versions": 98_765, "versions_collected": 54_321,
                "stable_lag_ms": {"oregon": 71.2, "virginia": 104.9, "ireland": 80.0},
                "pid": 4_194_000 + 2 * index + partition,
                "repairing": "lost" if (dc, partition) == ("oregon", 1) else None,
            })
    return records


def _render(width: int, watching: bool) -> list[str]:
    topology = Topology("okapi-local", "okapi", DCS, tuple((r["dc"], r["partition"], r["address"]) for r in _records()))
    console = Console(file=io.StringIO(), width=width, color_system=None, legacy_windows=False)
    console.print(build_table(topology, _records(), watching=watching))
    output = console.file.getvalue()
    assert isinstance(output, str)
    return output.splitlines()


@pytest.mark.parametrize("watching", [False, True])
def test_status_fits_80_columns_with_every_state_visible(watching: bool) -> None:
    lines = _render(80, watching)
    too_wide = [line for line in lines if len(line) > 80]
    assert not too_wide, "\n".join(lines)
    text = "\n".join(lines)
    for dc in DCS:
        for partition in range(2):
            row = next((line for line in lines if line.lstrip().startswith(f"{dc}/{partition} ")), None)
            assert row is not None, f"no row for {dc}/{partition}:\n{text}"
            state = {("virginia", 1): "DOWN", ("oregon", 1): "LOST: --repair"}.get((dc, partition), "up")
            assert f" {state}" in row, f"{dc}/{partition} shows no {state}:\n{text}"
            if (dc, partition) != ("virginia", 1):
                assert f" {4_194_000 + 2 * DCS.index(dc) + partition} " in row, f"{dc}/{partition}: no pid"
    assert "up, links down" in text
    assert "104.9" in text  # the worst lag of a server


def test_a_wide_terminal_shows_each_dcs_lag() -> None:
    lines = _render(220, watching=True)
    text = "\n".join(lines)
    assert all(f"lag {dc} ms" in text for dc in DCS), text
    assert all(len(line) <= 220 for line in lines)
    assert "127.0.0.1:20100" in text and "DOWN" in text


def test_watch_into_a_pipe_prints_each_refresh_as_it_comes(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """`okapi status --watch 2 | tee status.log` (or into a file): with no terminal to redraw in place,
    each refresh is printed whole when it is taken, not held back until the command is stopped."""
    from okapikv.cluster import status

    topology = Topology("okapi-local", "okapi", DCS, tuple((r["dc"], r["partition"], r["address"]) for r in _records()))
    printed_before: list[str] = []

    def refresh(_: Topology) -> list[dict[str, Any]]:
        printed_before.append(capsys.readouterr().out)  # what a reader of the pipe has by now
        if len(printed_before) == 3:
            raise KeyboardInterrupt
        return _records()

    monkeypatch.setattr(status, "collect", refresh)
    monkeypatch.setattr(status.time, "sleep", lambda _: None)
    assert status.watch(topology, 2.0, as_json=False) == 0
    assert [text.count("cluster okapi-local") for text in printed_before] == [0, 1, 1]
    assert "ops/s" in printed_before[1] and "virginia" in printed_before[2]
