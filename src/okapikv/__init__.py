"""okapikv: a geo-replicated, causally consistent key-value store (the Okapi protocol).

``okapikv.Client`` and ``okapikv.AsyncClient`` are imported lazily so that importing the pure core
(``okapikv.core``) never pulls in gRPC.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["Client", "AsyncClient", "__version__"]


def __getattr__(name: str) -> Any:
    if name in ("Client", "AsyncClient"):
        from okapikv import client

        return getattr(client, name)
    raise AttributeError(f"module 'okapikv' has no attribute {name!r}")
