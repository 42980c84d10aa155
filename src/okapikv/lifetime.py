"""Child processes that end with the process that started them (Linux ``PR_SET_PDEATHSIG``).

Local clusters (``okapi up``, the benchmarks, the fuzzer, the tests) start one ``okapi server``
process per partition server; a launcher killed with SIGKILL must not leave them running, holding
ports and CPU. The kernel can send a child a signal when its parent dies, but the child must ask for
it itself. Asking between ``fork`` and ``exec`` (``subprocess.Popen(preexec_fn=...)``) runs Python
code in the child of a process that may hold other threads (gRPC's, asyncio's executors): a lock
one of them held at the fork stays held forever in the child, and loading a library there
(``ctypes.CDLL``) can abort it. So the child asks at its own start instead: the launcher puts its
pid in ``OKAPI_EXIT_WITH_PARENT`` (``child_environment``) and the child calls ``exit_with_parent()``
first thing, which also catches a parent that died before the request was made (the child has been
re-parented by then, so ``getppid()`` no longer names it).

For programs that are not okapikv's (redis-server) ``preexec_exit_with_parent`` does the request
between fork and exec with a ``prctl`` resolved in the parent, so the child runs no import and
loads no library.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from collections.abc import Callable, Mapping

PARENT_VARIABLE = "OKAPI_EXIT_WITH_PARENT"
_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
        return prctl
    except (OSError, AttributeError):
        return None


_prctl = _load_prctl()


def child_environment(environment: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environment`` (default: this process's) for a child that must end with this process."""
    child = dict(os.environ if environment is None else environment)
    child[PARENT_VARIABLE] = str(os.getpid())
    return child


def exit_with_parent() -> None:
    """At the start of a child made with ``child_environment``: ask for SIGTERM when the parent
    dies, and exit at once if it already has. Does nothing without the variable or off Linux."""
    parent = os.environ.pop(PARENT_VARIABLE, None)
    if parent is None or _prctl is None:
        return
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    with contextlib.suppress(ValueError):
        if os.getppid() != int(parent):
            raise SystemExit(1)  # the parent died before the request: nobody will stop this process


def preexec_exit_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """``preexec_fn`` for a program that cannot call ``exit_with_parent`` itself."""
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
