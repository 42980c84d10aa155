"""``python -m okapikv``: the ``okapi`` command, for environments without its script on PATH."""

from __future__ import annotations

import sys

from okapikv.cli import main

if __name__ == "__main__":
    sys.exit(main())
