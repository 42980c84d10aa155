"""What a checker returns: named, explained anomalies that point at the operations involved."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Anomaly:
    """One violation found in a history.

    ``name`` is the pattern (``WriteCORead``, ``FracturedRead``, ``NotLinearizable``...),
    ``checker`` the checker that found it, ``operations`` the ids of the operations involved
    (the offending read or write first), ``explanation`` a sentence a person can act on.
    """

    name: str
    checker: str
    explanation: str
    operations: tuple[int, ...] = ()
    key: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "checker": self.checker,
            "key": self.key,
            "operations": list(self.operations),
            "explanation": self.explanation,
        }

    def __str__(self) -> str:
        where = f" key {self.key}" if self.key is not None else ""
        return f"[{self.checker}] {self.name}{where}: {self.explanation}"
