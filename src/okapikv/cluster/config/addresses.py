"""``HOST:PORT`` addresses of the cluster config, IPv6 hosts in brackets."""

from __future__ import annotations

import ipaddress


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` -> (host, port), with a precise error otherwise."""
    host, separator, port_text = address.rpartition(":")
    if not separator or not host or not port_text.isdigit():
        raise ValueError(f"address {address!r} must be HOST:PORT")
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise ValueError(f"address {address!r}: port must be in 1..65535")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        ipaddress.IPv6Address(host)
    elif ":" in host:
        raise ValueError(f"address {address!r}: write an IPv6 host in brackets, as [::1]:7100")
    return host, port


def join_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
