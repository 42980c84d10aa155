"""The ``[connections]`` section of the cluster config: link liveness, TCP timeouts, input budgets.

Every field is optional; docs/operations.md ("Connections: budgets, timeouts and link liveness")
says what each one guards against, what the log says when it fires and what to alert on::

    [connections]
    link_probe_ms = 1000            # a peer link silent this long sends a probe
    link_ack_timeout_ms = 4000      # ... and waiting this long for any answer: dead, reconnect
    tcp_keepalive_ms = 5000         # TCP keepalive idle time and probe interval (every socket)
    tcp_user_timeout_ms = 15000     # TCP_USER_TIMEOUT: unacknowledged data this long: reset
    input_budget_bytes = 134217728  # partially received frames, all connections of a server
    frame_timeout_ms = 20000        # a frame begun must be complete within this
    first_frame_timeout_ms = 10000  # a new connection must complete a frame within this
    idle_timeout_ms = 3600000       # a connection that sends nothing this long is closed (0: never)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Twice the default message limit (64 MiB): one largest frame always fits, with room for a second.
DEFAULT_INPUT_BUDGET_BYTES = 128 << 20


@dataclass(frozen=True, slots=True)
class ConnectionSettings:
    """Timeouts (ms) and the input budget (bytes) every server of a cluster applies."""

    link_probe_ms: float = 1000.0
    link_ack_timeout_ms: float = 4000.0
    tcp_keepalive_ms: float = 5000.0
    tcp_user_timeout_ms: float = 15000.0
    input_budget_bytes: int = DEFAULT_INPUT_BUDGET_BYTES
    frame_timeout_ms: float = 20000.0
    first_frame_timeout_ms: float = 10000.0
    idle_timeout_ms: float = 3_600_000.0

    def problems(self, max_message_bytes: int) -> list[str]:
        """What is wrong with these settings (each as ``connections.NAME ...``); [] if nothing."""
        found: list[str] = []
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            if item.name == "input_budget_bytes":
                if value < max_message_bytes:
                    found.append(f"connections.input_budget_bytes ({value}) must be at least max_message_bytes "
                                 f"({max_message_bytes}): a largest frame must fit")
            elif not math.isfinite(value) or value < 0 or (value == 0 and item.name != "idle_timeout_ms"):
                found.append(f"connections.{item.name} must be a positive number of ms, not {value}")
        if not found and self.link_ack_timeout_ms <= self.link_probe_ms:
            found.append(f"connections.link_ack_timeout_ms ({self.link_ack_timeout_ms}) must exceed "
                         f"connections.link_probe_ms ({self.link_probe_ms}): a probe needs time to be answered")
        return found

    def changed(self) -> dict[str, Any]:
        """The fields that differ from the defaults (what a config file needs to say)."""
        default = ConnectionSettings()
        return {item.name: getattr(self, item.name) for item in dataclasses.fields(self)
                if getattr(self, item.name) != getattr(default, item.name)}

    @classmethod
    def from_dict(cls, data: object) -> ConnectionSettings:
        if not isinstance(data, Mapping):
            raise ValueError("connections must be a table ([connections])")
        names = {item.name: item for item in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise ValueError(f"connections: unknown setting(s) {', '.join(unknown)}")
        values: dict[str, Any] = {}
        for name, value in data.items():
            if name == "input_budget_bytes":
                if isinstance(value, bool) or not isinstance(value, int):
                    raise ValueError(f"connections.input_budget_bytes must be an integer, not {value!r}")
                values[name] = value
            else:
                if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                    raise ValueError(f"connections.{name} must be a finite number of ms, not {value!r}")
                values[name] = float(value)
        return cls(**values)
