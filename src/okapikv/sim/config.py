"""What one simulated run is made of: deployment, network, clocks, workload, faults.

Defaults follow the paper's evaluation (section 5) where it has a number: three DCs and the one-way
WAN delays between them (``okapikv.core.deployment``), stabilization every 5 ms, heartbeats after
1 ms of silence, zipfian keys with parameter 0.99, closed-loop clients attached to one DC.
Everything random in a run is drawn from one ``random.Random(seed)``, so the config plus the seed
determine the run exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from okapikv.core.config import DEFAULT_IDLE_INTERVAL_US
from okapikv.core.deployment import PAPER_DC_NAMES, PAPER_WAN_MS
from okapikv.core.skew import SKEW_MODELS
from okapikv.sim.cost import CostProfile

#: ``SimConfig.workload``: ``mix`` draws each operation from ``mix``; ``paper`` alternates strictly a
#: RO-TX over ``rotx_partitions`` partitions and a PUT, per client (the paper's workload, section 5);
#: ``write-ratio`` issues a PUT with probability ``write_ratio``, else such a RO-TX
WORKLOADS = ("mix", "paper", "write-ratio")


def wan_matrix_ms(num_dcs: int) -> tuple[tuple[float, ...], ...]:
    """The paper's matrix for three DCs; otherwise a fixed, seed-independent spread of 20-80 ms
    (a triangle-inequality-respecting ring, so no DC pair is 'faster through a third')."""
    if num_dcs == 3:
        return PAPER_WAN_MS
    rows = []
    for i in range(num_dcs):
        row = []
        for j in range(num_dcs):
            hops = min((i - j) % num_dcs, (j - i) % num_dcs)
            row.append(0.0 if i == j else 20.0 + 15.0 * hops + 5.0 * ((i + j) % 3))
        rows.append(tuple(row))
    return tuple(rows)


def dc_names(num_dcs: int) -> tuple[str, ...]:
    if num_dcs == 3:
        return PAPER_DC_NAMES
    return tuple(f"dc{i}" for i in range(num_dcs))


@dataclass(frozen=True, slots=True)
class WorkloadMix:
    """Relative weights of the operations a client issues (SCAN and RO-TX are snapshot reads)."""

    get: float = 30.0
    put: float = 20.0
    swap: float = 10.0
    delete: float = 4.0
    scan: float = 4.0
    rotx: float = 32.0
    #: INCR of a counter key, and a PUT with an expiry or a GET of an expiring key (``okapikv.sim.crdt``)
    incr: float = 0.0
    ttl: float = 0.0

    def weights(self) -> tuple[tuple[str, float], ...]:
        return (
            ("get", self.get),
            ("put", self.put),
            ("swap", self.swap),
            ("delete", self.delete),
            ("scan", self.scan),
            ("rotx", self.rotx),
            ("incr", self.incr),
            ("ttl", self.ttl),
        )


#: ``okapi sim --counters-ttls``: the default mix with counters and expiring keys (``okapikv.sim.crdt``)
COUNTERS_TTLS_MIX = WorkloadMix(incr=15.0, ttl=10.0)
#: The paper's scalability workload (section 5): a RO-TX then a PUT, over and over.
PAPER_MIX = WorkloadMix(get=0.0, put=50.0, swap=0.0, delete=0.0, scan=0.0, rotx=50.0)


@dataclass(frozen=True, slots=True)
class FaultPlan:
    """How often and how hard faults hit during the fault phase (``faults=True``)."""

    mean_interval_ms: float = 150.0
    partition_ms: tuple[float, float] = (50.0, 400.0)
    #: how long a crashed server stays down, and a paused one stopped
    crash_ms: tuple[float, float] = (20.0, 300.0)
    slow_ms: tuple[float, float] = (50.0, 400.0)
    slow_service_us: tuple[int, int] = (200, 3_000)
    clock_step_ms: tuple[float, float] = (1.0, 30.0)
    #: ``SimConfig.clock_jumps``: how far a clock jumps (minutes to hours), and the kinds' weights
    clock_jump_s: tuple[float, float] = (60.0, 7_200.0)
    jump_kinds: tuple[tuple[str, float], ...] = (
        ("clock_jump", 1.0),  # a running server's clock jumps ahead (and stays there)
        ("restart_clock_back", 1.0),  # kill -9, restart with the clock stepped back (fixed at the heal)
        ("restart_clock_ahead", 1.0),  # kill -9, restart with the clock ahead (and it stays there)
    )
    #: ``SimConfig.silent_links``: how long a directed link between DCs stays silent (``okapikv.sim.silent``),
    #: the kind's weight, and the peer links' liveness settings: ``[connections] link_probe_ms`` and
    #: ``link_ack_timeout_ms`` (1 s and 4 s in production) scaled to the simulator's sub-second
    #: faults, and the production reconnect backoff (first step, largest step)
    silent_link_ms: tuple[float, float] = (50.0, 400.0)
    silent_kinds: tuple[tuple[str, float], ...] = (("silent_link", 2.0),)
    link_probe_ms: float = 50.0
    link_ack_timeout_ms: float = 200.0
    link_backoff_ms: tuple[float, float] = (50.0, 1_000.0)
    #: ``SimConfig.large_scans`` (``okapikv.sim.scans``): the kind's weight, SCANs per burst, how long a
    #: scanner waits before it gives up (its connection closes), and what each key a scan slice may
    #: examine costs its server
    large_scan_kinds: tuple[tuple[str, float], ...] = (("large_scan", 3.0),)
    #: ``SimConfig.membership`` (``okapikv.sim.membership``): a DC lost, removed and brought back,
    #: how long it stays lost, and the kind's weight
    lose_dc_ms: tuple[float, float] = (100.0, 400.0)
    membership_kinds: tuple[tuple[str, float], ...] = (("lose_dc", 2.0),)
    large_scan_burst: int = 4
    large_scan_patience_ms: float = 3_000.0
    scan_key_us: int = 25_000
    drift_ppm_max: float = 200.0
    #: a client whose server stays down this long moves its session to another DC that can adopt
    #: it (the clients' ``fallback``, ``okapikv.client.failover``); 0: clients only retry
    failover_after_ms: float = 30.0
    #: this share of crashes also loses the server's disk: it restarts empty in repair mode
    #: (``PartitionServer.start_catch_up`` with a ``Repair``), with no clock bound, when every
    #: version it wrote had reached a replica and no replica of its partition is down or repairing
    #: (else a plain restart: a repair could not recover the rest, and the checkers would rightly
    #: report it lost); 0 draws nothing, so runs stay as they were
    lose_disk_share: float = 0.0
    #: relative weights of the fault kinds
    kinds: tuple[tuple[str, float], ...] = (
        ("partition_dc", 2.0),
        ("partition_link", 2.0),
        ("crash", 2.0),
        ("pause", 1.0),
        ("slow", 1.0),
        ("clock_step", 1.0),
    )


@dataclass(frozen=True, slots=True)
class SimConfig:
    seed: int = 1
    protocol: str = "okapi"
    num_dcs: int = 3
    num_partitions: int = 4
    #: closed-loop clients in total, spread round-robin over the DCs
    num_clients: int = 12
    #: simulated seconds of the fault phase (clients run; faults strike when enabled)
    duration_s: float = 2.0
    faults: bool = False
    #: fixed clock offsets per server, drawn under ``clock_skew_model`` with parameter
    #: ``clock_skew_ms`` (``okapikv.core.skew``: uniform in [0, X] independently per server, by default)
    clock_skew_ms: float = 0.0
    clock_skew_model: str = "uniform"
    #: one-way WAN delays (ms); default: the paper's matrix
    wan_ms: tuple[tuple[float, ...], ...] | None = None
    #: WAN jitter: each message gets base * (1 + U(0, wan_jitter)) plus U(0, wan_jitter_ms)
    wan_jitter: float = 0.05
    wan_jitter_ms: float = 2.0
    #: every cross-DC server-to-server link gets a fixed extra delay drawn from [0, this] (ms): links
    #: of different partitions take different routes, so updates of one client to two partitions
    #: may arrive in the other order (what the stabilization protocols must hide)
    wan_link_spread_ms: float = 5.0
    #: one-way delay inside a DC (server to server, client to server), uniform in this range (us)
    lan_us: tuple[int, int] = (100, 500)
    #: keys: ``keys_per_partition * num_partitions`` keys named k000000.., zipfian popularity
    keys_per_partition: int = 32
    zipf_theta: float = 0.99
    mix: WorkloadMix = field(default_factory=WorkloadMix)
    #: RO-TX size: keys from this many distinct partitions (capped at num_partitions)
    rotx_partitions: int = 2
    #: scans cover this many consecutive keys at most
    scan_span: int = 8
    #: the servers' cap on pairs per SCAN reply (``max_scan_items``; 0: the servers' default, which
    #: a scan of ``scan_span`` keys never reaches): small, so that scans come in pages, each page at
    #: the first page's snapshot, and the checkers judge paged scans
    scan_page_items: int = 3
    #: the servers' bounds on the snapshot reads each coordinates at once and their keys
    #: (``CoreConfig.max_concurrent_reads``, ``max_read_items``; None: the servers' defaults). A read
    #: past them is refused OVERLOADED and the client retries it after a backoff
    max_concurrent_reads: int | None = None
    max_read_items: int | None = None
    #: client think time between operations, uniform in [0, think_us_max] (us)
    think_us_max: int = 1_000
    #: per-message service time of a healthy server (us); a slow server adds to it
    service_us: int = 0
    fault_plan: FaultPlan = field(default_factory=FaultPlan)
    #: the fault phase also steps clocks by minutes to hours (``FaultPlan.jump_kinds``)
    clock_jumps: bool = False
    #: the fault phase also silences links between DCs (``FaultPlan.silent_kinds``): they carry
    #: nothing until their liveness check declares them dead and they reconnect (``okapikv.sim.silent``)
    silent_links: bool = False
    #: the fault phase also brings bursts of whole-range SCANs, whose slices cost their servers
    #: ``FaultPlan.scan_key_us`` per key (``okapikv.sim.scans``; use more ``keys_per_partition``)
    large_scans: bool = False
    #: the fault phase also loses a whole DC, removes it from the membership and brings it back
    #: (``FaultPlan.membership_kinds``, ``okapikv.sim.membership``)
    membership: bool = False
    #: the last DC is new: the others start as a cluster of one DC fewer, and it joins during the
    #: fault phase (its servers start empty and repair, the cluster grows online: ``okapikv.sim.membership``)
    new_dc: bool = False
    #: clients run on this many simulated seconds after the heal, and the liveness checker judges
    #: that part (``okapikv.check.liveness``); 0: clients stop at the heal
    liveness_s: float = 0.0
    #: liveness bounds: an operation's outcome after the heal, a write's visibility in every DC
    liveness_operation_bound_ms: float = 2_000.0
    liveness_visibility_bound_ms: float = 2_000.0
    #: the servers' maximum clock offset (``CoreConfig.max_clock_offset_us``)
    max_clock_offset_ms: float = 500.0
    #: simulated seconds allowed after the fault phase for replicas to become quiescent
    converge_timeout_s: float = 5.0
    piggyback_usv: bool = False
    #: idle pacing (``CoreConfig.idle_after_us``, ``idle_interval_us``; 0: never back off, the paper's)
    idle_after_ms: float = 0.0
    idle_interval_ms: float = DEFAULT_IDLE_INTERVAL_US / 1000
    #: fraction of writes whose remote visibility latency is measured (0 disables)
    visibility_sample: float = 0.05
    #: check internal invariants while running (replication promise: vv[i] never covers an update
    #: still in flight from DC i)
    invariants: bool = True
    #: record the history (needed for checking)
    record: bool = True
    #: what the workload clients issue (``WORKLOADS``)
    workload: str = "mix"
    #: the ``write-ratio`` workload's share of PUTs
    write_ratio: float = 0.5
    #: latency and throughput are measured over the fault phase after this much of it (warm-up)
    warmup_s: float = 0.0
    #: the cost model (``okapikv.sim.cost``); None: calls cost no time (``service_us`` aside)
    cost: CostProfile | None = None
    #: after the fault phase, wait for quiescence and read every key everywhere; False (measurement
    #: runs that are not checked): the run ends once the clients have finished their operations
    drain: bool = True

    def with_seed(self, seed: int) -> SimConfig:
        return replace(self, seed=seed)

    @property
    def num_keys(self) -> int:
        return self.keys_per_partition * self.num_partitions

    def wan(self) -> tuple[tuple[float, ...], ...]:
        return self.wan_ms if self.wan_ms is not None else wan_matrix_ms(self.num_dcs)

    def validate(self) -> None:
        problems = []
        if self.num_dcs < 1:
            problems.append("at least one DC")
        if self.new_dc and (self.num_dcs < 3 or not self.faults):
            problems.append("new_dc needs at least 3 DCs (a cluster of 2 grows by a third) and faults on")
        if self.num_partitions < 1:
            problems.append("at least one partition")
        if self.num_clients < 0:
            problems.append("clients must not be negative")
        if self.duration_s <= 0:
            problems.append("duration must be positive")
        if self.clock_skew_ms < 0:
            problems.append("clock skew must not be negative")
        if self.workload not in WORKLOADS:
            problems.append(f"workload must be one of {', '.join(WORKLOADS)}, not {self.workload!r}")
        if not 0 <= self.write_ratio <= 1:
            problems.append("write_ratio must be within [0, 1]")
        if not 0 <= self.warmup_s < self.duration_s:
            problems.append("warmup_s must be within [0, duration_s)")
        if not self.drain and self.record:
            problems.append("a run without the drain cannot be checked: set record=False")
        if self.cost is not None:
            try:
                self.cost.validate()
            except ValueError as error:
                problems.append(str(error))
        if self.clock_skew_model not in SKEW_MODELS:
            problems.append(f"unknown clock skew model {self.clock_skew_model!r} (one of {', '.join(SKEW_MODELS)})")
        if self.scan_page_items < 0:
            problems.append("scan_page_items must not be negative")
        if self.liveness_s < 0:
            problems.append("the liveness phase must not be negative")
        if self.max_clock_offset_ms * 1000 < 1:
            problems.append("the maximum clock offset must be at least 1 us")
        elif self.clock_skew_ms >= self.max_clock_offset_ms:
            problems.append(f"clock skew ({self.clock_skew_ms:g} ms) must be below the maximum clock offset "
                            f"({self.max_clock_offset_ms:g} ms): clocks further off are the clock_jumps faults")
        wan = self.wan()
        if len(wan) != self.num_dcs or any(len(row) != self.num_dcs for row in wan):
            problems.append(f"the WAN matrix must be {self.num_dcs}x{self.num_dcs}")
        if problems:
            raise ValueError("invalid simulation config: " + "; ".join(problems))
