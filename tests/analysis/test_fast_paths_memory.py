"""The advisor's device memory peak, read from the samples, is the peak of their components.

:func:`perfkit.analysis.memory.device_reserved_peak` reads the largest reserved figure of
the samples (``APP``'s where it has one, else any component but the host's) without the
per-component table of :func:`memory_peaks`; it must give what that table gives, as the
advisor read it before (benchmarks/README.md, session 10).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from perfkit.analysis import memory_peaks
from perfkit.analysis.memory import device_reserved_peak
from perfkit.profile import Profile, ProfileMeta

GIB = 2.0**30


def _from_peaks(profile: Profile) -> float:
    """The advisor's reading before: from the table of peaks per component."""
    peaks = memory_peaks(profile)
    peaks = peaks[peaks["component"].ne("host").fillna(True).to_numpy(bool)]
    if peaks.empty or not peaks["peak_reserved_bytes"].notna().any():
        return float("nan")
    app = peaks[peaks["component"] == "APP"]
    basis = app if app["peak_reserved_bytes"].notna().any() else peaks
    return float(basis["peak_reserved_bytes"].max())


def _samples(components: list[object], reserved: list[float]) -> pd.DataFrame:
    n = len(components)
    return pd.DataFrame({"rank": pd.array([0] * n, dtype="Int64"),
                         "component": pd.array(components, dtype="string"),
                         "ts_us": np.arange(float(n)), "allocated_bytes": np.nan,
                         "reserved_bytes": reserved, "active_bytes": np.nan})


CASES = {
    "APP has the reserved figure": (["PTA", "APP", "APP", "host"],
                                    [36 * GIB, 38 * GIB, 40 * GIB, 90 * GIB], 40 * GIB),
    "APP without one: the largest other": (["PTA", "APP", "GE", "host"],
                                           [36 * GIB, np.nan, 37 * GIB, 90 * GIB], 37 * GIB),
    "host only: none": (["host", "host"], [5 * GIB, 6 * GIB], np.nan),
    "no reserved figure": (["PTA", "APP"], [np.nan, np.nan], np.nan),
    "a component not named": ([None, "PTA"], [50 * GIB, 36 * GIB], 50 * GIB),
}


@pytest.mark.parametrize("case", list(CASES))
def test_device_peak_is_the_peak_of_the_components(case: str) -> None:
    components, reserved, want = CASES[case]
    profile = Profile(ProfileMeta("test", rank=0), {"memory": _samples(components, reserved)})
    got = device_reserved_peak(profile)
    assert got == pytest.approx(want, nan_ok=True)
    assert got == pytest.approx(_from_peaks(profile), nan_ok=True)


def test_no_memory_table_is_no_peak() -> None:
    profile = Profile(ProfileMeta("test", rank=0), {"memory": pd.DataFrame()})
    assert np.isnan(device_reserved_peak(profile))
