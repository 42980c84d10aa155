"""The one error of ``okapi fuzz`` that is not a finding: the run could not be set up."""

from __future__ import annotations


class FuzzError(Exception):
    """The run could not be set up (exit status 2)."""
