"""What `okapi bench` prints is printed as it is (issue 17, item 3): the terminal library's markup
must not take ``[bench]`` in ``pip install -e '.[bench]'`` (or ``[::1]`` in an address) for a style
and drop it, so following the printed advice works."""

from __future__ import annotations

import pytest

from benchmarks.harness import redis_ref
from benchmarks.harness.progress import ProgressUI


def test_the_redis_hint_keeps_its_extra(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(redis_ref.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(redis_ref.importlib.util, "find_spec", lambda name: None)
    reason = redis_ref.unavailable_reason()
    assert reason is not None and "pip install -e '.[bench]'" in reason
    with ProgressUI(1, enabled=False) as ui:
        ui.message(f"Redis reference skipped: {reason}")
    assert "pip install -e '.[bench]'" in capsys.readouterr().err


@pytest.mark.parametrize("text", ["okapi [red]not a style[/red]", "aborted: cannot reach [::1]:7100 [bench]"])
def test_messages_and_run_summaries_are_not_markup(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    with ProgressUI(1, enabled=False) as ui:
        ui.message(text, style="red")
        ui.start_run("run", 1.0)
        ui.finish_run(f"  {text}")
    err = capsys.readouterr().err
    assert err.count(text) == 2, err
