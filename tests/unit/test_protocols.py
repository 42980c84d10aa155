"""Each protocol's rules in isolation (docs/protocol.md; Okapi sections 3.1-3.3 and 5).

The DC of the protocol under test is 1 of 3, so "local" and "remote" entries are both exercised.
"""

from __future__ import annotations

import inspect

import pytest

from okapikv.core.mvstore import Version
from okapikv.core.protocols import Protocol, WaitForStable, create_protocol, protocol_names
from okapikv.core.protocols.eventual import TOP
from okapikv.core.timestamps import LOGICAL_MASK, WaitForClock, pack

LOCAL = 1
M = 3


def make(name: str, num_dcs: int = M) -> Protocol:
    return create_protocol(name, dc=LOCAL, num_dcs=num_dcs)


def local(timestamp: int, dv: tuple[int, ...] | None = None) -> Version:
    return Version(b"local", timestamp, LOCAL, dv)


def remote(timestamp: int, dc: int = 0, dv: tuple[int, ...] | None = None) -> Version:
    return Version(b"remote", timestamp, dc, dv)


class TestRegistry:
    def test_names(self) -> None:
        # Tests may register deliberately broken variants (tests/sim/broken_protocols.py) as well.
        names = protocol_names()
        assert names == sorted(names)
        assert {"cure", "eventual", "gentlerain", "okapi"} <= set(names)

    @pytest.mark.parametrize("name", ["cure", "eventual", "gentlerain", "okapi"])
    def test_create_binds_dc(self, name: str) -> None:
        protocol = make(name)
        assert protocol.name == name
        assert (protocol.dc, protocol.num_dcs) == (LOCAL, M)

    def test_unknown_name(self) -> None:
        with pytest.raises(ValueError, match="unknown protocol 'paxos'; choose one of cure, eventual"):
            create_protocol("paxos", dc=0, num_dcs=1)

    def test_flags(self) -> None:
        assert [make(n).uses_usv for n in ("okapi", "cure", "gentlerain", "eventual")] == [True, False, False, False]
        assert [make(n).stabilizes for n in ("okapi", "cure", "gentlerain", "eventual")] == [True, True, True, False]
        assert make("okapi").raises_clock_on_slice
        assert not make("eventual").raises_clock_on_slice

    @pytest.mark.parametrize("name", ["cure", "eventual", "gentlerain", "okapi"])
    def test_every_hook_takes_keyword_arguments_only(self, name: str) -> None:
        hooks = [attribute for attribute in dir(Protocol)
                 if not attribute.startswith("_") and callable(getattr(Protocol, attribute))]
        assert {"assign_timestamp", "stored_dv", "replicated_dv", "visible", "snapshot", "slice_wait",
                "visible_in_snapshot", "on_stabilized", "snapshot_floor"} <= set(hooks)
        protocol = make(name)
        for hook in hooks:
            parameters = inspect.signature(getattr(protocol, hook)).parameters.values()
            assert all(parameter.kind is inspect.Parameter.KEYWORD_ONLY for parameter in parameters), hook


    @pytest.mark.parametrize("name", ["cure", "eventual", "gentlerain", "okapi"])
    def test_a_local_version_is_visible_whatever_the_stable_vector(self, name: str) -> None:
        """``PartitionServer._visible`` does not ask the protocol about a version of its own DC."""
        protocol = make(name)
        assert protocol.visible(version=local(pack(50), (pack(9),) * M), stable=(0,) * M)


class TestMetadataBytes:
    def test_okapi_and_gentlerain_carry_12_bytes(self) -> None:
        assert make("okapi").update_metadata_bytes() == 12
        assert make("gentlerain").update_metadata_bytes() == 12

    @pytest.mark.parametrize(("num_dcs", "expected"), [(1, 12), (2, 20), (3, 28), (5, 44)])
    def test_cure_carries_its_vector(self, num_dcs: int, expected: int) -> None:
        protocol = create_protocol("cure", dc=0, num_dcs=num_dcs)
        assert protocol.update_metadata_bytes() == 4 + 8 + 8 * (num_dcs - 1) == expected

    def test_okapi_metadata_does_not_grow_with_dcs(self) -> None:
        assert create_protocol("okapi", dc=0, num_dcs=10).update_metadata_bytes() == 12


class TestDependencyVectors:
    def test_okapi_stores_client_vector_with_local_entry_and_replicates_nothing(self) -> None:
        protocol = make("okapi")
        dv = protocol.stored_dv(dependency=(5, 7, 9), timestamp=100)
        assert dv == (5, 100, 9)
        assert protocol.replicated_dv(version=local(100, dv)) is None

    def test_cure_replicates_the_whole_vector(self) -> None:
        protocol = make("cure")
        dv = protocol.stored_dv(dependency=(5, 7, 9), timestamp=100)
        assert dv == (5, 100, 9)
        assert protocol.replicated_dv(version=local(100, dv)) == (5, 100, 9)

    @pytest.mark.parametrize("name", ["okapi", "cure"])
    def test_vector_without_remote_dependencies_is_stored_as_none(self, name: str) -> None:
        # None stands for "0 except the version's own entry": no tuple per version (every version of
        # a 1-DC cluster), and every reader of dv sees the same vector as before.
        protocol = make(name)
        assert protocol.stored_dv(dependency=(0, 7, 0), timestamp=100) is None
        assert protocol.stored_dv(dependency=(0, 7, 1), timestamp=100) == (0, 100, 1)
        assert create_protocol(name, dc=0, num_dcs=1).stored_dv(dependency=(7,), timestamp=100) is None
        version = local(100)
        assert version.dependency_vector(M) == (0, 100, 0)
        assert protocol.visible_in_snapshot(version=version, snapshot=(0, 100, 0))
        assert not protocol.visible_in_snapshot(version=version, snapshot=(0, 99, 5))

    def test_cure_still_replicates_the_vector_stored_as_none(self) -> None:
        # Cure's wire format is unchanged: the elided vector is spelled out for replication.
        protocol = make("cure")
        assert protocol.replicated_dv(version=local(100)) == (0, 100, 0)
        assert protocol.replicated_dv(version=remote(50, dc=2)) == (0, 0, 50)

    @pytest.mark.parametrize("name", ["gentlerain", "eventual"])
    def test_scalar_protocols_store_no_vector(self, name: str) -> None:
        protocol = make(name)
        assert protocol.stored_dv(dependency=(5, 7, 9), timestamp=100) is None
        assert protocol.replicated_dv(version=local(100)) is None


class TestOkapi:
    protocol = make("okapi")

    def test_put_never_waits_on_dependency_ahead(self) -> None:
        assert self.protocol.assign_timestamp(previous=pack(5), max_dependency=pack(10, 2), now_us=6) == pack(10, 3)

    def test_put_never_waits_a_full_logical_counter_carries(self) -> None:
        timestamp = self.protocol.assign_timestamp(previous=pack(5, LOGICAL_MASK), max_dependency=0, now_us=3)
        assert timestamp == pack(6, 0)

    def test_get_sees_local_versions_at_once(self) -> None:
        assert self.protocol.visible(version=local(pack(1000)), stable=(0, 0, 0))

    def test_get_sees_remote_versions_once_universally_stable(self) -> None:
        version = remote(pack(50), dc=2)
        assert not self.protocol.visible(version=version, stable=(0, 0, pack(49)))
        assert self.protocol.visible(version=version, stable=(0, 0, pack(50)))
        assert not self.protocol.visible(version=version, stable=(pack(100), pack(100), 0))  # entry of its own source

    def test_snapshot_is_usv_with_local_entry_lts(self) -> None:
        usv = (pack(7), pack(3), pack(8))
        assert self.protocol.snapshot(stable=usv, dt=0, now_us=20) == (pack(7), pack(20), pack(8))
        assert self.protocol.snapshot(stable=usv, dt=pack(30, 1), now_us=20) == (pack(7), pack(30, 1), pack(8))

    def test_slices_never_wait(self) -> None:
        assert self.protocol.slice_wait(snapshot=(0, pack(10**9), 0), now_us=1) is None

    def test_local_version_in_snapshot_needs_timestamp_and_dependencies(self) -> None:
        version = local(pack(10), dv=(pack(4), pack(10), pack(6)))
        assert self.protocol.visible_in_snapshot(version=version, snapshot=(pack(4), pack(10), pack(6)))
        assert not self.protocol.visible_in_snapshot(version=version, snapshot=(pack(4), pack(9), pack(6)))
        assert not self.protocol.visible_in_snapshot(version=version, snapshot=(pack(3), pack(20), pack(6)))
        assert not self.protocol.visible_in_snapshot(version=version, snapshot=(pack(4), pack(20), pack(5)))

    def test_remote_version_in_snapshot_needs_its_source_entry(self) -> None:
        version = remote(pack(10), dc=0)
        assert self.protocol.visible_in_snapshot(version=version, snapshot=(pack(10), 0, 0))
        assert not self.protocol.visible_in_snapshot(version=version, snapshot=(pack(9), pack(100), pack(100)))

    def test_on_stabilized_follows_usv_and_never_moves_back(self) -> None:
        stable = (5, 5, 5)
        assert self.protocol.on_stabilized(stable=stable, gsv=(9, 9, 9), usv=None) == stable
        assert self.protocol.on_stabilized(stable=stable, gsv=(9, 9, 9), usv=(7, 3, 6)) == (7, 5, 6)

    def test_snapshot_floor_is_stable_with_local_clock(self) -> None:
        assert self.protocol.snapshot_floor(stable=(1, 2, 3), now_us_packed=pack(9)) == (1, pack(9), 3)


class TestCure:
    protocol = make("cure")

    def test_put_waits_for_clock_past_dependencies(self) -> None:
        wait = self.protocol.assign_timestamp(previous=pack(5), max_dependency=pack(10), now_us=6)
        assert wait == WaitForClock(11, "put_dependency")
        assert self.protocol.assign_timestamp(previous=pack(5), max_dependency=pack(10), now_us=11) == pack(11)

    def test_get_sees_local_at_once_and_remote_when_whole_dv_is_stable(self) -> None:
        assert self.protocol.visible(version=local(pack(100), dv=(pack(99), pack(100), pack(99))), stable=(0, 0, 0))
        version = remote(pack(10), dc=0, dv=(pack(10), pack(4), pack(7)))
        assert self.protocol.visible(version=version, stable=(pack(10), pack(4), pack(7)))
        assert not self.protocol.visible(version=version, stable=(pack(10), pack(4), pack(6)))
        assert not self.protocol.visible(version=version, stable=(pack(10), pack(3), pack(7)))

    def test_remote_version_without_dv_uses_its_timestamp(self) -> None:
        version = remote(pack(10), dc=2)
        assert self.protocol.visible(version=version, stable=(0, 0, pack(10)))
        assert not self.protocol.visible(version=version, stable=(pack(99), pack(99), pack(9)))

    def test_snapshot_is_stable_with_local_entry_max_clock_dt(self) -> None:
        stable = (pack(7), pack(3), pack(8))
        assert self.protocol.snapshot(stable=stable, dt=pack(4), now_us=20) == (pack(7), pack(20), pack(8))
        assert self.protocol.snapshot(stable=stable, dt=pack(40), now_us=20) == (pack(7), pack(40), pack(8))

    def test_slice_waits_for_clock_to_reach_local_entry(self) -> None:
        snapshot = (0, pack(40), 0)
        assert self.protocol.slice_wait(snapshot=snapshot, now_us=30) == WaitForClock(40, "tx_clock")
        assert self.protocol.slice_wait(snapshot=snapshot, now_us=40) is None
        assert self.protocol.slice_wait(snapshot=snapshot, now_us=41) is None

    def test_visible_in_snapshot_checks_whole_dv(self) -> None:
        version = local(pack(10), dv=(pack(4), pack(10), pack(6)))
        assert self.protocol.visible_in_snapshot(version=version, snapshot=(pack(4), pack(10), pack(6)))
        assert not self.protocol.visible_in_snapshot(version=version, snapshot=(pack(4), pack(9), pack(6)))
        assert not self.protocol.visible_in_snapshot(version=version, snapshot=(pack(3), pack(10), pack(6)))

    def test_on_stabilized_follows_gsv_and_never_moves_back(self) -> None:
        assert self.protocol.on_stabilized(stable=(5, 5, 5), gsv=(7, 3, 6), usv=None) == (7, 5, 6)
        assert self.protocol.on_stabilized(stable=(5, 5, 5), gsv=(7, 3, 6), usv=(9, 9, 9)) == (7, 5, 6)


class TestGentleRain:
    protocol = make("gentlerain")

    def test_put_waits_for_clock_past_dependency(self) -> None:
        wait = self.protocol.assign_timestamp(previous=pack(5), max_dependency=pack(10), now_us=6)
        assert wait == WaitForClock(11, "put_dependency")

    def test_get_sees_local_at_once_and_remote_below_gst(self) -> None:
        assert self.protocol.visible(version=local(pack(100)), stable=(0, 0, 0))
        version = remote(pack(10), dc=2)
        assert self.protocol.visible(version=version, stable=(pack(10),) * 3)
        assert not self.protocol.visible(version=version, stable=(pack(9),) * 3)
        # GST is the minimum entry, whatever the source
        assert not self.protocol.visible(version=version, stable=(pack(9), pack(50), pack(50)))

    def test_snapshot_is_gst_when_it_covers_dt(self) -> None:
        stable = (pack(10),) * 3
        assert self.protocol.snapshot(stable=stable, dt=pack(10), now_us=99) == stable
        assert self.protocol.snapshot(stable=stable, dt=0, now_us=99) == stable

    def test_snapshot_waits_for_gst_to_reach_dt(self) -> None:
        wait = self.protocol.snapshot(stable=(pack(10),) * 3, dt=pack(11), now_us=99)
        assert wait == WaitForStable(pack(11), "tx_stable")

    def test_slices_never_wait(self) -> None:
        assert self.protocol.slice_wait(snapshot=(pack(10**9),) * 3, now_us=0) is None

    def test_visible_in_snapshot_is_one_scalar(self) -> None:
        snapshot = (pack(10),) * 3
        assert self.protocol.visible_in_snapshot(version=local(pack(10)), snapshot=snapshot)
        assert not self.protocol.visible_in_snapshot(version=local(pack(11)), snapshot=snapshot)
        assert self.protocol.visible_in_snapshot(version=remote(pack(10), dc=2), snapshot=snapshot)
        assert not self.protocol.visible_in_snapshot(version=remote(pack(11), dc=0), snapshot=snapshot)

    def test_on_stabilized_is_gst_everywhere_and_never_moves_back(self) -> None:
        assert self.protocol.on_stabilized(stable=(5, 5, 5), gsv=(7, 9, 8), usv=None) == (7, 7, 7)
        assert self.protocol.on_stabilized(stable=(5, 5, 5), gsv=(7, 3, 8), usv=None) == (5, 5, 5)

    def test_snapshot_floor_is_the_gst(self) -> None:
        assert self.protocol.snapshot_floor(stable=(4, 4, 4), now_us_packed=pack(100)) == (4, 4, 4)
        # Entries above the GST (merged from a session or a slice) are no bound on its snapshots.
        assert self.protocol.snapshot_floor(stable=(4, 9, 6), now_us_packed=pack(100)) == (4, 4, 4)
        floor = self.protocol.snapshot_floor(stable=(4, 9, 6), now_us_packed=pack(100))
        snapshot = self.protocol.snapshot(stable=(4, 9, 6), dt=0, now_us=100)
        assert isinstance(snapshot, tuple)
        assert all(f <= s for f, s in zip(floor, snapshot, strict=True))


class TestEventual:
    protocol = make("eventual")

    def test_put_ignores_dependencies_and_never_waits_below_overflow(self) -> None:
        assert self.protocol.assign_timestamp(previous=pack(5), max_dependency=pack(100), now_us=6) == pack(6)

    def test_everything_is_visible(self) -> None:
        assert self.protocol.visible(version=remote(pack(10**6), dc=0), stable=(0, 0, 0))
        snapshot = self.protocol.snapshot(stable=(0, 0, 0), dt=0, now_us=0)
        assert snapshot == (TOP,) * 3
        assert isinstance(snapshot, tuple)
        assert self.protocol.visible_in_snapshot(version=remote(pack(10**6), dc=2), snapshot=snapshot)

    def test_stabilization_changes_nothing(self) -> None:
        assert self.protocol.on_stabilized(stable=(1, 2, 3), gsv=(9, 9, 9), usv=(9, 9, 9)) == (1, 2, 3)
        assert self.protocol.snapshot_floor(stable=(1, 2, 3), now_us_packed=5) == (TOP,) * 3
