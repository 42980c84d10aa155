"""The simulator's membership fault: a DC lost, removed, and brought back (docs/protocol.md,
"Membership"), as `okapi dc remove` and `okapi dc add` do it on a real cluster.

``lose_dc`` kills every server of a DC, and a little later a server of another DC adopts the next
epoch with that DC removed (a ``MembershipUpdate`` delivered to it, which it passes on as the admin
RPC's change would be). After the fault's length (or at the heal) the DC's servers come back on
empty disks in repair mode (``okapi server --repair``), keeping the versions of their own DC that
no survivor holds (``Repair.salvaged``: in the simulator the disk survives, so a write the DC
acknowledged and never sent is not lost; a real region lost with its disks loses those, which the
checkers would rightly report); the DC becomes joining, and once every server counts it and none
repairs, a member. Only one DC is lost at a time, and only while every server is up: a crash or a
disk loss elsewhere at the same time could lose what no repair brings back.

A new DC (``SimConfig.new_dc``, ``okapi dc join`` on a real cluster; ``okapikv.core.growth``): the
world's last DC is *unborn* (its servers down from the start, the others a cluster of one DC fewer)
until ``add_dc``: its servers start empty, repairing, knowing the grown membership (the others' with
one more DC, joining), and a server of another DC adopts that membership and floods it, growing every
server it reaches. Then as for a re-add: joining until every server counts it, then a member; its
clients start only then (``hold``), as a region's clients are sent there only once it serves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from okapikv.core.catchup import Repair
from okapikv.core.membership import JOINING, MEMBER, REMOVED, MembershipError
from okapikv.core.messages import MembershipUpdate
from okapikv.core.mvstore import Version
from okapikv.core.server import PartitionServer
from okapikv.sim.world import World


def own_versions(server: PartitionServer) -> tuple[tuple[bytes, Version], ...]:
    """The versions of ``server``'s own DC in its store: what a repair keeps of them (``Repair``)."""
    store = server.store
    return tuple((key, version) for key in list(store.keys()) for version in store.versions(key)
                 if version.source_dc == server.dc)


#: How long after the kill the DC is removed (an operator's reaction, shortened to the sim's scale).
REMOVE_AFTER_US = 20_000
#: How often the re-add looks whether every server counts the joining DC.
POLL_US = 10_000


class DcLoss:
    """One DC lost at a time, removed, and brought back (module docstring)."""

    def __init__(self, world: World, *, on_done: Callable[[], None] = lambda: None, unborn: int | None = None) -> None:
        self.world = world
        self.lost: int | None = None  # the DC lost or joining, until it is a member again
        self.on_done = on_done
        #: the new DC not added yet (``add_dc``); its servers are down until then
        self.unborn = unborn
        #: told when the new DC becomes a member (its clients start)
        self.on_born: Callable[[], None] = lambda: None

    def _quiet(self) -> bool:
        """No DC lost or joining, and every server up and not repairing (a change may start)."""
        world = self.world
        return self.lost is None and world.num_dcs >= 2 and not any(world.down) and not any(world.paused) and not any(
            server.repairing is not None for server in world.servers)

    def add_dc(self) -> bool:
        """The new DC joins (module docstring); False when it cannot now (another change, a server
        down, paused or repairing elsewhere: it would hold the growth up), to be tried again."""
        dc = self.unborn
        world = self.world
        if dc is None:
            return True
        mine = self._servers(dc)
        born = [index for index in range(len(world.servers)) if index not in mine and not self._gone(index)]
        if self.lost is not None or any(world.down[index] or world.paused[index] for index in born) or any(
                world.servers[index].repairing is not None for index in born):
            return False
        self.unborn = None
        self.lost = dc
        current = max((world.servers[index].membership for index in born), key=lambda membership: membership.key)
        view = current.with_new_dc()
        if len(view.states) != dc + 1:
            raise ValueError(f"dc{dc} is not the next DC of a membership of {len(current.states)}")
        template = world.servers[born[0]].config
        for index in mine:
            server = world.factory(replace(template, dc=dc, partition=index % world.num_partitions, num_dcs=dc + 1))
            server.members.restore(view)
            world.note(f"start {world.name(index)}, new, on an empty disk, repairing")
            world.restart(index, server=server, repair=Repair(()))
        at = born[0]
        world.note(f"membership epoch {view.epoch}: dc{dc} joins the cluster (at {world.name(at)})")
        world.deliver(at, MembershipUpdate(world.servers[at].id, view.epoch, view.states))
        world.at(world.now + POLL_US, lambda: self._poll(at, dc))
        return True

    def _servers(self, dc: int) -> list[int]:
        partitions = self.world.num_partitions
        return [dc * partitions + partition for partition in range(partitions)]

    def strike(self, dc: int, remover: int) -> Callable[[], None] | None:
        """Kill DC ``dc`` and schedule its removal at a server of another DC (``remover`` picks
        which); returns how to bring it back, or None when the fault cannot strike now."""
        world = self.world
        if self.unborn is not None or not self._quiet():
            return None
        self.lost = dc
        world.note(f"lose dc{dc}: every server killed")
        for index in self._servers(dc):
            world.crash(index)
        others = [index for index in range(len(world.servers)) if index // world.num_partitions != dc]
        at = others[remover % len(others)]
        world.at(world.now + REMOVE_AFTER_US, lambda: self._change(at, dc, REMOVED))
        return self.bring_back

    def _change(self, index: int, dc: int, state: str) -> None:
        world = self.world
        server = world.servers[index]
        # from the newest membership a live server holds, as `okapi dc` takes it
        current = max((other.membership for number, other in enumerate(world.servers) if not world.down[number]),
                      key=lambda membership: membership.key)
        if world.down[index] or current.states[dc] == state:
            return
        try:
            view = current.with_state(dc, state)
        except MembershipError:
            return
        world.note(f"membership epoch {view.epoch}: dc{dc} {state} (at {world.name(index)})")
        world.deliver(index, MembershipUpdate(server.id, view.epoch, view.states))

    def _serving(self, dc: int) -> None:
        """Tell ``on_born`` once every server of ``dc`` serves (the member epoch reached it)."""
        world = self.world
        if all(world.servers[index].members.serving for index in self._servers(dc)):
            self.on_born()
            return
        world.at(world.now + POLL_US, lambda: self._serving(dc))

    def bring_back(self) -> None:
        """The lost DC's servers restart on empty disks, repairing; the DC joins, then is a member."""
        dc = self.lost
        if dc is None:
            return
        world = self.world
        for index in self._servers(dc):
            world.note(f"restart {world.name(index)} on an empty disk, repairing")
            world.restart(index, repair=Repair(own_versions(world.servers[index])))
        survivor = next(index for index in range(len(world.servers)) if index // world.num_partitions != dc)
        self._change(survivor, dc, REMOVED)  # in case the removal had not happened yet
        self._change(survivor, dc, JOINING)
        world.at(world.now + POLL_US, lambda: self._poll(survivor, dc))

    def _gone(self, index: int) -> bool:
        """Whether server ``index`` is down in a DC removed from the membership (it plays no part)."""
        world = self.world
        if not world.down[index]:
            return False
        current = max((server.membership for number, server in enumerate(world.servers) if not world.down[number]),
                      key=lambda membership: membership.key)
        dc = index // world.num_partitions
        return dc < len(current.states) and current.states[dc] == REMOVED

    def _poll(self, survivor: int, dc: int) -> None:
        world = self.world
        if all(dc in server.counted and server.repairing is None
               for index, server in enumerate(world.servers) if not self._gone(index)):
            self._change(survivor, dc, MEMBER)
            self.lost = None
            self.on_done()
            self._serving(dc)
            return
        world.at(world.now + POLL_US, lambda: self._poll(survivor, dc))
