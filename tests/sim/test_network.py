"""The simulated network (``okapikv.sim.network``): FIFO links, delays, cuts, resends, the ledger."""

from __future__ import annotations

import random

from okapikv.core.messages import Heartbeat, Message, ReplicateBatch, ServerId, Update
from okapikv.sim.events import DELIVER, Events
from okapikv.sim.network import Network

PARTITIONS = 2  # servers 0, 1 in DC 0; 2, 3 in DC 1; 4, 5 in DC 2
WAN_US = [[0, 30_000, 60_000], [30_000, 0, 40_000], [60_000, 40_000, 0]]


def network(*, jitter: float = 0.05, jitter_us: float = 2_000, extra: int = 0,
            rng: random.Random | None = None) -> Network:
    servers = 3 * PARTITIONS
    link_extra = [extra if src // PARTITIONS != dst // PARTITIONS else 0
                  for src in range(servers) for dst in range(servers)]
    return Network(Events(1_000_000), [False] * servers, PARTITIONS, wan_us=WAN_US, lan_us=(100, 500),
                   client_us=(100, 500), jitter=jitter, jitter_us=jitter_us, link_extra=link_extra,
                   random=(rng or random.Random(7)).random)


def heartbeat(source: int, number: int) -> Heartbeat:
    return Heartbeat(ServerId(source // PARTITIONS, source % PARTITIONS), number)


def batch(source: int, *timestamps: int) -> ReplicateBatch:
    sid = ServerId(source // PARTITIONS, source % PARTITIONS)
    return ReplicateBatch(sid, tuple(Update(b"k", b"v", t, sid.dc, None) for t in timestamps))


def arrivals(net: Network, destination: int) -> list[tuple[int, Message]]:
    """What is on its way to ``destination``, in delivery order."""
    return [(at, payload) for at, _, kind, target, payload in sorted(net.events.heap)  # type: ignore[misc]
            if kind == DELIVER and target == destination]


def numbers(delivered: list[tuple[int, Message]]) -> list[int]:
    return [message.timestamp for _, message in delivered if isinstance(message, Heartbeat)]


def test_a_link_is_fifo_however_the_delays_are_drawn() -> None:
    net = network(jitter=1.0, jitter_us=20_000)
    for number in range(200):
        net.send(0, 4, heartbeat(0, number))  # DC 0 -> DC 2: 60 ms, up to twice that with jitter
        net.send(0, 1, heartbeat(0, number))  # inside DC 0
    far, near = arrivals(net, 4), arrivals(net, 1)
    assert numbers(far) == list(range(200)) and numbers(near) == list(range(200))
    now = net.events.now
    assert all(now + 60_000 <= at <= now + 2 * 60_000 + 20_000 for at, _ in far)
    assert all(now + 100 <= at for at, _ in near)


def test_delays_are_the_matrix_plus_jitter_plus_the_links_extra() -> None:
    net = network(jitter=0.0, jitter_us=0.0, extra=5_000)
    net.send(2, 4, heartbeat(2, 1))  # DC 1 -> DC 2
    [(at, _)] = arrivals(net, 4)
    assert at == net.events.now + 40_000 + 5_000
    assert net.wan_delay(0, 1) == 30_000
    lan = [net.client_delay() for _ in range(1_000)]
    assert min(lan) >= 100 and max(lan) <= 500


def test_a_cut_holds_messages_in_order_and_the_repair_delivers_them() -> None:
    net = network()
    net.cut_link(0, 2)
    for number in range(5):
        net.send(0, 4, heartbeat(0, number))
    net.send(0, 2, heartbeat(0, 99))  # DC 0 -> DC 1 is not cut
    assert len(net.held[4]) == 5 and arrivals(net, 4) == [] and numbers(arrivals(net, 2)) == [99]
    assert not net.link_up(0, 2) and not net.link_up(2, 0) and net.link_up(0, 1)
    net.repair_link(2, 0)
    assert net.held == {} and numbers(arrivals(net, 4)) == [0, 1, 2, 3, 4]


def test_cuts_nest_a_link_is_up_only_once_every_cut_is_repaired() -> None:
    net = network()
    net.cut_dc(1)
    net.cut_link(0, 1)
    net.send(0, 2, heartbeat(0, 1))
    net.repair_dc(1)
    assert net.held and not net.link_up(0, 1) and net.link_up(1, 2)
    net.repair_link(0, 1)
    assert not net.held and numbers(arrivals(net, 2)) == [1]


def test_messages_for_a_crashed_server_wait_in_their_senders_links_and_are_resent_first() -> None:
    net = network()
    net.down[1] = net.down[2] = True
    for number in range(3):
        net.send(0, 1, heartbeat(0, number))  # inside the DC
        net.send(0, 2, heartbeat(0, number))  # across DCs
    net.keep_for(2, ServerId(0, 0), heartbeat(0, 3))  # one that was in flight to it
    assert arrivals(net, 1) == arrivals(net, 2) == []
    assert numbers([(0, m) for m in net.unacked[2][0]]) == [0, 1, 2, 3]
    net.down[1] = net.down[2] = False
    for destination in (1, 2):
        tail, net.unacked[destination] = net.unacked[destination][0], {}
        net.resend(0, destination, tail)
    net.send(0, 2, heartbeat(0, 4))  # sent after the restart: arrives after the resent tail
    assert numbers(arrivals(net, 1)) == [0, 1, 2] and numbers(arrivals(net, 2)) == [0, 1, 2, 3, 4]


def test_a_resend_on_a_cut_link_goes_ahead_of_what_the_link_holds() -> None:
    net = network()
    net.cut_link(0, 1)
    net.send(0, 2, heartbeat(0, 5))
    net.resend(0, 2, [heartbeat(0, 3), heartbeat(0, 4)])
    assert numbers([(0, m) for m in net.held[2]]) == [3, 4, 5]


def test_the_ledger_counts_batches_in_flight_with_their_first_new_timestamp() -> None:
    net = network()
    net.send(0, 2, batch(0, 10, 11))
    net.send(0, 2, batch(0, 9, 11, 12))  # a catch-up answer: 9 and 11 went before; 12 is new
    net.send(0, 2, batch(0, 8))  # nothing new
    assert list(net.inflight[2]) == [10, 12, 1 << 62] and net.replication_inflight == 3 and not net.quiet()
    for message in (m for _, m in arrivals(net, 2)):
        assert isinstance(message, ReplicateBatch)
        net.batch_arrived(message, 2)
    assert net.replication_inflight == 0 and net.quiet()


def test_a_crashed_senders_held_queues_die_with_it_and_leave_the_ledger() -> None:
    net = network()
    net.cut_dc(0)
    net.send(0, 2, batch(0, 10))
    net.send(1, 3, batch(1, 20))
    assert net.replication_inflight == 2
    net.drop_queues_from(0)
    assert list(net.held) == [1 * 6 + 3] and net.replication_inflight == 1 and list(net.inflight[2]) == []


def test_it_knows_whether_anything_crossed_dcs() -> None:
    net = network()
    net.send(0, 1, heartbeat(0, 1))
    assert not net.carried_between_dcs()
    net.send(0, 2, heartbeat(0, 1))
    assert net.carried_between_dcs()
