"""Coverage-guided fuzzing of okapikv's parsers with atheris (``okapikv.fuzz.parsers``).

Instruments okapikv, starts from the target's valid seeds (plus any corpus directories given) and
runs libFuzzer for ``--seconds``, every input through ``okapikv.fuzz.parsers.check`` (the bounds:
documented error only, memory, time, hiredis calls). libFuzzer prints the execution count at the end
(``Done N runs in S second(s)``); an input that breaks a bound is saved as ``crash-<sha1>`` in the
working directory, and ``--replay FILE`` runs the target on it once. docs/testing.md records runs.

    pip install -e '.[fuzz]'
    python scripts/fuzz_parsers.py --target resp --seconds 600 [CORPUS_DIR ...]
    python scripts/fuzz_parsers.py --target resp --replay crash-...
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

TARGETS = ("resp", "frames", "packed", "stdio", "config", "load", "history")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=TARGETS, required=True)
    parser.add_argument("--seconds", type=int, default=600)
    parser.add_argument("--replay", metavar="FILE", help="run the target once on FILE (a crash-* input)")
    parser.add_argument("corpus", nargs="*", help="corpus directories for libFuzzer (kept and grown)")
    args = parser.parse_args()
    if args.replay:
        from okapikv.fuzz.parsers import check

        cost = check(args.target, Path(args.replay).read_bytes())
        print(f"ok: {cost.seconds:.4f} s, {cost.peak_bytes} bytes at peak")
        return 0
    try:
        import atheris
    except ImportError:
        print("atheris is not installed: pip install -e '.[fuzz]'", file=sys.stderr)
        return 2
    with atheris.instrument_imports(include=["okapikv"]):  # coverage feedback from okapikv's code
        from okapikv.fuzz import parsers

    def one(data: bytes) -> None:
        parsers.check(args.target, data)

    seed_directory = tempfile.mkdtemp(prefix=f"okapi-fuzz-{args.target}-")
    for index, seed in enumerate(parsers.seeds(args.target)):
        Path(seed_directory, f"seed-{index}").write_bytes(seed)
    atheris.Setup([sys.argv[0], f"-max_total_time={args.seconds}", "-rss_limit_mb=4096", "-max_len=16384",
                   *args.corpus, seed_directory], one)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
