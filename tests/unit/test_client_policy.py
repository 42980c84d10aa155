"""The client's policy (``okapikv.client.policy``, ``retry``, ``failover``) with a fake clock.

No server, no sleep: a test plays the driver, sending where the policy says and advancing its own
clock by the waits the policy asks for, so time windows are exact. Covered: at-most-once,
retry after backoff (delays grow, are jittered from the seeded source, respect the timeout), the
refusals that are never retried, ``errors.Overloaded``, rotation over coordinators, failover after
``failover_after_s`` to a DC that can adopt the session, ``errors.FailoverTimeout`` after
``failover_wait_s``, and adoption by the DC that the connections moved to.
"""

from __future__ import annotations

import ast
import dataclasses
import random
from collections.abc import Callable
from pathlib import Path

import pytest

import okapikv.client
from okapikv import errors
from okapikv.client import retry
from okapikv.client.failover import ADOPT_SESSION, CLUSTER_INFO, Ask, Move, Moved
from okapikv.client.operations import SessionState
from okapikv.client.policy import Policy
from okapikv.client.retry import Failure, Send, Wait
from okapikv.client.topology import Topology
from okapikv.core.backoff import Backoff
from okapikv.errors import OkapiError, Unavailable
from okapikv.wire import okapikv_pb2 as pb

BACKOFF = Backoff(base_s=0.01, cap_s=0.1)
SERVERS = ("10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000")
DOWN = Failure("UNAVAILABLE", "failed to connect to all addresses; last error: connection refused", sent=False)
CUT = Failure("UNAVAILABLE", "Stream removed (Socket closed)")  # a call in flight on a killed server
LOAD = Failure("RESOURCE_EXHAUSTED", "overloaded: this server already coordinates 2 snapshot reads")


def policy(timeout_s: float = 0.6, *, fallback: tuple[str, ...] = (), seed: int = 7, **options: object) -> Policy:
    return Policy(SERVERS[0], fallback, timeout_s=timeout_s, backoff=BACKOFF, rng=random.Random(seed),
                  **options)  # type: ignore[arg-type]


@dataclasses.dataclass
class Run:
    """What a driver did with one operation: each attempt's (time, server), each wait, the end."""

    sends: list[tuple[float, int]]
    waits: list[float]
    end: OkapiError | retry.FailOver | None  # None: an attempt succeeded (else: raised, or left the DC)
    now: float


def drive(attempts: retry.Attempts, outcome: Callable[[float, int], Failure | None], *, now: float = 0.0,
          server: int = 0, limit: int = 10_000) -> Run:
    """Play the driver: the first attempt goes to ``server`` at ``now``; ``outcome(t, s)`` is the
    attempt's failure (None: it succeeded). Attempts take no time; waits advance the clock."""
    run = Run([], [], None, now)
    for _ in range(limit):
        run.sends.append((run.now, server))
        failure = outcome(run.now, server)
        if failure is None:
            return run
        decision = attempts.judge(failure, run.now)
        if isinstance(decision, Wait):
            run.waits.append(decision.delay_s)
            run.now += decision.delay_s
            decision = attempts.next(run.now)
        if isinstance(decision, OkapiError | retry.FailOver):
            run.end = decision
            return run
        server = decision.server
    raise AssertionError("the policy never ended the operation")


def always(failure: Failure) -> Callable[[float, int], Failure | None]:
    return lambda now, server: failure


# ------------------------------------------------------------------ retry after backoff


def test_backoff_grows_with_jitter_and_is_capped() -> None:
    rng = random.Random(1)
    for attempt, ceiling in [(1, 0.01), (2, 0.02), (3, 0.04), (4, 0.08), (5, 0.1), (30, 0.1)]:
        delays = [BACKOFF.delay_s(attempt, rng) for _ in range(50)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1
    # the jitter is the seeded source's: the same seed, the same waits; another seed, others
    assert [BACKOFF.delay_s(3, random.Random(5)) for _ in range(3)] == [BACKOFF.delay_s(3, random.Random(5))] * 3
    assert BACKOFF.delay_s(3, random.Random(5)) != BACKOFF.delay_s(3, random.Random(6))


def test_an_operation_retries_through_an_outage_until_the_server_is_back() -> None:
    """The server of the key is down for 0.5 s: the operation keeps trying, with waits that grow
    and are jittered, and its first attempt after the server is back succeeds (so it waited the
    outage out, not less, and not much more: within one capped backoff)."""
    attempts = policy(10).attempts("Swap", SERVERS, started=0.0, start=1, writes=True)
    run = drive(attempts, lambda now, server: DOWN if now < 0.5 else None, server=1)
    assert run.end is None
    assert 0.5 <= run.now < 0.5 + BACKOFF.cap_s
    assert {server for _, server in run.sends} == {1}  # a key's operation stays with its server
    for number, delay in enumerate(run.waits, start=1):
        ceiling = min(BACKOFF.cap_s, BACKOFF.base_s * 2 ** (number - 1))
        assert ceiling / 2 <= delay <= ceiling
    assert run.waits[3] > run.waits[0]
    other = drive(policy(10, seed=8).attempts("Swap", SERVERS, started=0.0, writes=True),
                  lambda now, server: DOWN if now < 0.5 else None)
    assert other.waits != run.waits  # jittered: another client does not come back in lock step


@pytest.mark.parametrize("rotate", [False, True])
def test_unavailable_at_the_timeout_not_before_or_after(rotate: bool) -> None:
    attempts = policy(0.6).attempts("Get", SERVERS, started=3.0, rotate=rotate)
    run = drive(attempts, always(DOWN), now=3.0)
    assert type(run.end) is Unavailable
    assert run.now == pytest.approx(3.6)  # the last wait ends at the timeout, and nothing is sent then
    assert run.sends[-1][0] < 3.6
    message = str(run.end)
    assert "no answer within 0.6 s" in message and "last error: UNAVAILABLE: failed to connect" in message
    assert run.end.__cause__ is DOWN
    assert len(run.sends) < 20  # backoff, not a spin
    servers = [server for _, server in run.sends]
    if rotate:  # any server of the DC coordinates a RO-TX or SCAN: each retry goes to the next
        assert servers[:4] == [0, 1, 2, 0]
    else:
        assert set(servers) == {0}


def test_an_rpc_has_the_same_timeout() -> None:
    attempts = policy(0.3).attempts("ClusterInfo", ("h:1",), started=0.0, fails_over=False)
    run = drive(attempts, always(DOWN))
    assert isinstance(run.end, OkapiError) and "ClusterInfo via h:1: no answer within 0.3 s" in str(run.end)


def test_a_hung_server_is_unavailable_at_the_deadline() -> None:
    attempts = policy(0.5).attempts("Get", SERVERS, started=0.0)
    decision = attempts.judge(Failure("DEADLINE_EXCEEDED", "no reply before the deadline"), 0.5)
    assert type(decision) is Unavailable


@pytest.mark.parametrize(("failure", "error"), [
    (Failure("INVALID_ARGUMENT", "key must not be empty"), errors.InvalidArgument),
    (Failure("OUT_OF_RANGE", "the session depends on a timestamp 3600000.0 ms ahead"), errors.ClockOffsetExceeded),
    (Failure("ABORTED", "the snapshot fell below the garbage-collection horizon"), errors.SnapshotTooOld),
    (Failure("UNIMPLEMENTED", "Method not found"), errors.ProtocolMismatch),
    (Failure("RESOURCE_EXHAUSTED", "Received message larger than max"), OkapiError),
    (Failure("PERMISSION_DENIED", "no"), OkapiError),
])
def test_refusals_are_raised_at_once_never_retried(failure: Failure, error: type[OkapiError]) -> None:
    for writes, at_most_once in [(False, False), (True, False), (True, True)]:
        attempts = policy(at_most_once=at_most_once).attempts("Put", SERVERS, started=0.0, writes=writes)
        decision = attempts.judge(failure, 0.0)
        assert type(decision) is error
        assert failure.details in str(decision)
        assert not isinstance(decision, Unavailable)  # no failover for them either


def test_a_read_refused_for_load_is_retried_until_the_timeout_then_overloaded() -> None:
    run = drive(policy(0.5).attempts("ReadTx", SERVERS, started=0.0, rotate=True), always(LOAD))
    assert type(run.end) is errors.Overloaded
    assert run.now == pytest.approx(0.5)
    assert "refused for load until the 0.5 s timeout" in str(run.end)
    assert "overloaded: this server already coordinates" in str(run.end)
    # the DC is up: a client with fallback DCs does not move for it, and retries to its timeout
    run = drive(policy(5, fallback=("11.0.0.1:7000",), failover_after_s=1).attempts(
        "ReadTx", SERVERS, started=0.0, rotate=True), always(LOAD))
    assert type(run.end) is errors.Overloaded
    assert run.now == pytest.approx(5)
    served = drive(policy(5).attempts("ReadTx", SERVERS, started=0.0), lambda now, server: LOAD if now < 1 else None)
    assert served.end is None


# ------------------------------------------------------------------ at most once


def test_at_most_once_retries_a_write_only_when_it_was_never_sent() -> None:
    never_sent = [DOWN, Failure("UNAVAILABLE", "the server closed the connection", sent=False),
                  Failure("UNAVAILABLE", "failed to connect to all addresses")]  # gRPC had no connection
    maybe_sent = [CUT, Failure("CANCELLED", "the server is shutting down"),
                  Failure("DEADLINE_EXCEEDED", "no reply before the deadline"),
                  Failure("", "[Errno 104] Connection reset by peer")]  # broken outside gRPC
    for failure in never_sent:
        attempts = policy(10, at_most_once=True).attempts("Swap", SERVERS, started=0.0, writes=True)
        assert isinstance(attempts.judge(failure, 0.0), Wait)
    for failure in maybe_sent:
        attempts = policy(10, at_most_once=True).attempts("Swap", SERVERS, started=0.0, start=2, writes=True)
        decision = attempts.judge(failure, 0.0)
        assert type(decision) is errors.OutcomeUnknown
        assert str(decision).startswith(f"Swap via {SERVERS[2]}: ")
        assert "may or may not have taken effect" in str(decision)
        assert decision.__cause__ is failure
        # reads have no effect to repeat, and by default writes are retried (at least once)
        read = policy(10, at_most_once=True).attempts("Get", SERVERS, started=0.0)
        write = policy(10).attempts("Swap", SERVERS, started=0.0, writes=True)
        for other in (read, write):
            assert not isinstance(other.judge(failure, 0.0), OkapiError) or failure.code == "DEADLINE_EXCEEDED"
    deadline = policy(0.5, at_most_once=True).attempts("Get", SERVERS, started=0.0)
    decision = deadline.judge(Failure("DEADLINE_EXCEEDED", "no reply before the deadline"), 0.5)
    assert type(decision) is Unavailable  # a read past its deadline


def test_an_at_most_once_write_is_not_sent_once_its_time_is_up() -> None:
    """The last wait ends the operation even if the driver's clock wakes a hair early: a write
    sent with no time left would come back DEADLINE_EXCEEDED, an unknown outcome."""
    attempts = policy(0.05, at_most_once=True).attempts("Put", SERVERS, started=0.0, writes=True)
    now = 0.0
    while True:
        decision = attempts.judge(DOWN, now)
        assert isinstance(decision, Wait)
        now += decision.delay_s * 0.999999  # sleeps that return a little early
        step = attempts.next(now)
        if isinstance(step, OkapiError):
            break
        assert isinstance(step, Send) and step.timeout_s > 0.001
    assert type(step) is Unavailable


# ------------------------------------------------------------------ failover


def test_a_dc_is_left_after_failover_after_s_while_time_is_left() -> None:
    fallback = policy(30, fallback=("11.0.0.1:7000",), failover_after_s=2.0)
    assert fallback.window_s == 2.0 and policy(30).window_s == 30
    attempts = fallback.attempts("Get", SERVERS, started=0.0, start=1)
    run = drive(attempts, always(DOWN), server=1)
    assert run.end is retry.FAIL_OVER
    assert run.now == pytest.approx(2.0)  # not before: every earlier decision was to wait and resend
    assert all(at < 2.0 for at, _ in run.sends)
    there = ("11.0.0.1:7000", "11.0.0.2:7000", "11.0.0.3:7000")
    send = attempts.moved(2.5, there)  # the move itself took half a second
    assert send == Send(1, 4.5, 2.0)  # the key's partition in the new DC, a fresh window
    assert attempts.address == there[1]
    run = drive(attempts, always(DOWN), now=2.5, server=1)  # that DC is down too: move again
    assert run.end is retry.FAIL_OVER and run.now == pytest.approx(4.5)
    attempts.moved(29.5, there)
    run = drive(attempts, always(DOWN), now=29.5, server=1)
    assert type(run.end) is Unavailable  # the timeout is the bound
    assert run.now == pytest.approx(30)
    # a server that hangs: its deadline is the end of the window, after which the session moves
    hung = fallback.attempts("Get", SERVERS, started=0.0)
    assert hung.judge(Failure("DEADLINE_EXCEEDED", "no reply before the deadline"), 2.0) is retry.FAIL_OVER
    # without fallback DCs, and for RPCs, a DC is never left
    assert isinstance(drive(policy(30).attempts("Get", SERVERS, started=0.0), always(DOWN)).end, Unavailable)
    rpc = fallback.attempts("Stats", SERVERS, started=0.0, fails_over=False)
    assert isinstance(drive(rpc, always(DOWN)).end, Unavailable)


HERE = Topology(cluster_id="c1", protocol="okapi", dc=0, dc_names=("a", "b", "c"), num_partitions=2,
                addresses=("a:1", "a:2"), max_key_bytes=1024, max_value_bytes=4096, max_message_bytes=1 << 20)


def info(dc: int, cluster_id: str = "c1") -> pb.ClusterInfoResponse:
    name = HERE.dc_names[dc]
    return pb.ClusterInfoResponse(
        cluster_id=cluster_id, dc_names=list(HERE.dc_names), num_partitions=2, protocol="okapi", dc=dc,
        servers=[pb.ServerAddress(dc=dc, partition=p, address=f"{name}:{p + 1}") for p in range(2)])


def session_of_a() -> SessionState:
    state = SessionState(3)
    state.merge(pb.Session(stable=[50, 40, 30], dt=90))
    return state


def move_with(addresses: tuple[str, ...], wait_s: float = 10.0) -> Move:
    mover = Policy(addresses[0], addresses[1:], backoff=BACKOFF, failover_wait_s=wait_s, rng=random.Random(3))
    return mover.move(HERE, session_of_a(), 0, now=100.0)


READY = pb.AdoptSessionResponse(ready=True, session=pb.Session(stable=[20, 45, 10], dt=60))
LAGGING = pb.AdoptSessionResponse(ready=False, behind_us=[2500, 0, 0])


def test_a_move_goes_to_the_first_other_dc_that_answers_and_adopts_the_session() -> None:
    move = move_with(("a:1", "b:2", "c:1"))
    ask = move.next(100.0)
    assert ask == Ask("a:1", CLUSTER_INFO, pb.ClusterInfoRequest(), 10.0)  # its own DC first: gone
    move.answer(DOWN, 100.0)
    ask = move.next(100.0)
    assert isinstance(ask, Ask) and ask.address == "b:2" and ask.method == CLUSTER_INFO
    move.answer(info(1), 100.1)
    ask = move.next(100.1)
    assert isinstance(ask, Ask) and (ask.address, ask.method) == ("b:2", ADOPT_SESSION)
    assert ask.request == pb.AdoptSessionRequest(session=pb.Session(stable=[50, 40, 30], dt=90), from_dc=0)
    assert ask.timeout_s == pytest.approx(10.0)
    move.answer(READY, 100.2)
    moved = move.next(100.2)
    assert isinstance(moved, Moved) and moved.topology.dc_name == "b"
    assert moved.topology.addresses == ("b:1", "b:2") and moved.session == READY.session


def test_a_move_skips_its_own_dc_and_refuses_another_cluster() -> None:
    move = move_with(("a:1", "a:2", "x:1"))
    move.next(0.0)
    move.answer(info(0), 0.0)  # a server of the client's own DC answers: not a place to move to
    assert isinstance(ask := move.next(0.0), Ask) and ask.address == "a:2"
    move.answer(info(0), 0.0)
    move.next(0.0)
    move.answer(info(2, cluster_id="c2"), 0.0)
    refused = move.next(0.0)
    assert type(refused) is errors.ProtocolMismatch
    assert "fallback x:1 belongs to cluster c2, not c1" in str(refused)


def test_no_dc_answering_is_unavailable() -> None:
    move = move_with(("a:1", "b:1"))
    for _ in range(2):
        move.next(0.0)
        move.answer(DOWN, 0.0)
    end = move.next(0.0)
    assert type(end) is Unavailable
    assert "DC a is unreachable and so is every fallback (a:1, b:1)" in str(end)


def described(ask: Ask) -> object:
    """ClusterInfo of the fake cluster's servers: DC a is down, DC b answers."""
    return DOWN if ask.address.startswith("a:") else info(1)


def pump(move: Move, answer: Callable[[Ask, float], object], now: float) -> tuple[Moved | OkapiError, float, list[Ask]]:
    """Play the driver of a move: ``answer(ask, now)`` replies; waits advance the clock."""
    asked: list[Ask] = []
    while True:
        action = move.next(now)
        if isinstance(action, Ask):
            asked.append(action)
            move.answer(answer(action, now), now)
        elif isinstance(action, Wait):
            now += action.delay_s
        else:
            return action, now, asked


def test_a_dc_that_lacks_the_sessions_writes_is_asked_again_until_failover_wait_s() -> None:
    move = move_with(("a:1", "b:1"), wait_s=2.0)

    def lagging(ask: Ask, now: float) -> object:
        return described(ask) if ask.method == CLUSTER_INFO else LAGGING

    end, now, asked = pump(move, lagging, 100.0)
    assert type(end) is errors.FailoverTimeout
    assert now == pytest.approx(102.0)  # gave up when failover_wait_s had passed, not before
    adopt_asks = [ask for ask in asked if ask.method == ADOPT_SESSION]
    assert 5 < len(adopt_asks) < 60  # asked again after each backoff, boundedly
    assert all(ask.timeout_s <= 2.0 for ask in adopt_asks)
    message = str(end)
    assert "DC a is unreachable and no other DC received every write the session depends on within 2 s" in message
    assert "(DC b lacks updates of a by 2.5 ms)" in message

    # the writes arrive while it waits: it moves then
    move = move_with(("a:1", "b:1"), wait_s=2.0)
    end, now, _ = pump(move, lambda ask, at: described(ask) if ask.method == CLUSTER_INFO else (
        LAGGING if at < 100.5 else READY), 100.0)
    assert isinstance(end, Moved) and 100.5 <= now < 100.5 + BACKOFF.cap_s


def test_a_dc_whose_adoption_call_fails_is_reported_as_not_answering() -> None:
    move = move_with(("a:1", "b:1"), wait_s=0.5)
    end, now, _ = pump(move, lambda ask, at: described(ask) if ask.method == CLUSTER_INFO else DOWN, 0.0)
    assert isinstance(end, OkapiError) and "(DC b did not answer (UNAVAILABLE))" in str(end)
    assert now == pytest.approx(0.5)


def test_a_session_is_adopted_by_the_dc_its_connections_moved_to() -> None:
    """Another session moved the connections to DC b: this one asks b (the server it already has a
    link to) to adopt it, with no ClusterInfo round, and gets errors.FailoverTimeout while b lacks its
    writes, at each operation, until they arrive."""
    there = dataclasses.replace(HERE, dc=1, addresses=("b:1", "b:2"))
    mover = Policy("a:1", ("b:2",), backoff=BACKOFF, failover_wait_s=1.0, rng=random.Random(3))
    end, now, asked = pump(mover.adoption(there, session_of_a(), 0, now=0.0), lambda ask, at: LAGGING, 0.0)
    assert {(ask.address, ask.method) for ask in asked} == {("b:1", ADOPT_SESSION)}
    assert type(end) is errors.FailoverTimeout and now == pytest.approx(1.0)
    assert "DC a is unreachable" in str(end) and "(DC b lacks updates of a by 2.5 ms)" in str(end)
    end, _, _ = pump(mover.adoption(there, session_of_a(), 0, now=5.0), lambda ask, at: READY, 5.0)
    assert isinstance(end, Moved) and end.topology is there and end.session == READY.session


# ------------------------------------------------------------------ the policy itself


@pytest.mark.parametrize(("options", "match"), [
    ({"timeout_s": 0}, "timeout_s must be positive"),
    ({"failover_after_s": 0}, "must be positive"),
    ({"failover_wait_s": -1}, "must be positive"),
])
def test_the_settings_are_checked(options: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Policy("a:1", **options, rng=random.Random())  # type: ignore[arg-type]


def test_the_addresses_are_the_clients_then_its_fallbacks_once_each() -> None:
    assert Policy("a:1", ("b:1", "a:1", "c:1"), rng=random.Random()).addresses == ("a:1", "b:1", "c:1")
    assert policy(1).with_timeout(5).timeout_s == 5


POLICY_MODULES = ("policy", "retry", "failover")
IO_MODULES = {"asyncio", "grpc", "socket", "select", "ssl", "threading", "time", "selectors", "subprocess"}


def test_the_policy_does_no_io() -> None:
    """The policy and what it imports from the client package: no sockets, asyncio, gRPC, clock."""
    package = Path(okapikv.client.__file__).parent
    seen: set[str] = set()
    todo = list(POLICY_MODULES)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        tree = ast.parse((package / f"{name}.py").read_text())
        for node in ast.walk(tree):
            modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for module in modules:
                assert module.split(".")[0] not in IO_MODULES, f"client/{name}.py imports {module}"
                if module.startswith("okapikv.client."):
                    todo.append(module.rsplit(".", 1)[1])
    assert seen >= {"policy", "retry", "failover", "operations", "topology"}


def test_the_session_server_is_the_given_one_and_forks_spread_over_the_dc() -> None:
    """RO-TX and SCAN go to the session's own server (docs/design.md, "Who coordinates a snapshot
    read"): the client's first session to the server it was given, each fork to the next server of
    the DC, and in a DC it was given no server of (a failover) by its ordinal alone."""
    here = Topology("c", "okapi", 0, ("dc0", "dc1"), 3, SERVERS, 1 << 20, 1 << 20, 4 << 20)
    given = Policy(SERVERS[1], rng=random.Random(1))
    assert [given.session_server(here, ordinal) for ordinal in range(4)] == [1, 2, 0, 1]
    for first_key in (None, b"any key"):
        assert [given.read_coordinator(here, ordinal, first_key) for ordinal in range(3)] == [1, 2, 0]
    elsewhere = dataclasses.replace(here, dc=1, addresses=("10.1.0.1:7000", "10.1.0.2:7000", "10.1.0.3:7000"))
    assert [given.session_server(elsewhere, ordinal) for ordinal in range(4)] == [0, 1, 2, 0]


def test_first_key_coordination_is_a_named_option() -> None:
    here = Topology("c", "okapi", 0, ("dc0",), 3, SERVERS, 1 << 20, 1 << 20, 4 << 20)
    first_key = Policy(SERVERS[1], coordinator="first-key", rng=random.Random(1))
    keys = [b"key%d" % index for index in range(20)]
    assert [first_key.read_coordinator(here, 0, key) for key in keys] == [here.partition_of(key) for key in keys]
    assert [first_key.read_coordinator(here, 0, None) for _ in range(4)] == [0, 1, 2, 0]  # SCANs in turn
    assert first_key.with_timeout(1.0).coordinator == "first-key"
    with pytest.raises(ValueError, match="coordinator must be one of session, first-key"):
        Policy(SERVERS[0], coordinator="random", rng=random.Random(1))
