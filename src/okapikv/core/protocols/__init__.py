"""Protocol variants behind one interface: ``create_protocol("okapi" | "cure" | "gentlerain" | "eventual")``."""

from okapikv.core.protocols import cure, eventual, gentlerain, okapi  # noqa: F401  (registration)
from okapikv.core.protocols.base import Protocol, WaitForStable, create_protocol, is_scalar, protocol_names

__all__ = ["Protocol", "WaitForStable", "create_protocol", "is_scalar", "protocol_names"]
