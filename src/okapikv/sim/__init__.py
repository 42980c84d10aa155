"""Deterministic simulation of the protocol core (docs/testing.md, "The simulator"; TigerBeetle VOPR, turmoil).

The production partition servers run under virtual time: seeded network delays and partitions,
per-server clocks with offsets, drift and steps, crashes (kill -9, then a restart from what was
durable), pauses and slow servers, clocks off by minutes to hours (``clock_jumps``), closed-loop
client sessions recording a history that ``okapikv.check`` then judges, liveness after the heal
included (``liveness_s``). One module per mechanism:

- ``engine``: one run (``Simulation``): its phases and its result; ``runner``: run and check;
  ``config``: the knobs (``SimConfig``, ``FaultPlan``, ``WorkloadMix``);
- ``world``: the servers, each driven by the production host (``okapikv.core.host``) over a
  simulated disk (``disk``), their clocks (``clock``) and the network (``network``) under virtual
  time (``events``), and the deterministic mode protocol tests drive step by step
  (``World.fixed``, with ``caller.Caller`` as a synchronous client session);
- ``clients``: the closed-loop sessions and their workload (``workload``); ``nemesis``: the
  faults; ``invariants``: the checks a history cannot show; ``visibility``: remote visibility;
- ``cost`` and ``cpu``: the cost model, off by default (``SimConfig.cost``): a CPU queue of
  ``cores`` cores per server, a cost per message type, timer run and client operation, a WAN
  bandwidth, and the ``free`` or ``thread`` model of blocked requests; ``experiments``: the
  paper's experiments under it, as plain data (``okapi sim --experiment``, docs/simulated.md).

Commands::

    okapi sim                                   # one checked run (seed 1, 3 DCs x 4 partitions)
    okapi sim --seeds 1..20 --faults            # the CI sweep's shape, on the default config
    okapi sim --seeds 1..200 --faults --partitions 3 --clients 9 --duration-s 1 \\
              --protocol cure                   # a longer sweep (repeat per protocol)
    okapi sim --dcs 3 --partitions 32 --clients 3000 --duration-s 0.5 \\
              --clock-skew-ms 10                # the paper's deployment size, thousands of clients
    okapi sim --seed 7 --faults --history run.jsonl && okapi check run.jsonl
    okapi sim --workload paper --rotx-partitions 4 --think-us 0 --cost python-quiet   # the cost model
    okapi sim --experiment fig4 --out fig4      # a paper experiment at 3 DCs x 32 partitions
    okapi sim --seeds 1..20 --faults --clock-jumps --liveness-s 0.25 \\
              --partitions 3 --clients 6 --duration-s 0.5   # clocks hours off; liveness after the heal
"""

from okapikv.sim.config import FaultPlan, SimConfig, WorkloadMix
from okapikv.sim.engine import SimResult, Simulation
from okapikv.sim.runner import RunOutcome, reproduce_command, run_simulation

__all__ = [
    "FaultPlan",
    "RunOutcome",
    "SimConfig",
    "SimResult",
    "Simulation",
    "WorkloadMix",
    "reproduce_command",
    "run_simulation",
]
