"""A one-rank GPU profile of hand-written kernels, for the attention tests (imported like
shared_samples)."""

from __future__ import annotations

import pandas as pd

from perfkit.profile import Profile, ProfileMeta

__all__ = ["one_stream_profile"]


def one_stream_profile(rows: list[tuple[str, str, str, float]]) -> Profile:
    """One rank, one step of GPU kernels on one stream: (launching operator, kernel name,
    input shapes, duration) each, 10 µs apart, bf16 inputs."""
    recs = [{"rank": 0, "step": 1, "name": kname, "type": "kernel", "category": "compute",
             "stream": 7, "start_us": 10.0 * i, "dur_us": dur, "op_name": op,
             "input_shapes": shapes, "input_dtypes": "c10::BFloat16;c10::BFloat16"}
            for i, (op, kname, shapes, dur) in enumerate(rows)]
    return Profile(ProfileMeta("test", framework="pytorch", rank=0, device_type="gpu"),
                   {"kernels": pd.DataFrame(recs)})
