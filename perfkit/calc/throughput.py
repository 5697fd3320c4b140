"""Throughput and scaling: tokens/s per device, samples/s, linearity.

Two different "per p" appear in the literature, and this module keeps them apart:

* the seed guide defines ``tokens/s/p = SeqLength · samples/s / p`` with ``p`` the
  *data-parallel* size (:func:`tokens_per_second_per_p`);
* MFU and every cross-job comparison need tokens/s per *device*, dividing by all devices
  (:func:`tokens_per_second_per_device`). The two agree only when dp = all devices.
"""

from __future__ import annotations

from ..errors import check_choice, check_positive

__all__ = [
    "samples_per_second",
    "tokens_per_second",
    "tokens_per_second_per_device",
    "tokens_per_second_per_p",
    "step_time_from_tokens_per_second",
    "linearity",
]


def samples_per_second(global_batch_size: float, step_time_s: float) -> float:
    """Sequences per second of the whole job: ``global_batch_size / step_time_s``.

    This is the seed's ``throughput = BS · N / step_time`` (per-DP batch times DP size).
    """
    return check_positive("global_batch_size", global_batch_size) / check_positive(
        "step_time_s", step_time_s)


def tokens_per_second(global_batch_size: float, seq_length: float, step_time_s: float) -> float:
    """Tokens per second of the whole job: ``global_batch_size · seq_length / step_time_s``."""
    return samples_per_second(global_batch_size, step_time_s) * check_positive(
        "seq_length", seq_length)


def tokens_per_second_per_device(global_batch_size: float, seq_length: float,
                                 step_time_s: float, num_devices: int) -> float:
    """Tokens per second per device: ``B · s / (step_time · num_devices)``.

    The quantity MFU needs (Korthikanti §6.3; PaLM App. B).
    """
    return tokens_per_second(global_batch_size, seq_length, step_time_s) / check_positive(
        "num_devices", num_devices)


def tokens_per_second_per_p(global_batch_size: float, seq_length: float, step_time_s: float,
                            p: int) -> float:
    """The seed guide's ``tokens/s/p = SeqLength · (samples/s) / p``.

    The seed (MindFormers perf_optimize.md, "Throughput") defines ``p`` as the
    *data-parallel* dimension. With tensor or pipeline parallelism this is larger than the
    per-device figure by ``tp · pp``; pass ``p = num_devices`` to get the per-device value.
    """
    return tokens_per_second(global_batch_size, seq_length, step_time_s) / check_positive(
        "p", p)


def step_time_from_tokens_per_second(global_batch_size: float, seq_length: float,
                                     tokens_per_second_per_device_value: float,
                                     num_devices: int) -> float:
    """Inverse of :func:`tokens_per_second_per_device`: the step time in seconds."""
    total = check_positive("tokens_per_second_per_device_value",
                           tokens_per_second_per_device_value) * check_positive(
        "num_devices", num_devices)
    return check_positive("global_batch_size", global_batch_size) * check_positive(
        "seq_length", seq_length) / total


def linearity(throughput_n: float, throughput_base: float, n_devices: int,
              base_devices: int = 1, throughput: str = "total") -> float:
    """Scaling efficiency (the seed's 线性度 / speed-up ratio), 1.0 = perfectly linear.

    ``throughput="total"`` (default): the throughputs are of the whole job, and
    ``linearity = (throughput_n / throughput_base) / (n_devices / base_devices)`` —
    with ``base_devices=1`` this is the seed's "cluster throughput / (single-device
    throughput × devices)". ``throughput="per_device"``: the inputs are already per
    device and ``linearity = throughput_n / throughput_base``.
    Say whether the run scaled weakly (batch grows with N) or strongly (fixed batch):
    the number means different things. A value above 0.8 is usually considered good.
    """
    check_choice("throughput", throughput, ("total", "per_device"))
    ratio = check_positive("throughput_n", throughput_n) / check_positive(
        "throughput_base", throughput_base)
    if throughput == "per_device":
        check_positive("n_devices", n_devices)
        check_positive("base_devices", base_devices)
        return ratio
    return ratio / (check_positive("n_devices", n_devices) / check_positive(
        "base_devices", base_devices))
