"""Profile and Cluster: lazy tables, canonical columns, rank alignment."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from perfkit.io.canonical.schema import TABLE_NAMES, TABLES, conform
from perfkit.profile import Cluster, Profile, ProfileMeta


def _meta(rank, origin):
    return ProfileMeta(source_format="test", rank=rank, origin_ns=origin, path=f"r{rank}")


def test_tables_are_lazy_and_computed_once():
    calls = []

    def provider(name):
        calls.append(name)
        if name == "kernels":
            return pd.DataFrame({"name": ["a"], "start_us": [1.0], "dur_us": [2.0]})
        return None

    p = Profile(_meta(3, 0), provider)
    assert calls == []
    k = p.kernels
    _ = p.kernels
    assert calls == ["kernels"]
    assert list(k.columns[: len(TABLES["kernels"])]) == list(TABLES["kernels"])
    assert k["rank"].tolist() == [3]
    assert k["wait_us"].isna().all()  # absent in the source: NA, never 0
    assert len(p.ops) == 0 and list(p.ops.columns) == list(TABLES["ops"])


def test_every_table_has_its_key_columns():
    p = Profile(_meta(0, 0), {})
    for name in TABLE_NAMES:
        frame = getattr(p, name)
        assert list(frame.columns) == list(TABLES[name])
        for col, dtype in TABLES[name].items():
            assert str(frame[col].dtype) == dtype or (dtype == "string"
                                                      and frame[col].dtype == "string")


def test_units_are_in_column_names():
    for name, cols in TABLES.items():
        for col in cols:
            if col in ("rank", "step", "name", "type", "category", "core", "stream", "group",
                       "transport", "component", "thread", "src_rank", "dst_rank",
                       "input_shapes", "input_dtypes", "output_shapes"):
                continue
            assert col.endswith(("_us", "_bytes", "_gbps")), (name, col)


def test_conform_keeps_extras_and_casts():
    f = pd.DataFrame({"step": [1.0, np.nan], "name": ["x", None], "aic_mac_ratio": [0.5, 0.1]})
    out = conform(f, "kernels", rank=2)
    assert str(out["step"].dtype) == "Int64" and out["step"].isna().tolist() == [False, True]
    assert out["aic_mac_ratio"].tolist() == [0.5, 0.1]
    assert out["rank"].tolist() == [2, 2]


def test_cluster_aligns_ranks_on_earliest_origin():
    a = Profile(_meta(0, 1_000_000), {"kernels": pd.DataFrame({"start_us": [0.0],
                                                                "dur_us": [5.0]})})
    b = Profile(_meta(1, 1_003_000), {"kernels": pd.DataFrame({"start_us": [0.0],
                                                                "dur_us": [5.0]})})
    c = Cluster([b, a], ProfileMeta(source_format="cluster", origin_ns=1_000_000))
    assert c.ranks == [0, 1]
    k = c.kernels
    assert k["start_us"].tolist() == [0.0, 3.0]  # rank 1 started 3 µs later
    assert k["dur_us"].tolist() == [5.0, 5.0]  # durations are not shifted
    assert c[1] is b
    with pytest.raises(KeyError):
        c[5]
    assert len(c) == 2 and [p.rank for p in c] == [0, 1]


def test_cluster_shifts_the_step_start_column_like_every_instant():
    """``steps.step_start_us`` (Kineto's ProfilerStep start) is an instant: it moves."""
    steps = {"steps": pd.DataFrame({"step": [1], "computing_us": [1.0],
                                    "step_start_us": [10.0], "total_us": [20.0]})}
    a = Profile(_meta(0, 1_000_000), steps)
    b = Profile(_meta(1, 1_003_000), steps)
    c = Cluster([a, b], ProfileMeta(source_format="cluster", origin_ns=1_000_000))
    s = c.steps
    assert s["step_start_us"].tolist() == [10.0, 13.0]  # rank 1's clock starts 3 µs later
    assert s["total_us"].tolist() == [20.0, 20.0]  # a duration stays


def test_meta_round_trip():
    m = ProfileMeta(source_format="x", rank=1, groups={"g": {"global_ranks": [0, 1]}},
                    notes=["n"], extra={"k": 1})
    assert ProfileMeta.from_dict(m.to_dict()) == m


def test_cluster_maps_group_local_ranks_when_the_group_is_complete():
    def prof(rank, me, groups=("g8", "gx")):
        ops = pd.DataFrame({"group": list(groups), "name": ["allreduce", "send"][:len(groups)],
                            "elapse_us": [1.0] * len(groups)})
        # each rank records its own links: source = its own group-local rank
        mx = pd.DataFrame({"group": ["g8", "g8", "gx"], "name": ["allreduce-top1"] * 2
                           + ["send-top1"], "src_local": [float(me)] * 3,
                           "dst_local": [float(me), float(1 - me), 5.0],
                           "size_bytes": [1.0, 1.0, 1.0]})
        return Profile(_meta(rank, 0), {"comm_ops": ops, "comm_matrix": mx})

    # ranks 8 and 24 form group g8; group gx has a local rank 5 that is not in the cluster
    c = Cluster([prof(8, 0), prof(24, 1)], ProfileMeta(source_format="cluster", origin_ns=0))
    mx = c.comm_matrix
    g8 = mx[mx["group"] == "g8"]
    assert g8["src_rank"].tolist() == [8, 8, 24, 24]
    assert g8["dst_rank"].tolist() == [8, 24, 24, 8]
    assert mx.loc[mx["group"] == "gx", "dst_rank"].isna().all()
    assert any("g8" in n for n in c.meta.notes)
    # ranks that contradict the inferred order (rank 24 says it is local rank 0): no mapping
    c = Cluster([prof(8, 1), prof(24, 0)], ProfileMeta(source_format="cluster", origin_ns=0))
    assert c.comm_matrix["src_rank"].isna().all()
