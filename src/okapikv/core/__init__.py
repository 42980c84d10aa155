"""The pure protocol core of okapikv.

Nothing in this package touches a socket, an event loop, the wall clock or a random generator
(``tests/unit/test_core_purity.py`` enforces it). Every entry point takes ``now``, the reading of
the server's physical clock in microseconds, and returns effects as values, so the gRPC server
and the deterministic simulator drive exactly the same code (the h11 / aioquic model).
"""
