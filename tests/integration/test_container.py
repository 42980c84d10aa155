"""The image and the compose project under a real container runtime (opt in: OKAPI_CONTAINER_TESTS=1).

Builds the Dockerfile (``OKAPI_BASE_IMAGE`` picks its base, for a machine without a registry),
writes a 2-DC x 1-partition compose project with `okapi deploy compose`, brings it up, waits for
every service to report healthy through its `okapi health` HEALTHCHECK, writes through one DC and
reads the value back in the other, and brings it down with its volumes. It needs a runtime that can
run containers (docker or podman, with `compose`); where none can, it skips and says why.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "localhost/okapikv:test"
BUILD_TIMEOUT_S = 900
HEALTHY_TIMEOUT_S = 180

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("OKAPI_CONTAINER_TESTS") != "1",
                       reason="builds an image and runs containers: set OKAPI_CONTAINER_TESTS=1"),
]


def _runtime() -> str:
    """A runtime that can run a container here, or a skip naming why none can."""
    reasons = []
    for name in ("docker", "podman"):
        program = shutil.which(name)
        if program is None:
            reasons.append(f"{name}: not installed")
            continue
        probe = subprocess.run([program, "info"], capture_output=True, text=True, timeout=60, check=False)
        if probe.returncode != 0:
            reasons.append(f"{name}: {(probe.stderr or probe.stdout).strip().splitlines()[-1]}")
            continue
        compose = subprocess.run([program, "compose", "version"], capture_output=True, text=True, timeout=60,
                                 check=False)
        if compose.returncode != 0:
            reasons.append(f"{name}: no compose provider ({(compose.stderr or compose.stdout).strip()[:120]})")
            continue
        return program
    pytest.skip("no container runtime that can run compose here: " + "; ".join(reasons))


def test_the_image_runs_the_generated_compose_project(tmp_path: Path) -> None:
    runtime = _runtime()
    base = os.environ.get("OKAPI_BASE_IMAGE")
    build = [runtime, "build", "-t", IMAGE, *(["--build-arg", f"BASE_IMAGE={base}"] if base else []), str(ROOT)]
    built = subprocess.run(build, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False)
    if built.returncode != 0 and "permission denied" in (built.stderr + built.stdout).lower():
        pytest.skip(f"{runtime} cannot run build steps here: {built.stderr.strip().splitlines()[-1]}")
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    out = tmp_path / "compose"
    generated = subprocess.run([sys.executable, "-m", "okapikv.cli", "deploy", "compose", "--out", str(out),
                                "--dcs", "east,west", "--partitions", "1", "--wan", "off", "--image", IMAGE],
                               capture_output=True, text=True, timeout=60, check=False)
    assert generated.returncode == 0, generated.stderr
    compose = [runtime, "compose", "-f", str(out / "compose.yaml"), "-p", "okapitest"]
    try:
        up = subprocess.run([*compose, "up", "-d"], capture_output=True, text=True, timeout=300, check=False)
        assert up.returncode == 0, up.stderr
        deadline = time.monotonic() + HEALTHY_TIMEOUT_S
        while True:
            listing = subprocess.run([*compose, "ps", "--format", "json"], capture_output=True, text=True,
                                     timeout=60, check=False)
            rows = [json.loads(line) for line in listing.stdout.splitlines() if line.strip().startswith("{")]
            if len(rows) == 2 and all(row.get("Health") == "healthy" for row in rows):
                break
            assert time.monotonic() < deadline, listing.stdout
            time.sleep(2)
        put = subprocess.run([*compose, "exec", "-T", "okapi-east-0", "okapi", "client", "--connect",
                              "okapi-east-0:7100"], input="PUT k v\nSTOP\n", capture_output=True, text=True,
                             timeout=60, check=False)
        assert put.returncode == 0, put.stderr
        deadline = time.monotonic() + 30
        while True:
            got = subprocess.run([*compose, "exec", "-T", "okapi-west-0", "okapi", "client", "--connect",
                                  "okapi-west-0:7100"], input="GET k\nSTOP\n", capture_output=True, text=True,
                                 timeout=60, check=False)
            if "v" in got.stdout.split():
                break
            assert time.monotonic() < deadline, got.stdout + got.stderr
            time.sleep(1)
    finally:
        subprocess.run([*compose, "down", "-v", "--timeout", "20"], capture_output=True, timeout=300, check=False)
