"""Compare two profiles: before/after a change, or the same model on NPU and GPU.

Ascend and CUDA name their kernels differently (``MatMulV2`` vs
``sm90_xmma_gemm_bf16...``, ``FlashAttentionScore`` vs ``flash_fwd_kernel``), so a diff by
name only works between two profiles of the same vendor. :func:`kernel_class` maps both
naming schemes onto shared categories (``matmul``, ``attention``, ``norm``, ...) that the
seed's "comparison of GPU and NPU data" reasons with; :func:`compare_profiles` diffs either
by that category or by name.

Totals are normalised per (rank, step) by default so that a profile with two steps and one
with five compare fairly.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from .._stats import median
from .._text_dtype import TEXT
from ..errors import InvalidArgumentError
from ._frames import aggregate, any_values, is_lazy, transform
from ._shared import shared_factorize
from ._util import empty_frame, has_values, in_steps, n_step_pairs, table, take_array, typed
from .recorded import recorded_tasks
from .steps import step_breakdown

__all__ = ["kernel_class", "class_codes", "compare_profiles", "compare_steps", "operator_totals",
           "compare_totals", "KERNEL_CLASSES", "COMPARE_COLUMNS", "TOTALS_COLUMNS"]

#: (category, regex over "type name", lower-cased). The first match wins, so the specific
#: classes come before the generic ones.
KERNEL_CLASSES: tuple[tuple[str, str], ...] = (
    ("communication", r"hcom|hccl|nccl"),
    # flash_?attn: FlashAttention-3's cutlass kernels (flash::FlashAttnBwd<...>), which
    # "cutlass" would otherwise make GEMMs
    ("attention", r"flashattention|flash_?attn|flash_fwd|flash_bwd|fmha|attention|"
                  r"scaled_dot_product|sdpa"),
    ("embedding", r"embedding|gather|index_select|indexselect|scatter"),
    # a transpose a GEMM library ships (DeepSeek's dpsk::grouped_gemm::cuda::utils::
    # transpose<...>) moves data: its function's name decides, not its namespace's "gemm"
    ("copy", r"::(?:transpose|permute)(?:_kernel)?$"),
    # GEMMs and convolutions: cuBLAS (nvjet, gemv), hipBLASLt / Tensile (Cijk_), cuDNN
    # (scudnn, winograd, wgrad / dgrad engines, im2col)
    ("matmul", r"matmul|(?<!fb)gemm|gemv|bmm|cutlass|xmma|cublas|nvjet|^cijk_|scudnn|"
               r"winograd|conv2d|convolution|\bconv|(?<![a-z0-9])wgrad|(?<![a-z0-9])dgrad|"
               r"wgrad2d|dgrad2d|im2col|grouped_mm|\bmm\b"),
    # cuDNN batch norm (bn_fw_*, bn_bw_*); PyTorch's layer / group norm kernels
    ("norm", r"rmsnorm|rms_norm|layernorm|layer_norm|batchnorm|batch_norm|groupnorm|"
             r"instance_norm|\bbn_(?:fw|bw)|gammabetabackward|rowwisemoments"),
    ("softmax", r"softmax"),
    ("dropout", r"dropout|genmask|domask|bitmask"),
    ("activation", r"swiglu|silu|swish|gelu|relu|sigmoid|tanh|fastgelu"),
    ("rotary", r"rotary|rope"),
    # "lamb" but not the "{lambda()#1}" in nearly every PyTorch element-wise kernel's name
    ("optimizer", r"adam|foreach|multi_tensor|lamb(?!da)|sgd|ftrl|applymomentum|"
                  r"apply_momentum"),
    # not PyTorch's "gpu_kernel_impl_nocast" nor its "LoadWithoutCast" loaders
    ("cast", r"(?<!broad)(?<!no)(?<!without)cast|_to_copy|convert"),
    # "memory" as a type (Ascend), not PyTorch's "at::native::memory::" namespace
    ("copy", r"tensormove|memcpy|memset|copy|transdata|transpose|contiguous|permute|"
             r"concat|\bcat|split|slice|reshape|zeroslike|oneslike|asstrided|broadcastto|"
             r"nchwtonhwc|nhwctonchw|fill|memory(?!::)"),
    ("reduction", r"reduce|sum|mean|max|min|argmax|norm|cumsum|sort|scan|topk"),
    ("elementwise", r"add|mul|div|sub|sqrt|rsqrt|pow|exp|log|neg|where|select|equal|less|"
                    r"greater|logical|elementwise|vectorized|unrolled|abs|clamp|square"),
)
_GENERIC_CLASSES = ("elementwise", "reduction", "other")
_SIGNATURE = r"^(?:void\s+)?([^<(]*(?:<cutlass[^>(]*)?).*$"
_CUTLASS_LAUNCHER = r"^(?:void\s+)?cutlass::device_kernel<"
_CLASS_RES = [(c, re.compile(p)) for c, p in KERNEL_CLASSES]

COMPARE_COLUMNS: dict[str, str | pd.StringDtype] = {
    "key": TEXT, "base_count": "float64", "base_us": "float64", "new_count": "float64",
    "new_us": "float64", "delta_us": "float64", "delta_pct": "float64",
    "base_share": "float64", "new_share": "float64",
}
#: Columns of :func:`operator_totals` (indexed by the key).
TOTALS_COLUMNS = ("count", "us")


def _classify(label: pd.Series) -> pd.Series:
    """Class of each label: the first of :data:`KERNEL_CLASSES` whose regex matches.

    The labels are few (one per distinct name and type), so each is matched in Python.
    """
    def one(text: Any) -> str:
        if not isinstance(text, str):
            return "other"
        return next((c for c, rx in _CLASS_RES if rx.search(text)), "other")

    classes = {u: one(u) for u in label.unique()}
    return pd.Series([classes[v] for v in label], index=label.index, dtype=object)


def _class_of_pairs(names: pd.Series, types: pd.Series) -> pd.Series:
    # the function name only: "void ns::kernel<T...>(args)" -> "ns::kernel"
    label = names.str.replace("(anonymous namespace)::", "", regex=False)
    full = label.str.lower()
    out = _classify(label.str.replace(_SIGNATURE, r"\1", regex=True).str.lower())
    # generic kernels (elementwise / reduce templates) carry the operator in their
    # template arguments: "vectorized_elementwise_kernel<4, silu_kernel...>"
    by_full = _classify(full)
    generic = out.isin(_GENERIC_CLASSES) & ~by_full.isin([*_GENERIC_CLASSES, "matmul"])
    # CUTLASS's launcher "cutlass::device_kernel<K>" runs the kernel K of its template
    # argument, a GEMM or not (FlashAttention 3's flash::FlashAttnBwd): K decides
    wrapper = label.str.contains(_CUTLASS_LAUNCHER, regex=True) & ~by_full.isin(
        _GENERIC_CLASSES)
    out = by_full.where(generic | wrapper, out)
    by_type = _classify(types.str.lower())  # the operator type decides when specific
    return by_type.where(by_type != "other", out)


def kernel_class(names: pd.Series, types: pd.Series | None = None,
                 categories: pd.Series | None = None) -> pd.Series:
    """Shared category of each task (vendor-neutral), ``"other"`` when nothing matches.

    Parameters
    ----------
    names : Series
        Task names.
    types : Series, optional
        Operator types (Ascend ``Type``); matched together with the name.
    categories : Series, optional
        Canonical ``category``; a ``communication`` task is classed ``communication``.

    Returns
    -------
    Series of str
        The regexes of :data:`KERNEL_CLASSES` run once per distinct (name, type).
    """
    labels, row = class_codes(names, types, categories)
    text = pd.Series(labels, dtype=object).astype(str)
    return pd.Series(take_array(text.array, row), index=names.index)


def class_codes(names: pd.Series, types: pd.Series | None = None,
                categories: pd.Series | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`kernel_class` as codes: (class labels, each task's position in them).

    For callers that test one class (``labels[row] == "attention"``) without building a
    text column of a million rows.
    """
    names = _text(names)
    types = _text(types) if types is not None else \
        pd.Series("", index=names.index, dtype=TEXT)
    # distinct (name, type) pairs by code, in order of first appearance
    n_code, n_uniq = shared_factorize(names)
    t_code, t_uniq = shared_factorize(types)
    width = max(len(t_uniq), 1)
    pair = n_code.astype(np.int64) * width + t_code
    space = len(n_uniq) * width
    if len(pair) and space <= 4 * len(pair) + 1024 and int(pair.min()) >= 0:
        # the pairs present, read off a count of each possible pair (no hashing of the
        # rows); each row's class is then looked up by its pair's value
        first = np.flatnonzero(np.bincount(pair, minlength=space))
        codes, lookup = pair, True
    else:
        codes, first = pd.factorize(pair)
        lookup = False
    n_u = pd.Series(n_uniq, dtype=TEXT).take(first // width)
    t_u = pd.Series(t_uniq, dtype=TEXT).take(first % width)
    cls = _class_of_pairs(n_u.reset_index(drop=True), t_u.reset_index(drop=True))
    # one label per class, spread by integer code (no Python object per task)
    labels, of_pair = np.unique(np.array([*cls.tolist(), "communication"], dtype=str),
                                return_inverse=True)
    if lookup:  # each possible pair's class (the pairs absent never looked up)
        by_value = np.zeros(space, dtype=of_pair.dtype)
        by_value[first] = of_pair[:-1]
        row = by_value[codes]
    else:
        row = of_pair[:-1][codes]
    if categories is not None:
        comm = categories.eq("communication").fillna(False).to_numpy(bool)
        row = np.where(comm, of_pair[-1], row)
    return labels, row


def _text(values: pd.Series) -> pd.Series:
    """``values`` as text, missing values as ``""`` (copied only when some are missing).

    Text held as a categorical (the tasks in scope of a cached table) stays one while
    nothing is missing: it is read by code.
    """
    if isinstance(values.dtype, pd.CategoricalDtype) and not values.hasnans:
        return values
    text = values.astype(TEXT)
    return text.fillna("") if text.hasnans else text


def _keyed(k: pd.DataFrame, by: str, include_communication: bool) -> pd.DataFrame:
    """``_key`` (class or name) and ``dur_us`` of the tasks :func:`_totals` counts."""
    k = k.dropna(subset=["dur_us"])
    cls = kernel_class(k["name"], k.get("type"), k.get("category"))
    if not include_communication:
        keep = (cls != "communication").to_numpy(bool)
        k, cls = k[keep], cls[keep]
    key = cls if by == "category" else k["name"].astype(str)
    return pd.DataFrame({"_key": key.to_numpy(), "dur_us": k["dur_us"].to_numpy()},
                        index=k.index)


def _totals(k: Any, by: str, include_communication: bool) -> pd.DataFrame:
    """Count and summed ``dur_us`` per key of the tasks ``k`` (a ``kernels`` table, eager
    or lazy) of the steps (:func:`~._util.in_steps`)."""
    if is_lazy(k):  # counts and sums per key on the workers, over the steps' own tasks
        if not any_values(k, "dur_us"):
            return pd.DataFrame(columns=["count", "us"])
        a = aggregate(transform(in_steps(k), lambda f: _keyed(f, by, include_communication)),
                      ["_key"], {"dur_us": ["size", "sum"]})
        g = a.set_index("_key").rename_axis(None)
        g.columns = ["count", "us"]
        return g
    if k.empty or not has_values(k, "dur_us"):
        return pd.DataFrame(columns=["count", "us"])
    k = in_steps(k).dropna(subset=["dur_us"])
    cls = kernel_class(k["name"], k.get("type"), k.get("category"))
    if not include_communication:
        keep = (cls != "communication").to_numpy(bool)
        k, cls = k[keep], cls[keep]
    key = cls if by == "category" else k["name"].astype(str)
    g = k.groupby(key.to_numpy())["dur_us"].agg(["size", "sum"])
    g.columns = ["count", "us"]
    return g


def operator_totals(profile: Any, by: str = "category", normalize: str = "per_step",
                    include_communication: bool = True) -> pd.DataFrame:
    """Device-task count and time per key (category or name): one side of
    :func:`compare_profiles`.

    Parameters
    ----------
    profile : Profile or Cluster
    by, normalize, include_communication
        As for :func:`compare_profiles`.

    Returns
    -------
    DataFrame
        Indexed by the key, columns ``count`` and ``us`` (summed ``dur_us``), divided by
        the number of (rank, step) pairs when ``normalize="per_step"``. Only the tasks of
        the steps whose device tasks were recorded in full count, and only those (rank,
        step) pairs divide (:func:`~perfkit.analysis.recorded.recorded_tasks`, whose note
        ``attrs["notes"]`` then gives): a kernel list cut short (``ascend/msinsight-pt-
        gpt3-old``) holds a fragment of its step, not the step's operators. Kept so that a
        table can be stored (the tuning journal, :mod:`perfkit.journal`) and diffed later
        with :func:`compare_totals` without the profile: the diff is then exactly the one
        :func:`compare_profiles` makes.
    """
    if by not in ("category", "name"):
        raise InvalidArgumentError("by", "must be 'category' or 'name'", by)
    if normalize not in ("per_step", "none"):
        raise InvalidArgumentError("normalize", "must be 'per_step' or 'none'", normalize)
    kernels, why = recorded_tasks(table(profile, "kernels"), table(profile, "steps"))
    totals = _totals(kernels, by, include_communication)
    if normalize == "per_step" and not totals.empty:
        totals = totals / n_step_pairs(kernels)
    totals = totals.astype("float64")
    totals.attrs["notes"] = [why] if why else []
    return totals


def compare_totals(base: pd.DataFrame, new: pd.DataFrame, n: int | None = None
                   ) -> pd.DataFrame:
    """The diff of two :func:`operator_totals` tables (what :func:`compare_profiles`
    returns).

    Parameters
    ----------
    base, new : DataFrame
        Indexed by key, columns ``count`` and ``us``.
    n : int, optional
        Keep the ``n`` rows with the largest absolute delta.

    Returns
    -------
    DataFrame
        :data:`COMPARE_COLUMNS`; a key absent on one side counts 0 there. Each side's
        notes (the steps its figures are over, where some steps' device tasks were not
        recorded in full) are kept, led by ``"base: "`` or ``"new: "``.
    """
    # which steps each side's figures are over, where not all (operator_totals' notes)
    notes = [f"{side}: {n}" for side, frame in (("base", base), ("new", new))
             for n in frame.attrs.get("notes", [])]
    if base.empty and new.empty:
        out = empty_frame(COMPARE_COLUMNS, "neither profile has device tasks" + (
            " in a step whose device tasks were recorded in full" if notes else ""))
        out.attrs["notes"] = [*out.attrs.get("notes", []), *notes]
        return out
    b = base.reindex(columns=list(TOTALS_COLUMNS))
    w = new.reindex(columns=list(TOTALS_COLUMNS))
    out = b.add_prefix("base_").join(w.add_prefix("new_"), how="outer").fillna(0.0)
    out["delta_us"] = out["new_us"] - out["base_us"]
    out["delta_pct"] = 100.0 * out["delta_us"] / out["base_us"].where(out["base_us"] > 0)
    bt, nt = out["base_us"].sum(), out["new_us"].sum()
    out["base_share"] = out["base_us"] / bt if bt > 0 else np.nan
    out["new_share"] = out["new_us"] / nt if nt > 0 else np.nan
    out = out.rename_axis("key").reset_index()
    out = out.reindex(out["delta_us"].abs().sort_values(ascending=False, kind="mergesort")
                      .index)
    if n is not None:
        out = out.head(n)
    out = typed(out, COMPARE_COLUMNS).reset_index(drop=True)
    out.attrs["notes"] = notes
    return out


def compare_profiles(base: Any, new: Any, by: str = "category",
                     normalize: str = "per_step", include_communication: bool = True,
                     n: int | None = None) -> pd.DataFrame:
    """Operator time diff between two profiles, sorted by absolute time delta.

    Parameters
    ----------
    base, new : Profile or Cluster
        The reference (before / GPU) and the profile under study (after / NPU).
    by : {"category", "name"}
        Group by the shared category of :func:`kernel_class` or by task name (only
        meaningful between two profiles of the same vendor).
    normalize : {"per_step", "none"}
        Divide counts and times by the number of (rank, step) pairs of each profile.
    include_communication : bool
        Keep communication tasks (as category ``communication``).
    n : int, optional
        Keep the ``n`` rows with the largest absolute delta.

    Returns
    -------
    DataFrame
        :data:`COMPARE_COLUMNS`: ``key``, ``base_count``, ``base_us``, ``new_count``,
        ``new_us``, ``delta_us`` (new - base), ``delta_pct`` (of base; NA when base is 0),
        ``base_share``/``new_share`` of each profile's device time. A key absent on one
        side counts 0 there (the task did not run, which the profile shows).
        It is :func:`compare_totals` of the two :func:`operator_totals`.
    """
    return compare_totals(operator_totals(base, by, normalize, include_communication),
                          operator_totals(new, by, normalize, include_communication), n)


_STEP_PARTS = ("step_us", "computing_us", "comm_not_overlapped_us", "overlapped_us",
               "free_us", "bubble_us", "preparing_us")


def compare_steps(base: Any, new: Any) -> pd.DataFrame:
    """Step breakdown of two profiles side by side (median over ranks and steps).

    Returns
    -------
    DataFrame
        One row per part (``step_us``, ``computing_us``, ``comm_not_overlapped_us``,
        ``overlapped_us``, ``free_us``, ``bubble_us``, ``preparing_us``): ``base_us``,
        ``new_us``, ``delta_us`` and ``delta_pct`` (NA where either side lacks the part).
        The first place to look after a change: which part of the step moved.
    """
    cols = {"part": TEXT, "base_us": "float64", "new_us": "float64",
            "delta_us": "float64", "delta_pct": "float64"}
    b, w = step_breakdown(base), step_breakdown(new)
    if b.empty and w.empty:
        return empty_frame(cols, "neither profile has a step breakdown")
    out = pd.DataFrame({"part": list(_STEP_PARTS),
                        "base_us": [median(b[c]) if c in b else np.nan for c in _STEP_PARTS],
                        "new_us": [median(w[c]) if c in w else np.nan for c in _STEP_PARTS]})
    out["delta_us"] = out["new_us"] - out["base_us"]
    out["delta_pct"] = 100.0 * out["delta_us"] / out["base_us"].where(out["base_us"] > 0)
    return out.astype(cols)
