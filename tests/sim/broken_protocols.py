"""Deliberately broken protocol variants, registered only by the tests that import this module.

``okapi-eager``: Okapi whose remote versions are visible as soon as they arrive, to GETs and to
snapshots, without waiting for the USV to cover them (no stabilization gate). A reader can then see
an update before its causal dependencies from other partitions have arrived: the simulator's
checkers must catch it within a few seeds.
"""

from __future__ import annotations

from okapikv.core.mvstore import Version
from okapikv.core.protocols.base import register
from okapikv.core.protocols.okapi import Okapi
from okapikv.core.vectors import Vector


@register
class EagerOkapi(Okapi):
    name = "okapi-eager"

    def visible(self, version: Version, stable: Vector) -> bool:
        return True

    def visible_in_snapshot(self, version: Version, snapshot: Vector) -> bool:
        if version.source_dc != self.dc:
            return True
        return super().visible_in_snapshot(version, snapshot)
