"""``okapikv.lifetime``: a child started with ``child_environment`` that calls ``exit_with_parent``
ends when its parent dies, even by SIGKILL, and a child whose parent is already gone exits at once;
nothing runs in the child between fork and exec (no ``preexec_fn``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from okapikv.lifetime import PARENT_VARIABLE, child_environment

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")

CHILD = "from okapikv.lifetime import exit_with_parent; exit_with_parent(); import time; time.sleep(60)"


def _gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_the_child_ends_when_its_parent_is_killed() -> None:
    parent_code = textwrap.dedent(f"""
        import subprocess, sys
        from okapikv.lifetime import child_environment
        child = subprocess.Popen([sys.executable, "-c", {CHILD!r}], env=child_environment())
        print(child.pid, flush=True)
        import time; time.sleep(60)
    """)
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child_pid = int(parent.stdout.readline())
        time.sleep(1.0)  # the child has asked for the signal by now
        assert not _gone(child_pid, 0.1)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        assert _gone(child_pid, 10), "the child outlived its killed parent"
    finally:
        parent.kill()
        parent.wait(timeout=10)


def test_a_child_whose_parent_is_already_gone_exits_at_once() -> None:
    environment = {**os.environ, PARENT_VARIABLE: "1"}  # not this child's parent
    started = time.monotonic()
    completed = subprocess.run([sys.executable, "-c", CHILD], env=environment, timeout=30)
    assert completed.returncode == 1 and time.monotonic() - started < 20


def test_the_environment_names_this_process() -> None:
    assert child_environment({"A": "b"}) == {"A": "b", PARENT_VARIABLE: str(os.getpid())}
