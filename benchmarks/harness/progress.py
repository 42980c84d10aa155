"""The live view of a benchmark: one bar for the whole invocation (runs done, time left) and one
for the run in progress (its time left and live throughput), on stderr so stdout stays clean.

rich degrades by itself when stderr is not a terminal (CI): no live redraw, just the per-run
summary lines, which are what a log reader wants.

Messages are printed as plain text, never as rich markup: they carry hints such as
``pip install -e '.[bench]'``, in which markup would take ``[bench]`` for a style and drop it, and
error texts with IPv6 addresses (``[::1]:7100``). A message's colour is a ``style`` argument.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class ProgressUI:
    def __init__(self, total_runs: int, *, enabled: bool = True) -> None:
        self.console = Console(stderr=True, soft_wrap=True)
        self.progress = Progress(
            TextColumn("{task.description}", style="bold", markup=False),
            BarColumn(),
            TextColumn("{task.fields[count]}", markup=False),
            TextColumn("{task.fields[rate]}", markup=False),
            TimeElapsedColumn(),
            TextColumn("left"),
            TimeRemainingColumn(),
            console=self.console,
            disable=not enabled,
            transient=False,
        )
        self.overall: TaskID = self.progress.add_task("bench", total=max(1, total_runs), rate="",
                                                      count=f"0/{total_runs} runs")
        self.current: TaskID | None = None
        self._last: tuple[float, int] = (0.0, 0)
        self._rate = 0.0

    def __enter__(self) -> ProgressUI:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def _overall_task(self) -> Task:
        return next(task for task in self.progress.tasks if task.id == self.overall)

    def start_run(self, label: str, seconds: float) -> Callable[[float, int, int], None]:
        """Show a run of ``seconds``; returns the driver's progress callback for it."""
        if self.current is not None:
            self.progress.remove_task(self.current)
        self.current = self.progress.add_task(label[:48], total=max(seconds, 0.01), rate="",
                                              count=f"0.0/{seconds:.1f} s")
        self._last = (time.monotonic(), 0)
        self._rate = 0.0
        task = self.current

        def update(elapsed_s: float, completed: int, in_window: int) -> None:
            now = time.monotonic()
            last_time, last_count = self._last
            if now - last_time >= 0.5:
                instant = (completed - last_count) / (now - last_time)
                self._rate = instant if self._rate == 0.0 else 0.5 * self._rate + 0.5 * instant
                self._last = (now, completed)
            shown = min(elapsed_s, seconds)
            self.progress.update(task, completed=shown, rate=f"{self._rate:,.0f} ops/s",
                                 count=f"{shown:.1f}/{seconds:.1f} s")

        return update

    def start_count(self, label: str, total: int) -> Callable[[float, int, int], None]:
        """Show a phase of ``total`` operations (the load phase); returns the driver's callback."""
        if self.current is not None:
            self.progress.remove_task(self.current)
        self.current = self.progress.add_task(label[:48], total=max(total, 1), rate="", count=f"0/{total:,}")
        task = self.current

        def update(elapsed_s: float, completed: int, in_window: int) -> None:
            rate = completed / elapsed_s if elapsed_s > 0 else 0.0
            self.progress.update(task, completed=min(completed, total), rate=f"{rate:,.0f} ops/s",
                                 count=f"{completed:,}/{total:,}")

        return update

    def finish_run(self, summary: str, *, counted: bool = True, style: str | None = None) -> None:
        """End the current run's bar and print ``summary`` (plain text, in ``style`` if given);
        ``counted=False`` for phases that are not planned runs (load)."""
        if self.current is not None:
            self.progress.remove_task(self.current)
            self.current = None
        if counted:
            self.progress.advance(self.overall)
        task = self._overall_task()
        self.progress.update(self.overall, count=f"{int(task.completed)}/{int(task.total or 0)} runs")
        self.console.print(summary, highlight=False, markup=False, style=style)

    def message(self, text: str, *, style: str | None = None) -> None:
        """Print ``text`` as it is (no markup), in ``style`` if given (e.g. ``"red"``)."""
        self.console.print(text, highlight=False, markup=False, style=style)
