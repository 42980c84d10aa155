"""An experiment's finished runs on disk, so that an interrupted experiment resumes where it stopped.

``okapi sim --experiment NAME --out DIR`` appends every run to ``DIR/runs.jsonl`` as it finishes:
one JSON line per run, written with one ``write`` on a file opened for appending and fsynced, so a
crash loses at most the run being written (its torn line is ignored when read; worker processes,
``--jobs``, append to the same file). The first line is the header: the experiment, its plan, the
cost profile and a digest of the simulator's code. Rerun with the same header, the journal hands
each finished run back (``get``) instead of simulating it again, which gives the same records: a
run is a pure function of its configuration and the code (``okapikv.sim.events``). A different
header is refused (``JournalMismatch``, naming what differs), and so is a DIR holding other files
but no journal; ``fresh`` starts over.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

FILE = "runs.jsonl"
#: the packages a run's record depends on: a change there may change any run
CODE = ("core", "sim", "check")


class JournalMismatch(ValueError):
    """DIR holds another experiment's runs (or other files): one line saying what differs."""


def code_digest() -> str:
    """A digest of the simulator's source (``CODE``), so runs of other code are not reused."""
    root = Path(__file__).resolve().parent.parent  # the okapikv package
    hasher = hashlib.sha256()
    for package in CODE:
        for path in sorted((root / package).rglob("*.py")):
            hasher.update(str(path.relative_to(root)).encode())
            hasher.update(path.read_bytes())
    return hasher.hexdigest()[:16]


def _differences(found: dict[str, Any], wanted: dict[str, Any], prefix: str = "") -> list[str]:
    names = []
    for key in sorted(set(found) | set(wanted)):
        a, b = found.get(key), wanted.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            names += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            names.append(f"{prefix}{key} {json.dumps(a)} there, {json.dumps(b)} here")
    return names


class Journal:
    """The finished runs of one experiment in ``folder`` (module docstring), by ``run_key``."""

    def __init__(self, folder: Path, runs: dict[str, dict[str, Any]]) -> None:
        self.path = folder / FILE
        self.runs = runs

    @classmethod
    def open(cls, folder: Path, header: dict[str, Any], *, fresh: bool = False) -> Journal:
        """The journal of ``folder`` for the experiment ``header`` describes: its finished runs when
        its header is the same, none when there is no journal (or ``fresh``); ``JournalMismatch``
        when ``folder`` holds another experiment's journal, or files and no journal."""
        path = folder / FILE
        header = json.loads(json.dumps(header))  # as it reads back (tuples are lists)
        if fresh and path.exists():
            path.unlink()
        runs: dict[str, dict[str, Any]] = {}
        if path.exists():
            lines = path.read_bytes().split(b"\n")
            try:
                found = json.loads(lines[0])["header"]
            except (ValueError, KeyError, TypeError):
                raise JournalMismatch(f"{path} does not begin with a journal header: --fresh to start over") from None
            differ = _differences(found, header)
            if differ:
                raise JournalMismatch(f"{path} holds the runs of another plan ({'; '.join(differ)}): use the same "
                                      f"options, another --out, or --fresh to start over")
            for line in lines[1:]:
                try:
                    entry = json.loads(line)
                    runs[entry["key"]] = entry["run"]
                except (ValueError, KeyError, TypeError):
                    continue  # a torn line (the run being written when the process stopped)
        else:
            folder.mkdir(parents=True, exist_ok=True)
            if any(folder.iterdir()) and not fresh:
                raise JournalMismatch(f"{folder} holds files but no {FILE} (another experiment's output?): "
                                      f"use another --out, or --fresh to write over it")
            path.write_text(json.dumps({"header": header}) + "\n", encoding="utf-8")
        journal = cls(folder, runs)
        journal._end_line()
        return journal

    def _end_line(self) -> None:
        """After a torn last line, begin the next on a line of its own."""
        with self.path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            if handle.tell() == 0:
                return
            handle.seek(-1, os.SEEK_END)
            torn = handle.read(1) != b"\n"
        if torn:
            self._append(b"\n")

    def for_keys(self, prefix: str) -> Journal:
        """This journal with only the runs whose key begins with ``prefix`` (one point's, for a
        worker process: the same file)."""
        journal = Journal(self.path.parent, {k: v for k, v in self.runs.items() if k.startswith(prefix)})
        return journal

    def get(self, key: str) -> dict[str, Any] | None:
        return self.runs.get(key)

    def add(self, key: str, run: dict[str, Any]) -> None:
        """Record a finished run, durably (one appended line, fsynced)."""
        self.runs[key] = run
        self._append(json.dumps({"key": key, "run": run}).encode() + b"\n")

    def _append(self, data: bytes) -> None:
        descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            written = 0
            while written < len(data):
                written += os.write(descriptor, data[written:])
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
