"""What a server keeps across a restart once its cluster grew by a DC (`okapi dc join`;
``okapikv.cluster.growth``, ``okapikv.core.growth``): it restarts with the grown config on the data
directory written before the growth; the membership file is kept; a config that is not the running
cluster's grown by one DC is refused and changes nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from okapikv.cluster import membership_cli
from okapikv.cluster.config import ClusterConfig, ServerConfig, local_cluster
from okapikv.cluster.growth import grown_config_problem
from okapikv.cluster.status import membership_figures
from okapikv.core.membership import JOINING, MEMBER, REMOVED, Membership
from okapikv.core.mvstore import Change, Version
from okapikv.server import membership_file
from okapikv.storage import DataDirError, Identity, SqliteStore
from okapikv.storage.sqlite import CommitGroup, State
from okapikv.wire.stats import MembershipFigures, NodeSnapshot

BEFORE = Identity("test", ("a", "b"), 1, "okapi", "a", 0)
GROWN = Identity("test", ("a", "b", "c"), 1, "okapi", "a", 0)


def test_a_data_directory_written_before_the_growth_opens_with_the_grown_config(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path, BEFORE)
    store.commit(CommitGroup(1, [Change(b"k", Version(b"v", 500, 0, (500, 7)), True)],
                             State((500, 7), (400, 6), (400, 6), (300, 5))))
    store.close()
    grown = SqliteStore(tmp_path, GROWN)
    state = grown.load_state()
    assert state is not None and state.vv == (500, 7)  # the core pads it (``PartitionServer.restore``)
    assert [(key, version.dv) for key, version in grown.load_versions()] == [(b"k", (500, 7))]
    grown.close()


@pytest.mark.parametrize("identity", [Identity("test", ("a",), 1, "okapi", "a", 0),  # fewer DCs
                                      Identity("test", ("a", "x", "c"), 1, "okapi", "a", 0)])  # b renamed
def test_a_directory_of_another_shape_is_still_refused(tmp_path: Path, identity: Identity) -> None:
    SqliteStore(tmp_path, BEFORE).close()
    with pytest.raises(DataDirError, match="belongs to another server"):
        SqliteStore(tmp_path, identity)


def test_the_membership_file_of_a_smaller_cluster_names_the_new_dc_joining(tmp_path: Path) -> None:
    membership_file.save(tmp_path, Membership(3, (MEMBER, MEMBER)))
    assert membership_file.load(tmp_path, 3) == Membership(3, (MEMBER, MEMBER, JOINING))
    with pytest.raises(ValueError, match="names 2 DCs, the config 1"):
        membership_file.load(tmp_path, 1)


def grown(config: ClusterConfig, name: str = "d", port: int = 7999) -> ClusterConfig:
    wan = tuple((*row, 0.0) for row in config.wan_ms) + ((0.0,) * (len(config.dcs) + 1),)
    return dataclasses.replace(config, dcs=(*config.dcs, name),
                               servers=(*config.servers, ServerConfig(name, 0, f"127.0.0.1:{port}")), wan_ms=wan)


def test_a_grown_config_is_the_cluster_with_one_more_dc_last() -> None:
    config = local_cluster(("a", "b", "c"), partitions=1, wan="off", base_port=7100)
    assert grown_config_problem(config, grown(config)) is None
    assert "must name 4" in (grown_config_problem(config, grown(grown(config), "e", 7998)) or "")
    assert "protocol" in (grown_config_problem(config, dataclasses.replace(grown(config), protocol="cure")) or "")
    moved = dataclasses.replace(grown(config), servers=(ServerConfig("a", 0, "127.0.0.1:7200"),
                                                        *grown(config).servers[1:]))
    assert "moves a/0" in (grown_config_problem(config, moved) or "")


def test_status_through_the_grown_config_names_a_dc_a_server_has_not_grown_to_unknown() -> None:
    snapshot = SimpleNamespace(membership=MembershipFigures(2, ("member", "removed"), ("a",)))
    figures = membership_figures(cast(NodeSnapshot, snapshot), ("a", "b", "d"))
    assert figures == {"membership_epoch": 2, "dc_states": {"a": "member", "b": "removed", "d": "unknown"}}


def test_okapi_dc_join_asks_every_running_server_and_skips_a_removed_dcs(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """`okapi dc join` (``run_join``): the grown config to every server of the running DCs, then the
    next epoch with the new DC joining; the servers of a removed DC (down) are not waited for."""
    config = local_cluster(("a", "b", "c"), partitions=1, wan="off", base_port=7100)
    path = grown(config).dump(tmp_path / "grown.toml")
    removed = Membership(1, (MEMBER, MEMBER, REMOVED))
    views = [membership_cli.ServerView("a", 0, "127.0.0.1:7100", removed),
             membership_cli.ServerView("b", 0, "127.0.0.1:7101", removed),
             membership_cli.ServerView("c", 0, "127.0.0.1:7102", None)]
    learned: list[str] = []
    sent: list[Membership] = []
    monkeypatch.setattr(membership_cli, "survey", lambda topology: views)
    def learn(view: membership_cli.ServerView, text: str, topology: object) -> bool:
        learned.append(view.dc)
        return True

    def send(view: membership_cli.ServerView, target: Membership, topology: object) -> bool:
        sent.append(target)
        return True

    monkeypatch.setattr(membership_cli, "_learn", learn)
    monkeypatch.setattr(membership_cli, "_send", send)
    monkeypatch.setattr(membership_cli, "_wait", lambda *arguments: 0)
    args = argparse.Namespace(name="d", config=str(path), connect=None, timeout=1.0, tls_ca=None, tls_cert=None,
                              tls_key=None, tls_server_name=None)
    assert membership_cli.run_join(args) == 0
    assert learned == ["a", "b"]
    assert sent == [Membership(2, (MEMBER, MEMBER, REMOVED, JOINING))] * 2
    args.name = "a"
    assert membership_cli.run_join(args) == 2  # not the config's last DC: nothing asked
    assert learned == ["a", "b"]
