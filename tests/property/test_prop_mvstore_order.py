"""``MultiVersionStore.insert`` against a model (Okapi section 3.1, "Item"): whatever order the
versions of a key arrive in (a remote version late, replication re-delivered), its chain is the
set of distinct ``(timestamp, source_dc)`` orders, strictly increasing, each held by the first
version inserted with it; a duplicate order is refused and changes nothing."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from okapikv.core.mvstore import MultiVersionStore, Version

#: few timestamps and DCs, so that orders repeat and late versions land inside long chains
orders = st.tuples(st.integers(min_value=0, max_value=40), st.integers(min_value=0, max_value=3))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([b"a", b"b"]), orders), max_size=80))
def test_chains_hold_each_order_once_in_order(inserts: list[tuple[bytes, tuple[int, int]]]) -> None:
    store = MultiVersionStore()
    model: dict[bytes, dict[tuple[int, int], bytes]] = {}
    for number, (key, (timestamp, dc)) in enumerate(inserts):
        value = str(number).encode()
        held = model.setdefault(key, {})
        count = store.version_count
        inserted = store.insert(key, Version(value, timestamp, dc, None))
        assert inserted == ((timestamp, dc) not in held)
        assert store.version_count == count + inserted
        held.setdefault((timestamp, dc), value)
    for key, held in model.items():
        chain = store.versions(key)
        assert [version.order for version in chain] == sorted(held)
        assert [version.value for version in chain] == [held[order] for order in sorted(held)]
        assert store.latest(key) is chain[-1]
    assert store.version_count == sum(len(held) for held in model.values())
