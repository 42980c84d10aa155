"""The simulator's cost model (``okapikv.sim.cost``, ``okapikv.sim.cpu``): off, runs are as they were;
on, a server's CPU time bounds its throughput, the thread blocking model bounds blocked requests,
and effects still leave in order under faults."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from okapikv.check.history import history_events
from okapikv.core.messages import Heartbeat, PutRequest, ServerId
from okapikv.sim import SimConfig, Simulation, WorkloadMix, run_simulation
from okapikv.sim import cost as cost_module
from okapikv.sim.cost import CostProfile, load_profile, message_bytes, packaged_profile, packaged_profiles
from okapikv.sim.cpu import Cpu
from okapikv.sim.events import DELIVER, Events
from okapikv.sim.network import Network

PUTS = WorkloadMix(get=0, put=1, swap=0, delete=0, scan=0, rotx=0)


def digest(config: SimConfig) -> str:
    result = Simulation(config).run()
    assert result.history is not None
    hasher = hashlib.sha256()
    for event in history_events(result.history):
        hasher.update(json.dumps(event, sort_keys=True).encode())
    hasher.update(repr((sorted(result.messages.items()), result.events, result.simulated_us)).encode())
    return hasher.hexdigest()


#: computed with main's simulator without the cost model (86935f3: same seeds, same configs)
BEFORE = [
    (SimConfig(seed=3, num_dcs=2, num_partitions=2, num_clients=4, duration_s=0.2),
     "a7b42c1919dcaab5870b553b317e283bd0f1b2544001db51b329f35e06d0ce5e"),
    (SimConfig(seed=5, protocol="cure", num_dcs=3, num_partitions=2, num_clients=6, duration_s=0.2, faults=True,
               clock_skew_ms=5),
     "a5b33a52be9fa888a941935a320854a1629a75cb3781d7babc9a36acfcdc5a1f"),
    (SimConfig(seed=2, protocol="gentlerain", num_dcs=2, num_partitions=3, num_clients=6, duration_s=0.2,
               faults=True),
     "50bab20561733d3f8b43f79ad10a3e9287a1bcb43f6bf93a96d6f944571c3eb3"),
]


@pytest.mark.parametrize(("config", "expected"), BEFORE)
def test_with_the_cost_model_off_a_run_is_what_it_was(config: SimConfig, expected: str) -> None:
    assert digest(config) == expected


#: with the cost model on, computed before the CPU queue's wake-ups and the size estimate were made
#: cheaper (c877c1e: same seeds, same configs); the event count is left out, as the idle wake-ups
#: it counted are gone
ON_BEFORE = [
    (SimConfig(seed=4, num_dcs=3, num_partitions=2, num_clients=24, duration_s=0.15, think_us_max=0,
               cost=packaged_profile("python-quiet")),
     "383e304cc2b68633909eb9523df5da2bd436836512f01995e613d691eda0a01f"),
    (SimConfig(seed=6, protocol="cure", num_dcs=2, num_partitions=2, num_clients=16, duration_s=0.15, think_us_max=0,
               faults=True, cost=replace(packaged_profile("python-quiet"), shared_machine=True, blocking="thread",
                                         threads=3, cores=1)),
     "bbd4be59b655739ef2562704877a446665d7622219069a35bc53810ee26825ea"),
]


@pytest.mark.parametrize(("config", "expected"), ON_BEFORE)
def test_with_the_cost_model_on_a_run_is_what_it_was(config: SimConfig, expected: str) -> None:
    result = Simulation(config).run()
    assert result.history is not None
    hasher = hashlib.sha256()
    for event in history_events(result.history):
        hasher.update(json.dumps(event, sort_keys=True).encode())
    hasher.update(repr((sorted(result.messages.items()), result.simulated_us, result.cpu_utilization)).encode())
    assert hasher.hexdigest() == expected


@pytest.mark.parametrize("blocking", ["free", "thread"])
def test_a_busy_cpu_queue_wakes_up_no_more_often_than_it_runs_jobs(monkeypatch: pytest.MonkeyPatch,
                                                                   blocking: str) -> None:
    """A wake-up superseded by a later one runs nothing and schedules nothing (``Cpu.wake``): the
    queue wakes up at most once per job it runs (under the thread model every release pumps too)."""
    counts = {"wakes": 0, "jobs": 0}
    wake, run = Cpu.wake, Cpu._run

    def counted_wake(self: Cpu, host: int) -> None:
        counts["wakes"] += 1
        wake(self, host)

    def counted_run(self: Cpu, *args: Any, **kwargs: Any) -> None:
        counts["jobs"] += 1
        run(self, *args, **kwargs)

    monkeypatch.setattr(Cpu, "wake", counted_wake)
    monkeypatch.setattr(Cpu, "_run", counted_run)
    profile = replace(packaged_profile("python-quiet"), shared_machine=True, cores=1, blocking=blocking,
                      threads=64 if blocking == "thread" else 0)
    outcome = run_simulation(SimConfig(num_dcs=2, num_partitions=2, num_clients=32, duration_s=0.1, think_us_max=0,
                                       cost=profile), check=False)
    assert outcome.result.window_completed > 100
    assert 0 < counts["wakes"] <= counts["jobs"]


def reference_bytes(value: object) -> int:
    """``message_bytes`` by its definition, by introspection of every value."""
    if isinstance(value, bytes | str):
        return len(value)
    if isinstance(value, tuple):
        return sum(reference_bytes(item) for item in value)
    names = getattr(type(value), "__struct_fields__", None)  # a core message (a msgspec struct)
    if names is None:
        names = getattr(type(value), "__dataclass_fields__", None)
    if names is None:
        return 8
    return sum(reference_bytes(getattr(value, name)) for name in names)


def test_the_size_estimate_of_every_message_a_run_sends_is_its_definition(monkeypatch: pytest.MonkeyPatch) -> None:
    sized: list[object] = []

    def recorded(value: object) -> int:
        sized.append(value)
        return message_bytes(value)

    monkeypatch.setattr(cost_module, "message_bytes", recorded)
    for protocol in ("okapi", "cure", "gentlerain"):
        run_simulation(SimConfig(protocol=protocol, num_dcs=3, num_partitions=2, num_clients=12, duration_s=0.1,
                                 faults=True, large_scans=True, cost=packaged_profile("python-quiet")), check=False)
    assert len({type(value) for value in sized}) >= 8
    for value in sized:
        assert message_bytes(value) == reference_bytes(value), value


def put_throughput(put_us: float) -> float:
    profile = CostProfile(name="test", cores=1, put_us=put_us)
    config = SimConfig(num_dcs=1, num_partitions=1, num_clients=16, duration_s=0.3, warmup_s=0.05,
                       think_us_max=0, mix=PUTS, cost=profile)
    outcome = run_simulation(config)
    assert outcome.ok
    return outcome.result.throughput_ops_s


def test_a_server_given_twice_the_cost_saturates_at_half_the_throughput() -> None:
    fast, slow = put_throughput(100.0), put_throughput(200.0)
    assert fast == pytest.approx(10_000, rel=0.03)  # one core, 100 us per PUT, 16 clients keep it busy
    assert slow / fast == pytest.approx(0.5, rel=0.03)


def test_work_a_message_costs_beyond_the_profile_takes_cpu_time_too() -> None:
    """``World.work_us`` (a large scan's slices: ``okapikv.sim.scans``) adds to the profile's cost,
    as it adds to the service time when the cost model is off."""
    profile = CostProfile(name="test", cores=1, put_us=100.0)
    config = SimConfig(num_dcs=1, num_partitions=1, num_clients=16, duration_s=0.3, warmup_s=0.05,
                       think_us_max=0, mix=PUTS, cost=profile)
    simulation = Simulation(config)
    simulation.world.work_us = lambda index, message: 100 if isinstance(message, PutRequest) else 0
    result = simulation.run()
    assert result.throughput_ops_s / put_throughput(100.0) == pytest.approx(0.5, rel=0.03)


def blocked(blocking: str, threads: int) -> int:
    # GentleRain's RO-TX waits for the GST to pass the snapshot (tens of ms with two DCs)
    profile = CostProfile(name="test", cores=2, get_us=5, put_us=5, rotx_us=5, tx_slice_us=5, blocking=blocking,
                          threads=threads)
    config = SimConfig(protocol="gentlerain", num_dcs=2, num_partitions=2, num_clients=16, duration_s=0.25,
                       think_us_max=0, workload="paper", cost=profile)
    outcome = run_simulation(config)
    assert outcome.ok
    assert outcome.result.waits["tx_stable"].count > 0
    return outcome.result.max_blocked


def test_the_thread_model_caps_blocked_requests_at_its_threads() -> None:
    assert blocked("free", 0) > 2
    assert blocked("thread", 2) <= 2
    assert blocked("thread", 1) == 1


def gentlerain_cpu(profile: CostProfile) -> tuple[float, float]:
    """(mean CPU share, throughput) of a GentleRain run whose RO-TXs park for tens of ms."""
    config = SimConfig(protocol="gentlerain", num_dcs=2, num_partitions=2, num_clients=32, duration_s=0.3,
                       think_us_max=0, workload="paper", cost=profile)
    outcome = run_simulation(config)
    assert outcome.ok
    busy = outcome.result.cpu_utilization
    assert busy is not None
    return sum(busy) / len(busy), outcome.result.throughput_ops_s


def test_a_blocked_thread_pays_its_wakes_and_a_parked_request_does_not() -> None:
    base = CostProfile(name="test", cores=2, get_us=5, put_us=5, rotx_us=5, tx_slice_us=5, blocking="thread",
                       threads=64)
    quiet, served = gentlerain_cpu(base)
    # 32 clients over 4 servers, most parked at any time: 50 us every ms each is ~0.2 of 2 cores
    polling, _ = gentlerain_cpu(replace(base, wake_us=50, poll_ms=1))
    assert polling > quiet + 0.05
    # parked (free): the same profile's wakes cost nothing, and no thread limit applies
    assert gentlerain_cpu(replace(base, blocking="free", threads=0, wake_us=50, poll_ms=1)) == (quiet, served)
    # a wake cost needs its period
    with pytest.raises(ValueError, match="poll_ms"):
        replace(base, wake_us=50).validate()


FULL = CostProfile(
    name="test", cores=2, get_us=20, put_us=30, swap_us=30, delete_us=30, rotx_us=30, scan_us=30,
    read_per_slice_us=5, tx_slice_us=10, tx_slice_per_key_us=2, scan_slice_us=10, scan_slice_per_item_us=1,
    slice_reply_us=5, slice_reply_per_value_us=1, replicate_batch_us=10, replicate_per_update_us=3,
    heartbeat_us=3, usv_step_us=2, vv_report_us=3, gsv_aggregate_per_partition_us=1, gsv_broadcast_us=3,
    catch_up_us=10, timer_us=5, gc_slice_us=10, resume_us=2, send_us=2, send_per_byte_us=0.01, client_us=10,
    wan_bandwidth_mbps=100)


@pytest.mark.parametrize(("protocol", "seed", "blocking"),
                         [("okapi", 1, "free"), ("cure", 2, "thread"), ("gentlerain", 3, "thread")])
def test_every_cost_on_with_faults_the_run_is_checked_clean(protocol: str, seed: int, blocking: str) -> None:
    profile = replace(FULL, blocking=blocking, threads=3 if blocking == "thread" else 0)
    config = SimConfig(seed=seed, protocol=protocol, num_dcs=3, num_partitions=2, num_clients=9, duration_s=0.4,
                       faults=True, clock_skew_ms=5, cost=profile)
    outcome = run_simulation(config)
    assert outcome.ok, outcome.anomalies[:3]
    utilization = outcome.result.cpu_utilization
    assert utilization is not None and all(0 < share < 1 for share in utilization)


def test_the_wan_bandwidth_queues_messages_on_their_link() -> None:
    servers = 2
    net = Network(Events(1_000_000), [False] * servers, 1, wan_us=[[0, 10_000], [10_000, 0]], lan_us=(100, 100),
                  client_us=(100, 100), jitter=0.0, jitter_us=0.0, link_extra=[0] * 4, random=lambda: 0.0)
    net.wan_bytes_per_us = 1.0  # 8 Mbit/s
    message = Heartbeat(ServerId(0, 0), 7)
    size = message_bytes(message)
    for _ in range(3):
        net.send(0, 1, message)
    times = [at for at, _, kind, _, _ in sorted(net.events.heap) if kind == DELIVER]
    assert times == [1_000_000 + 10_000 + size * n for n in (1, 2, 3)]


def test_profiles_load_from_files_and_bad_ones_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({**FULL.to_json(), "name": "mine"}))
    assert load_profile(path) == replace(FULL, name="mine")
    for bad, problem in [({"put_us": -1}, "non-negative"), ({"cpu": 2}, "unknown keys cpu"),
                         ({"cores": 1.5}, "integer"), ({"blocking": "thread"}, "at least one thread"),
                         ({"blocking": "spin"}, "blocking must be")]:
        path.write_text(json.dumps(bad))
        with pytest.raises(ValueError, match=problem):
            load_profile(path)
    with pytest.raises(ValueError, match="no cost profile"):
        load_profile("no-such-profile")
    for name in packaged_profiles():
        assert packaged_profile(name).source


def test_the_paper_profile_runs_checked_clean_and_is_cheaper_than_python() -> None:
    """``--cost paper``: the C++ servers' costs (docs/simulated.md) carry more load than Python's."""
    paper, python = packaged_profile("paper"), packaged_profile("python-quiet")
    assert paper.cores == 2 and paper.put_us < python.put_us and paper.get_us < python.get_us
    outcome = run_simulation(SimConfig(seed=4, protocol="okapi", num_dcs=3, num_partitions=2, num_clients=12,
                                       duration_s=0.3, cost=paper))
    assert outcome.ok, outcome.anomalies[:3]
    utilization = outcome.result.cpu_utilization
    assert utilization is not None and all(0 < share < 1 for share in utilization)
