"""Memory analyses: peaks, timeline, largest allocations, measured vs theory."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from shared_samples import PT_LEVEL1, sample

import perfkit as pk
from perfkit.analysis import largest_allocations, memory_peaks, memory_timeline, memory_vs_theory
from perfkit.analysis.memory import framework_component
from perfkit.errors import InvalidArgumentError
from perfkit.io.engines.local import load
from perfkit.profile import Profile, ProfileMeta

GIB = 2.0**30


def _memory() -> pd.DataFrame:
    ts = np.arange(0.0, 1000.0, 1.0)
    alloc = np.full_like(ts, 10 * GIB)
    alloc[437] = 30 * GIB                      # a single-sample peak
    pta = pd.DataFrame({"component": "PTA", "ts_us": ts, "allocated_bytes": alloc,
                        "reserved_bytes": 36 * GIB, "active_bytes": alloc})
    app = pd.DataFrame({"component": "APP", "ts_us": [0.0, 500.0], "allocated_bytes": np.nan,
                        "reserved_bytes": [38 * GIB, 40 * GIB], "active_bytes": np.nan})
    return pd.concat([pta, app], ignore_index=True)


def _profile(**tables: pd.DataFrame) -> Profile:
    return Profile(ProfileMeta("test", rank=0), tables)


def test_peaks_per_component() -> None:
    out = memory_peaks(_profile(memory=_memory())).set_index("component")
    assert out.loc["PTA", "peak_allocated_bytes"] == 30 * GIB
    assert out.loc["PTA", "peak_ts_us"] == 437.0
    assert out.loc["PTA", "final_allocated_bytes"] == 10 * GIB
    assert np.isnan(out.loc["APP", "peak_allocated_bytes"])   # APP reports reserved only
    assert out.loc["APP", "peak_reserved_bytes"] == 40 * GIB


def test_timeline_is_downsampled_and_keeps_the_peak() -> None:
    tl = memory_timeline(_profile(memory=_memory()), max_points=50)
    pta = tl[tl["component"] == "PTA"]
    assert len(pta) <= 50
    assert pta["allocated_bytes"].max() == 30 * GIB
    with pytest.raises(InvalidArgumentError):
        memory_timeline(_profile(memory=_memory()), max_points=0)


def test_largest_allocations() -> None:
    om = pd.DataFrame({"name": ["a", "b", "a", "c"], "size_bytes": [5.0, 50.0, 40.0, 1.0],
                       "alloc_us": [0.0, 1.0, 2.0, 3.0], "release_us": [1.0, np.nan, 5.0, 4.0],
                       "duration_us": [1.0, np.nan, 3.0, 1.0]})
    p = _profile(op_memory=om)
    assert largest_allocations(p, n=2)["size_bytes"].tolist() == [50.0, 40.0]
    by = largest_allocations(p, by_name=True).set_index("name")
    assert by.loc["a", "total_bytes"] == 45.0 and by.loc["a", "count"] == 2


def test_measured_vs_theory_arithmetic() -> None:
    model = pk.ModelSpec.preset("llama2-7b")
    par = pk.ParallelConfig(tp=8, micro_batch_size=1)
    hw = pk.Hardware.preset("ascend-910b")
    out = memory_vs_theory(_profile(memory=_memory()), model, par, scheme="megatron",
                           hardware=hw).set_index("item")["bytes"]
    static = pk.static_memory(model, par, scheme="megatron").total_bytes
    act = pk.activation_memory(model, par).total_bytes
    assert out["theory_total"] == pytest.approx(static + act)
    assert out["measured_allocated"] == 30 * GIB
    assert out["gap"] == pytest.approx(30 * GIB - static - act)
    assert out["fragmentation"] == pytest.approx(6 * GIB)
    assert out["outside_framework"] == pytest.approx(4 * GIB)
    assert out["headroom"] == pytest.approx(hw.memory_bytes - 40 * GIB)


def test_absent_memory() -> None:
    p = _profile()
    assert memory_peaks(p).attrs["notes"]
    assert memory_timeline(p).empty
    assert largest_allocations(p).empty
    out = memory_vs_theory(p, pk.ModelSpec.preset("llama2-7b"), pk.ParallelConfig())
    assert out.empty and out.attrs["notes"]


@pytest.mark.shared_samples
def test_real_sample() -> None:
    prof = load(sample(PT_LEVEL1), cache=False)
    assert framework_component(prof) == "PTA+GE"
    peaks = memory_peaks(prof)
    m = prof.memory
    want = m[m["component"] == "PTA"].groupby("rank")["allocated_bytes"].max()
    got = peaks[peaks["component"] == "PTA"].set_index("rank")["peak_allocated_bytes"]
    assert got.sort_index().tolist() == want.sort_index().tolist()
    om = prof.op_memory
    top = largest_allocations(prof, n=3)
    assert top["size_bytes"].tolist() == sorted(om["size_bytes"], reverse=True)[:3]


def test_memory_vs_theory_flags_a_theory_for_another_job():
    # the bundled 13B baseline keeps 8 of the 40 layers: the full model's theory is far
    # above what was measured, and the table says so instead of printing it plainly
    import perfkit as pk
    from perfkit.tables import table

    cluster = pk.load("sample:llama2-13b-baseline-dp16")
    job = pk.infer_job(cluster)
    own = pk.analysis.memory_vs_theory(cluster, job.model, job.parallel, scheme="mindspore")
    assert not own.attrs.get("warnings")
    full = pk.ModelSpec.preset("llama2-13b")
    other = pk.analysis.memory_vs_theory(cluster, full, job.parallel, scheme="mindspore")
    theory = other.loc[other["item"] == "theory_total", "bytes"].iloc[0]
    measured = other.loc[other["item"] == "measured_allocated", "bytes"].max()
    assert theory / measured > 2  # 40 layers against the 8 that ran
    assert len(other.attrs["warnings"]) == 1 and "measured" in other.attrs["warnings"][0]
    assert other.attrs["warnings"][0] in table(other).html().replace("&#x27;", "'")
