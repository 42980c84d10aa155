"""``Version``: one version of a key, the unit the multi-version store (``okapikv.core.mvstore``) holds.

It has a module of its own because it stays a Python class in the compiled build
(``scripts/build_compiled.py`` leaves this module out): ``Version(...)`` returns an instance of a
subclass made at run time per source DC (the memory saving its docstring states), and mypyc's
classes cannot be subclassed at run time. ``okapikv.core.mvstore`` re-exports it.
"""

from __future__ import annotations

from okapikv.core.vectors import Vector


class Version:
    """One version of a key. ``value is None`` marks a tombstone. ``dv`` is the version's dependency
    vector; ``None`` means it depends on nothing but its own timestamp at its source DC (the vector
    that is 0 except ``dv[source_dc] = timestamp``): remote versions under Okapi and GentleRain, and
    every version whose writer depended on nothing remote (every version of a 1-DC cluster).

    ``Version(value, timestamp, source_dc, dv)`` returns an instance of a subclass made per source DC
    and per "has a dv": ``source_dc`` (and a ``None`` dv) are class attributes there, so the common
    version stores two slots, not four. An object with two slots takes 48 bytes (GC header, object
    header, two pointers) against 64 with four: 261 -> 245 B/key with 1M 8-byte keys and values
    (``okapi bench --workload memory``). Versions are never changed after they are made.
    """

    __slots__ = ()
    value: bytes | None
    timestamp: int
    source_dc: int
    dv: Vector | None

    def __new__(cls, value: bytes | None, timestamp: int, source_dc: int, dv: Vector | None) -> Version:
        kind = _VERSION_CLASSES.get((source_dc, dv is not None)) or _version_class(source_dc, dv is not None)
        version = object.__new__(kind)
        # The slots live in the subclass; mypy only sees the base's empty __slots__.
        version.value = value  # type: ignore[misc]
        version.timestamp = timestamp  # type: ignore[misc]
        if dv is not None:
            version.dv = dv  # type: ignore[misc]
        return version

    @property
    def order(self) -> tuple[int, int]:
        return (self.timestamp, self.source_dc)

    def dependency_vector(self, num_dcs: int) -> Vector:
        """``dv``, or the vector its ``None`` stands for."""
        if self.dv is not None:
            return self.dv
        vector = [0] * num_dcs
        vector[self.source_dc] = self.timestamp
        return tuple(vector)

    def __reduce__(self) -> tuple[type[Version], tuple[bytes | None, int, int, Vector | None]]:
        return (Version, (self.value, self.timestamp, self.source_dc, self.dv))

    def __repr__(self) -> str:
        return f"Version({self.value!r}, ts={self.timestamp}, dc={self.source_dc}, dv={self.dv})"


_VERSION_CLASSES: dict[tuple[int, bool], type[Version]] = {}


def _version_class(source_dc: int, has_dv: bool) -> type[Version]:
    """The ``Version`` subclass of one source DC, with or without a ``dv`` slot (made once)."""
    if source_dc < 0:
        raise ValueError(f"a source DC index is never negative, not {source_dc}")
    namespace: dict[str, object] = {"source_dc": source_dc}
    if has_dv:
        namespace["__slots__"] = ("value", "timestamp", "dv")
    else:
        namespace["__slots__"] = ("value", "timestamp")
        namespace["dv"] = None
    kind = type(f"Version_dc{source_dc}{'_dv' if has_dv else ''}", (Version,), namespace)
    _VERSION_CLASSES[(source_dc, has_dv)] = kind
    return kind
