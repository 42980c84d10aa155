"""The ``[reads]`` section of the cluster config: the bounds on snapshot reads (RO-TX, SCAN).

Every field is optional; the defaults are the core's (``okapikv.core.config.CoreConfig``), times
here in ms. docs/operations.md ("Read limits and paging") says what each one bounds, what clients
see when it is reached and what to alert on::

    [reads]
    max_scan_items = 4096         # pairs per SCAN reply (a page)
    max_scan_bytes = 4194304      # bytes of keys and values per page (unset: what the message limit leaves)
    max_read_keys = 10000         # keys per RO-TX
    max_concurrent_reads = 128    # snapshot reads one server coordinates at once
    max_read_items = 32768        # ... counting their keys (RO-TX) and pair caps (SCAN pages) together
    max_snapshot_retries = 3      # fresh snapshots after a slice came back too old
    read_timeout_ms = 5000        # a partition that owes a slice and says nothing this long: the read fails
    read_deadline_ms = 30000      # a read older than this fails
    snapshot_lease_ms = 5000      # a paged SCAN's snapshot stays readable this long after each page
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from okapikv.core.config import CoreConfig

_CORE_DEFAULTS: dict[str, Any] = {item.name: item.default for item in dataclasses.fields(CoreConfig)}
#: A page's byte budget when the config sets none and the message limit leaves room for it.
DEFAULT_SCAN_BYTES: int = _CORE_DEFAULTS["max_scan_bytes"]


@dataclass(frozen=True, slots=True)
class ReadLimits:
    """The bounds every server of a cluster applies to snapshot reads. ``max_scan_bytes`` unset (None)
    is ``DEFAULT_SCAN_BYTES`` or what the message limit leaves beside one largest pair, whichever is
    less (``scan_bytes``)."""

    max_scan_items: int = _CORE_DEFAULTS["max_scan_items"]
    max_scan_bytes: int | None = None
    max_read_keys: int = _CORE_DEFAULTS["max_read_keys"]
    max_concurrent_reads: int = _CORE_DEFAULTS["max_concurrent_reads"]
    max_read_items: int = _CORE_DEFAULTS["max_read_items"]
    max_snapshot_retries: int = _CORE_DEFAULTS["max_snapshot_retries"]
    read_timeout_ms: float = _CORE_DEFAULTS["read_timeout_us"] / 1000
    read_deadline_ms: float = _CORE_DEFAULTS["read_deadline_us"] / 1000
    snapshot_lease_ms: float = _CORE_DEFAULTS["snapshot_lease_us"] / 1000

    def scan_bytes(self, room: int) -> int:
        """The byte budget of a page, ``room`` being what the message limit leaves beside one
        largest pair (a page may exceed its budget by one pair)."""
        if self.max_scan_bytes is not None:
            return self.max_scan_bytes
        return max(1, min(DEFAULT_SCAN_BYTES, room))

    def core_fields(self, room: int) -> dict[str, Any]:
        """The ``CoreConfig`` fields these set (``room`` as for ``scan_bytes``)."""
        fields: dict[str, Any] = {}
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            if item.name.endswith("_ms"):
                fields[item.name.removesuffix("_ms") + "_us"] = round(value * 1000)
            else:
                fields[item.name] = value
        fields["max_scan_bytes"] = self.scan_bytes(room)
        return fields

    def problems(self, room: int) -> list[str]:
        """What is wrong with these limits (each as ``reads.NAME ...``), as the core checks them, and
        a set ``max_scan_bytes`` that leaves no ``room`` for one pair more; [] if nothing."""
        try:
            CoreConfig(dc=0, partition=0, num_dcs=1, num_partitions=1, **self.core_fields(room))
        except ValueError as error:
            return [f"reads: {str(error).removeprefix('invalid server configuration: ')}"]
        if self.max_scan_bytes is not None and self.max_scan_bytes > room:
            return [f"reads.max_scan_bytes ({self.max_scan_bytes}) leaves no room in max_message_bytes for the one "
                    f"pair a page may add to it (at most {room} bytes with these key, value and message limits)"]
        return []

    def changed(self) -> dict[str, Any]:
        """The fields that differ from the defaults (what a config file needs to say)."""
        default = ReadLimits()
        return {item.name: getattr(self, item.name) for item in dataclasses.fields(self)
                if getattr(self, item.name) != getattr(default, item.name)}

    @classmethod
    def from_dict(cls, data: object) -> ReadLimits:
        if not isinstance(data, Mapping):
            raise ValueError("reads must be a table ([reads])")
        names = {item.name for item in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"reads: unknown setting(s) {', '.join(unknown)}")
        values: dict[str, Any] = {}
        for name, value in data.items():
            if name.endswith("_ms"):
                if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                    raise ValueError(f"reads.{name} must be a finite number of ms, not {value!r}")
                values[name] = float(value)
            else:
                if isinstance(value, bool) or not isinstance(value, int):
                    raise ValueError(f"reads.{name} must be an integer, not {value!r}")
                values[name] = value
        return cls(**values)
