"""The simulator's clients (``okapikv.sim.clients``): what they do when a request is lost."""

from __future__ import annotations

from okapikv.sim import SimConfig, Simulation
from okapikv.sim.clients import CLIENT_RETRY_US, Client
from okapikv.sim.events import DELIVER
from okapikv.sim.world import START_US


def one_request_in_flight() -> tuple[Simulation, Client]:
    """One DC, one partition, one client, stopped while its first request is on its way."""
    simulation = Simulation(SimConfig(num_dcs=1, num_partitions=1, num_clients=1, duration_s=0.5))
    world, client = simulation.world, simulation.clients.clients[0]
    world.start()
    simulation.clients.start(START_US)
    world.run_until(lambda: client.request is not None and client.request.request_id in world.pending)
    return simulation, client


def test_a_request_lost_with_its_server_is_resent_until_the_server_is_back_and_runs_once() -> None:
    simulation, client = one_request_in_flight()
    world = simulation.world
    request, crashed_at = client.request, world.now
    world.crash(0)
    assert [(at, payload) for at, _, _, _, payload in world.scheduled(DELIVER, 0)] == [
        (crashed_at + CLIENT_RETRY_US, request)]
    world.run(crashed_at + 3 * CLIENT_RETRY_US)  # each resend reaches a crashed server: sent again
    assert [at for at, _, _, _, _ in world.scheduled(DELIVER, 0)] == [crashed_at + 4 * CLIENT_RETRY_US]
    assert client.lost_since == crashed_at and client.request is request
    world.restart(0)
    world.run_until(lambda: client.request is not request)
    assert simulation.clients.completed["ok"] == 1 and simulation.invariants.anomalies == []


def test_a_client_with_no_other_dc_to_adopt_its_session_keeps_retrying_at_home() -> None:
    simulation, client = one_request_in_flight()
    world = simulation.world
    world.crash(0)
    world.run(world.now + 10 * CLIENT_RETRY_US)  # far past failover_after_ms: no other DC to go to
    assert client.dc == 0 and simulation.clients.failovers == 0 and world.scheduled(DELIVER, 0)


def test_every_scan_and_read_only_transaction_goes_to_the_clients_own_server() -> None:
    """The session's server coordinates (docs/design.md, "Who coordinates a snapshot read"), as in
    the real clients: client i of DC i % dcs always sends its RO-TXs and SCANs to partition
    (i // dcs) % partitions of its DC, and the clients cover every partition."""
    config = SimConfig(num_dcs=2, num_partitions=3, num_clients=12, duration_s=0.05)
    result = Simulation(config).run()
    assert result.history is not None
    reads = [op for op in result.history.operations if op.f in ("rotx", "scan") and not op.final]
    assert reads
    homes = set()
    for op in reads:
        index = int(op.process[1:])
        assert op.server == (index % 2, index // 2 % 3), op.describe()
        homes.add(op.server)
    assert homes == {(dc, partition) for dc in range(2) for partition in range(3)}
