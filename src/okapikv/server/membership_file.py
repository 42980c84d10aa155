"""The membership a durable server keeps (docs/protocol.md, "Membership"): ``membership.json`` in
its data directory, written whole (a temporary file, fsync, rename, fsync of the directory) each
time the server adopts a change, before the change's effects leave. Why a file of its own: it
changes a few times in a cluster's life, and a restarted server must come back in the epoch it
left (a removed DC that counted again after a restart would hold the minima back once more).

A missing file is the initial membership (every DC a member, epoch 0); an unreadable one stops
the start with a clear error rather than guessing.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from okapikv.core.membership import JOINING, Membership, MembershipError

log = logging.getLogger("okapikv.server")

FILE_NAME = "membership.json"


def load(directory: Path, num_dcs: int) -> Membership:
    path = directory / FILE_NAME
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Membership.initial(num_dcs)
    except (OSError, ValueError) as error:
        raise ValueError(f"cannot read the membership in {path}: {error}") from None
    try:
        view = Membership(int(document["epoch"]), tuple(str(state) for state in document["states"]))
    except (KeyError, TypeError, ValueError, MembershipError) as error:
        raise ValueError(f"cannot read the membership in {path}: {error}") from None
    if len(view.states) > num_dcs:
        raise ValueError(f"the membership in {path} names {len(view.states)} DCs, the config {num_dcs}: start the "
                         "server with the config that names every DC of the cluster (okapi dc join)")
    # written under a shorter DC list (``okapikv.core.growth``): the new DCs are joining until a
    # replica tells this server a newer membership
    return Membership(view.epoch, view.states + (JOINING,) * (num_dcs - len(view.states)))


def save(directory: Path, view: Membership) -> None:
    path = directory / FILE_NAME
    temporary = path.with_suffix(".tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump({"epoch": view.epoch, "states": list(view.states)}, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def adopted(directory: Path | None, before: Membership, view: Membership, names: Sequence[str], label: str) -> None:
    """Server ``label`` adopted ``view``: keep it in ``directory`` (None: in memory) and log the change."""
    if directory is not None:
        save(directory, view)
    previous = before.states + ("new",) * (len(view.states) - len(before.states))  # added DCs start "new"
    changes = ", ".join(f"{names[dc]} {old} -> {new}"
                        for dc, (old, new) in enumerate(zip(previous, view.states, strict=True)) if old != new)
    log.warning("%s: membership epoch %d -> %d: %s", label, before.epoch, view.epoch, changes or "no change",
                extra={"event": "membership_changed", "epoch": view.epoch,
                       "dc_states": dict(zip(names, view.states, strict=True))})


def auto_removed(removed: tuple[int, int], names: Sequence[str], label: str) -> None:
    """Server ``label``'s failure detector proposed removing DC ``removed[0]``, silent for
    ``removed[1]`` µs (``okapikv.core.detector``); the membership change itself is logged by ``adopted``."""
    dc, silent_us = removed
    log.warning("%s: failure detector: nothing heard from DC %s for %.1f s (auto_remove_after_s); removing it",
                label, names[dc], silent_us / 1e6,
                extra={"event": "dc_auto_removed", "dc": names[dc], "silent_s": round(silent_us / 1e6, 3)})
