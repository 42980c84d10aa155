"""A client that runs inside a network namespace and takes commands on stdin (one JSON per line).

The multi-host test cannot reach the servers from its own namespace (they listen on addresses that
exist only inside the test's namespaces), so it starts one agent per DC namespace with
``ip netns exec`` and drives it over pipes. Each agent keeps one causal session across commands,
exactly as a client of that DC would.

Commands (answered with one JSON line each: ``{"ok": true, ...}`` or ``{"ok": false, "error": ...}``):
``{"op": "ready", "addresses": [...]}`` waits until every address answers a health check;
``{"op": "put", "key": K, "value": V}``; ``{"op": "get", "key": K}`` -> ``value`` (null if none);
``{"op": "wait", "key": K, "value": V}`` polls GET until it returns V; ``{"op": "stop"}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from okapikv.cluster.health import wait_until_serving
from okapikv.core.messages import Session
from okapikv.core.session import ClientSession
from okapikv.tls import ClientTls, open_channel
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc

TIMEOUT_S = 20.0


class Agent:
    def __init__(self, address: str, num_dcs: int, tls: ClientTls | None) -> None:
        self.tls = tls
        self.channel = open_channel(address, tls)
        self.stub = pb_grpc.KeyValueStub(self.channel)  # type: ignore[no-untyped-call]
        self.session = ClientSession(num_dcs)

    def _wire_session(self) -> pb.Session:
        return pb.Session(stable=self.session.stable, dt=self.session.dt)

    def _merge(self, session: pb.Session) -> None:
        self.session.merge(Session(tuple(session.stable), session.dt))

    def put(self, key: str, value: str) -> dict[str, Any]:
        reply = self.stub.Put(pb.PutRequest(key=key.encode(), value=value.encode(), session=self._wire_session()),
                              timeout=TIMEOUT_S)
        self._merge(reply.session)
        return {"timestamp": reply.timestamp}

    def get(self, key: str) -> dict[str, Any]:
        reply = self.stub.Get(pb.GetRequest(key=key.encode(), session=self._wire_session()), timeout=TIMEOUT_S)
        self._merge(reply.session)
        return {"value": reply.value.decode() if reply.found else None}

    def wait(self, key: str, value: str) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            seen = self.get(key)["value"]
            if seen == value:
                return {"value": seen}
            if time.monotonic() > deadline:
                raise TimeoutError(f"{key} is {seen!r}, not {value!r}, after {TIMEOUT_S} s")
            time.sleep(0.02)

    def ready(self, addresses: list[str]) -> dict[str, Any]:
        pending = wait_until_serving(addresses, TIMEOUT_S * 3, tls=self.tls)
        if pending:
            raise TimeoutError(f"not serving: {pending}")
        return {}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", required=True)
    parser.add_argument("--dcs", type=int, required=True)
    parser.add_argument("--ca")
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--server-name", help="the name the server certificates name, if not the address's host")
    args = parser.parse_args()
    tls = ClientTls(args.ca, args.cert, args.key, args.server_name) if args.ca else None
    agent = Agent(args.address, args.dcs, tls)
    for line in sys.stdin:
        command = json.loads(line)
        operation = command.pop("op")
        if operation == "stop":
            break
        try:
            answer = {"ok": True, **getattr(agent, operation)(**command)}
        except Exception as error:  # the test reports it; the agent keeps serving
            answer = {"ok": False, "error": f"{type(error).__name__}: {error}"}
        print(json.dumps(answer), flush=True)
    agent.channel.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
