#!/usr/bin/env bash
# The prepared scaling run for a many-core machine (docs/benchmarks.md, "Scaling"): 1, 2, 4, 8 partitions per
# DC, 3 DCs with the emulated WAN, YCSB-A and the paper's RO-TX + PUT, peak throughput per level.
# About 3 minutes on 16 cores; results (results.json, report.md, CSVs, scaling.png) go to
# ${OUT:-bench-out}/scaling.
#
# The machine may have no network: the project runs from src/ on the Python found there. Packages
# it lacks can travel as wheels in .whl/ (ignored by git), fetched here beforehand with
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux2014_x86_64 -d .whl hdrhistogram prometheus-client grpcio-health-checking
# (add any other dependency of pyproject.toml the machine lacks); they are installed into
# /tmp/site when present.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-bench-out}/scaling"
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
python3 -c "import grpc, google.protobuf, sortedcontainers, rich, hdrh, prometheus_client, matplotlib, numpy" \
    || { echo "device_scaling: a dependency is missing (see the header of this script)" >&2; exit 2; }
nproc
python3 -m okapikv.cli bench --suite scaling --partitions "${PARTITIONS:-8}" --no-progress --out "$out" "$@"
