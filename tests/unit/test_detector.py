"""The failure detector's rule (``okapikv.core.detector``) and its place in the host: off by
default, fires once a member DC has been silent for longer than the timeout and not before, at one
deterministic proposer (partition 0 of the lowest-numbered audible member DC, hearing a majority),
and never removes the proposer's own DC or the last member."""

from __future__ import annotations

import dataclasses

import pytest

from okapikv.cluster.config import ClusterConfig, local_cluster
from okapikv.core.config import CoreConfig
from okapikv.core.detector import Detector
from okapikv.core.host import Host
from okapikv.core.membership import JOINING, MEMBER, REMOVED, Membership
from okapikv.core.messages import Heartbeat, ServerId
from okapikv.core.server import PartitionServer

AFTER = 1_000
THREE = Membership.initial(3)


def test_it_is_off_by_default_and_a_timeout_below_three_heartbeats_is_refused() -> None:
    assert CoreConfig(dc=0, partition=0, num_dcs=3, num_partitions=1).auto_remove_after_us == 0
    assert Host(PartitionServer(CoreConfig(dc=0, partition=0, num_dcs=3, num_partitions=1))).detector is None
    with pytest.raises(ValueError, match="auto_remove_after_us must be 0"):
        CoreConfig(dc=0, partition=0, num_dcs=3, num_partitions=1, auto_remove_after_us=2_000)
    with pytest.raises(ValueError, match="auto_remove_after_us must be 0"):
        CoreConfig(dc=0, partition=0, num_dcs=3, num_partitions=1, auto_remove_after_us=-1)


def test_a_silent_dc_is_removed_after_the_timeout_and_not_before() -> None:
    detector = Detector(AFTER)
    here = ServerId(0, 0)
    assert detector.proposal(THREE, here, 0) is None  # every DC is heard when the server first looks
    for now in range(0, 5 * AFTER, 100):
        detector.hear(1, now)  # DC 1 keeps talking; DC 2 says nothing
        if now <= AFTER:
            assert detector.proposal(THREE, here, now) is None, now
    assert detector.proposal(THREE, here, AFTER) is None
    assert detector.proposal(THREE, here, AFTER + 1) == Membership(1, (MEMBER, MEMBER, REMOVED))
    assert detector.silent_for(2, AFTER + 1) == AFTER + 1


def test_only_partition_0_of_the_lowest_audible_member_dc_proposes() -> None:
    def silent_dc(dc: int, here: ServerId) -> Membership | None:
        detector = Detector(AFTER)
        detector.proposal(THREE, here, 0)
        for other in range(3):
            if other != dc:
                detector.hear(other, 2 * AFTER)
        return detector.proposal(THREE, here, 2 * AFTER)

    assert silent_dc(2, ServerId(0, 0)) == Membership(1, (MEMBER, MEMBER, REMOVED))
    assert silent_dc(2, ServerId(0, 1)) is None  # not partition 0
    assert silent_dc(2, ServerId(1, 0)) is None  # DC 0 hears DC 2 is gone too, and proposes
    assert silent_dc(0, ServerId(1, 0)) == Membership(1, (REMOVED, MEMBER, MEMBER))  # the lowest audible
    assert silent_dc(0, ServerId(2, 0)) is None


def test_a_minority_side_and_a_two_dc_cluster_never_remove() -> None:
    detector = Detector(AFTER)  # DC 0 cut off from both others: it hears 1 DC of 3
    detector.proposal(THREE, ServerId(0, 0), 0)
    assert detector.proposal(THREE, ServerId(0, 0), 10 * AFTER) is None
    two = Membership.initial(2)  # either side of a 2-DC partition is 1 of 2: no majority
    for dc in (0, 1):
        detector = Detector(AFTER)
        detector.proposal(two, ServerId(dc, 0), 0)
        assert detector.proposal(two, ServerId(dc, 0), 10 * AFTER) is None


def test_the_proposers_dc_and_the_last_member_stay() -> None:
    alone = Membership(2, (MEMBER, REMOVED, REMOVED))
    detector = Detector(AFTER)
    detector.proposal(alone, ServerId(0, 0), 0)
    assert detector.proposal(alone, ServerId(0, 0), 10 * AFTER) is None
    # a removed or joining DC is not watched; a server of a DC that is not a member proposes nothing
    view = Membership(3, (MEMBER, JOINING, MEMBER))
    detector = Detector(AFTER)
    detector.proposal(view, ServerId(1, 0), 0)
    assert detector.proposal(view, ServerId(1, 0), 10 * AFTER) is None


def test_a_dc_whose_state_changed_is_heard_afresh_from_the_change() -> None:
    detector = Detector(AFTER)
    here = ServerId(0, 0)
    removed = Membership(1, (MEMBER, MEMBER, REMOVED))
    detector.proposal(removed, here, 0)
    detector.hear(1, 5 * AFTER)
    re_added = Membership(2, (MEMBER, MEMBER, MEMBER))
    assert detector.proposal(re_added, here, 5 * AFTER) is None  # DC 2 silent since 0, but a member only now
    detector.hear(1, 6 * AFTER)
    assert detector.proposal(re_added, here, 6 * AFTER) is None
    assert detector.proposal(re_added, here, 6 * AFTER + 1) == Membership(3, (MEMBER, MEMBER, REMOVED))


def test_the_host_hears_every_peer_message_and_proposes_at_the_timer() -> None:
    config = CoreConfig(dc=0, partition=0, num_dcs=3, num_partitions=1, auto_remove_after_us=100_000)
    host: Host[int] = Host(PartitionServer(config))
    host.start()
    start = 1_000_000
    host.timer(start)
    removals = []
    for now in range(start, start + 300_000, 10_000):
        host.handle([Heartbeat(ServerId(1, 0), now)], now)
        outbox = host.timer(now)
        if outbox.removed is not None:
            removals.append(outbox.removed)
            assert outbox.membership == host.core.membership  # the driver keeps it before the effects leave
        if now - start <= 100_000:
            assert outbox.removed is None and host.core.membership.epoch == 0
    assert removals == [(2, 110_000)]
    assert host.core.membership == Membership(1, (MEMBER, MEMBER, REMOVED))
    assert host.core.stats.auto_removals == 1


def test_the_cluster_config_setting_reaches_the_core_and_a_bad_one_is_refused() -> None:
    config = local_cluster(dcs=("a", "b", "c"), partitions=1, wan="off", base_port=45400)
    assert config.auto_remove_after_s == 0.0 and config.core_config("a", 0).auto_remove_after_us == 0
    on = ClusterConfig.from_toml(config.to_toml().replace("auto_remove_after_s = 0.0", "auto_remove_after_s = 600.0"))
    assert on.core_config("b", 0).auto_remove_after_us == 600_000_000
    with pytest.raises(ValueError, match="auto_remove_after_s must be 0 \\(off\\) or at least three heartbeat periods"):
        dataclasses.replace(config, auto_remove_after_s=0.001)
    with pytest.raises(ValueError, match="auto_remove_after_s must be 0"):
        dataclasses.replace(config, auto_remove_after_s=-5.0)


class Disk:
    disk_full = False


def test_a_server_whose_full_disk_refuses_the_other_dcs_judges_nobody() -> None:
    config = CoreConfig(dc=0, partition=0, num_dcs=3, num_partitions=1, auto_remove_after_us=100_000)
    disk = Disk()
    host: Host[int] = Host(PartitionServer(config), space=disk)
    host.start()
    start = 1_000_000
    host.timer(start)
    disk.disk_full = True  # DC 1 and DC 2 are refused at the door: nothing is heard from them
    for now in range(start, start + 500_000, 10_000):
        assert host.timer(now).removed is None
    disk.disk_full = False
    freed = start + 500_000
    for now in range(freed, freed + 200_000, 10_000):
        host.handle([Heartbeat(ServerId(1, 0), now)], now)
        if host.timer(now).removed is not None:
            # the silence counts from the last timer that found the disk full (freed - 10 ms)
            assert now == freed + 100_000
            break
    assert host.core.membership == Membership(1, (MEMBER, MEMBER, REMOVED))
