"""The course fuzzer's operations: the mix, the keys and the values, the same for the same seed.

The mix is the course's: PUT 20%, SWAP 20%, GET 30%, SCAN 20%, DELETE 10%, over 8-character
alphanumeric keys, 5 per client (disjoint per client, or one set of 5 shared by every client with
``--conflict``), with 16-character values that are unique per write, so the history is
*differentiated*: a read names the write it read from, which the checkers rely on.

Isolation: a local cluster (the default) is fresh. With ``--connect`` the cluster keeps what earlier
runs wrote, and the checkers assume every key starts empty, so every key of a run starts with a
3-character prefix drawn afresh per run (printed and kept in the history's meta) and SCAN ranges lie
between two keys of the run; the operation sequence itself still follows ``--seed``.
"""

from __future__ import annotations

import argparse
import random
import secrets
import string
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

#: The course fuzzer's operation mix, in percent.
MIX: tuple[tuple[str, int], ...] = (("put", 20), ("swap", 20), ("get", 30), ("scan", 20), ("delete", 10))
ALPHANUMERIC = string.ascii_letters + string.digits
KEY_LENGTH = 8
KEY_PREFIX_LENGTH = 3
VALUE_LENGTH = 16
KEYS_PER_CLIENT = 5
#: ``--counters-ttls`` (``okapikv.fuzz.side``): the counters every client shares, an expiring PUT's life
COUNTERS = 2
TTL_MS = 300
#: after the prefix of every side key: it sorts after every alphanumeric, so no SCAN range of the
#: run (between two of its keys) holds a side key
SIDE_MARK = "~"


@dataclass(frozen=True, slots=True)
class Command:
    """One generated operation: ``f`` as in the history format, the protocol line, its arguments."""

    f: str
    line: str
    key: str | None = None
    value: str | None = None
    start: str | None = None
    end: str | None = None

    def request(self) -> dict[str, Any]:
        """The invoke fields of the history format."""
        if self.f == "scan":
            return {"start": self.start, "end": self.end, "limit": None}
        if self.f in ("put", "swap"):
            return {"key": self.key, "value": self.value}
        return {"key": self.key}


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything that decides what the clients send; ``client_dcs[i]`` is the DC of client ``i``."""

    clients: int
    operations_per_client: int
    conflict: bool
    seed: int
    key_prefix: str
    client_dcs: tuple[str, ...]
    #: ``--counters-ttls``: INCRs and expiring PUTs mixed in (``okapikv.fuzz.side``)
    counters_ttls: bool = False

    def counter_keys(self) -> list[str]:
        return [f"{self.key_prefix}{SIDE_MARK}counter{index}" for index in range(COUNTERS)]

    def key_sets(self) -> list[tuple[str, ...]]:
        """The keys of each client: ``KEYS_PER_CLIENT`` each, all distinct, or one shared set."""
        rng = random.Random(f"okapi-fuzz-keys/{self.seed}")
        needed = KEYS_PER_CLIENT if self.conflict else KEYS_PER_CLIENT * self.clients
        keys: list[str] = []
        seen: set[str] = set()
        while len(keys) < needed:
            key = self.key_prefix + "".join(rng.choices(ALPHANUMERIC, k=KEY_LENGTH - len(self.key_prefix)))
            if key not in seen:
                seen.add(key)
                keys.append(key)
        if self.conflict:
            return [tuple(keys)] * self.clients
        return [tuple(keys[i * KEYS_PER_CLIENT:(i + 1) * KEYS_PER_CLIENT]) for i in range(self.clients)]

    def all_keys(self) -> list[str]:
        return sorted({key for keys in self.key_sets() for key in keys})

    @property
    def warm_up_key(self) -> str:
        """A key no run writes (one character longer than the generated ones)."""
        return self.key_prefix + "warmup"

    def commands(self, client: int) -> Iterator[Command]:
        """Client ``client``'s operations, the same for the same seed.

        Values are ``<client, 3 digits><write number, 7 digits><6 random characters>``: unique per
        write in the run (the history must be differentiated) and 16 alphanumeric characters.
        """
        rng = random.Random(f"okapi-fuzz-ops/{self.seed}/{client}")
        keys = self.key_sets()[client]
        names = [name for name, _ in MIX]
        weights = [weight for _, weight in MIX]
        writes = 0
        side = random.Random(f"okapi-fuzz-side/{self.seed}/{client}")
        for _ in range(self.operations_per_client):
            if self.counters_ttls:  # a draw of its own: the course operations follow the seed's sequence
                draw = side.random()
                if draw < 0.1:
                    key = side.choice(self.counter_keys())
                    yield Command("incr", f"INCR {key}", key=key)
                    continue
                if draw < 0.2:
                    writes += 1
                    key, value = f"{self.key_prefix}{SIDE_MARK}expiring{client}", f"{client:03d}{writes:07d}ttl"
                    yield Command("putex", f"PUTEX {key} {value} {TTL_MS}", key=key, value=value)
                    continue
            f = rng.choices(names, weights)[0]
            if f == "scan":
                start, end = sorted(rng.sample(keys, 2) if len(keys) > 1 else [keys[0], keys[0]],
                                    key=lambda k: k.encode())
                yield Command("scan", f"SCAN {start} {end}", start=start, end=end)
                continue
            key = rng.choice(keys)
            if f in ("put", "swap"):
                writes += 1
                value = f"{client:03d}{writes:07d}" + "".join(rng.choices(ALPHANUMERIC, k=VALUE_LENGTH - 10))
                yield Command(f, f"{f.upper()} {key} {value}", key=key, value=value)
            else:
                yield Command(f, f"{f.upper()} {key}", key=key)


def make_plan(args: argparse.Namespace, client_dcs: Sequence[str], fresh_prefix: bool) -> Plan:
    """The plan for ``args``; ``fresh_prefix``: draw the key prefix anew (a shared, used cluster)."""
    if fresh_prefix:
        prefix = "".join(secrets.choice(ALPHANUMERIC) for _ in range(KEY_PREFIX_LENGTH))
    else:
        prefix = "".join(random.Random(f"okapi-fuzz-prefix/{args.seed}").choices(ALPHANUMERIC,
                                                                                   k=KEY_PREFIX_LENGTH))
    return Plan(args.clients, args.ops, args.conflict, args.seed, prefix, tuple(client_dcs),
                bool(getattr(args, "counters_ttls", False)))
