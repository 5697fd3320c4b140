"""Errors of perfkit's step model on published runs (protocol: PROTOCOL.md).

Run: python benchmarks/validation/run.py [--rows] [--csv PATH]

For every row of ``published_runs.csv`` (seven sources, see SOURCES.md): the measured step
time from the printed figure; perfkit's prediction out of the box (default rates),
calibrated within its group (``plan.calibrate`` on the group's first row, ``plan.predict``
for the others) and with the other sources' calibrations on the same hardware and
precision (leave one source out, median). Prints per-source and overall mean, 95th
percentile and worst absolute % error, and every refused row with its reason.
"""

from __future__ import annotations

import argparse
import inspect
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.validation.rows import MappedRow, Refusal, map_row, read_rows  # noqa: E402
from perfkit import plan  # noqa: E402
from perfkit.format import number_text  # noqa: E402

__all__ = ["evaluate", "summary", "MODES", "Options"]

#: The three predictions of the protocol: column prefix and title.
MODES = (("box", "out of the box"), ("cal", "calibrated in group"),
         ("loso", "other sources' calibrations"))


def _err(pred: float, step: float) -> float:
    return 100.0 * abs(pred / step - 1.0)


#: Extra keyword arguments of ``calibrate`` and ``predict`` for a row (the hook for a model
#: with more options: e.g. ``lambda m: {"overrides": {...}}`` from ``m.extra["overlap"]``).
Options = Callable[[MappedRow], dict[str, Any]]
_OPTIONS: list[Options | None] = [None]


def _kwargs(m: MappedRow, function: Callable[..., Any]) -> dict[str, Any]:
    """The row's keyword arguments and its options, those ``function`` takes."""
    options = _OPTIONS[0]
    extra = options(m) if options else {}
    takes = inspect.signature(function).parameters
    return {k: v for k, v in {**m.kwargs(), **extra}.items() if k in takes}


def _predict(cal: Any, m: MappedRow) -> Any:
    return plan.predict(cal, m.model, m.parallel, m.hardware, **_kwargs(m, plan.predict))


def evaluate(rows: list[dict[str, Any]] | None = None,
             options: Options | None = None) -> pd.DataFrame:
    """One row per published run: measured step, the three predictions, errors, refusals.

    ``options(mapped_row)`` returns extra keyword arguments for ``calibrate`` and
    ``predict`` (framework, overlap or precision options of a later model, read from the
    row's ``extra``); each function gets those its signature names, and a row whose
    options the model rejects is refused with the message.
    """
    rows = read_rows() if rows is None else rows
    _OPTIONS[0] = options
    mapped = {r["row_id"]: map_row(r) for r in rows}
    anchors: dict[str, Any] = {}  # group -> Calibration or the refusal text
    out = []
    for r in rows:
        m = mapped[r["row_id"]]
        rec: dict[str, Any] = {"row_id": r["row_id"], "source_id": r["source_id"],
                               "group": r["group"], "hardware": r["hardware"],
                               "precision": r["precision"], "role": "predicted"}
        if r["group"] not in anchors:
            rec["role"] = "anchor"
            if isinstance(m, Refusal):
                anchors[r["group"]] = f"anchor refused: {m.reason}"
            else:
                try:
                    anchors[r["group"]] = plan.calibrate(m.step_s, m.model, m.parallel,
                                                         m.hardware,
                                                         **_kwargs(m, plan.calibrate))
                except Exception as exc:
                    anchors[r["group"]] = f"anchor refused: {type(exc).__name__}: {exc}"
        if isinstance(m, Refusal):
            for key, _ in MODES:
                rec[f"{key}_refused"] = m.reason
            out.append(rec)
            continue
        rec["measured_s"] = m.step_s
        try:
            box = _predict(None, m)
            rec.update(box_s=box.step_s, box_err=_err(box.step_s, m.step_s), fits=box.fits)
        except Exception as exc:
            rec["box_refused"] = f"{type(exc).__name__}: {exc}"
        cal = anchors[r["group"]]
        if isinstance(cal, str):
            rec["cal_refused"] = cal
        elif rec["role"] == "predicted":
            try:
                p = _predict(cal, m)
                rec.update(cal_s=p.step_s, cal_err=_err(p.step_s, m.step_s))
            except Exception as exc:
                rec["cal_refused"] = f"{type(exc).__name__}: {exc}"
        rec["_m"] = m
        out.append(rec)
    _loso(out, anchors, rows)
    for rec in out:
        rec.pop("_m", None)
    return pd.DataFrame(out)


def _loso(out: list[dict[str, Any]], anchors: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    source_of: dict[str, tuple[str, str, str]] = {}
    for r in rows:  # a group's calibration is its first row's: that row's hardware and type
        source_of.setdefault(r["group"], (r["source_id"], r["hardware"], r["precision"]))
    for rec in out:
        m = rec.get("_m")
        if m is None:
            continue
        others = [cal for g, cal in anchors.items() if not isinstance(cal, str)
                  and source_of[g][0] != rec["source_id"]
                  and source_of[g][1:] == (rec["hardware"], rec["precision"])]
        if not others:
            rec["loso_refused"] = "no other source on this hardware and precision"
            continue
        preds = []
        for cal in others:
            try:
                preds.append(_predict(cal, m).step_s)
            except Exception:  # a calibration that cannot take this layout is skipped
                continue
        if not preds:
            rec["loso_refused"] = "no other source's calibration takes this layout"
            continue
        s = float(np.median(preds))
        rec.update(loso_s=s, loso_err=_err(s, rec["measured_s"]), loso_n=len(preds))


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per source and overall: n, mean, p95, worst |error| % (and its row), refused, and
    the median signed error (negative: the model is faster than the run)."""
    lines = []
    for source, part in list(df.groupby("source_id", sort=False)) + [("all", df)]:
        for key, title in MODES:
            col = f"{key}_err"
            errs = part[col].dropna() if col in part else pd.Series(dtype=float)
            refused = int(part[f"{key}_refused"].notna().sum()) if f"{key}_refused" in part else 0
            worst = part.loc[errs.idxmax(), "row_id"] if len(errs) else ""
            signed = (part[f"{key}_s"] / part["measured_s"] - 1.0).dropna() * 100.0 \
                if f"{key}_s" in part else pd.Series(dtype=float)
            lines.append({"source": source, "prediction": title, "n": len(errs),
                          "mean_pct": errs.mean() if len(errs) else math.nan,
                          "p95_pct": float(np.percentile(errs, 95)) if len(errs) else math.nan,
                          "worst_pct": errs.max() if len(errs) else math.nan,
                          "worst_row": worst, "refused": refused,
                          "median_signed_pct": signed.median() if len(signed) else math.nan})
    return pd.DataFrame(lines)


def _print(table: pd.DataFrame) -> None:
    shown = table.copy()
    for c in ("mean_pct", "p95_pct", "worst_pct", "median_signed_pct"):
        shown[c] = [number_text(v) for v in shown[c]]
    print(shown.to_string(index=False))


#: The framework a row names (its ``framework`` column, as the source states it) -> the
#: step model's behaviour preset (``perfkit.calc.behaviour.Behaviour``). Fixed from the
#: frameworks' documented defaults, before any error with it was computed; nothing here is
#: chosen per source or per row.
FRAMEWORK_PRESETS = (("nemo", "nemo"), ("megatron-deepspeed", "deepspeed"),
                     ("deepspeed", "deepspeed"), ("megatron", "megatron"),
                     ("torchtitan", "fsdp"), ("fsdp", "fsdp"), ("mindformers", "mindspore"),
                     ("mindspore", "mindspore"), ("ddp", "ddp"))


def framework_preset(framework: str) -> str | None:
    """The behaviour preset of a row's stated framework (first match in
    :data:`FRAMEWORK_PRESETS`), or None."""
    low = framework.lower()
    return next((preset for key, preset in FRAMEWORK_PRESETS if key in low), None)


def framework_options(m: MappedRow) -> dict[str, Any]:
    """``predict(behaviour=...)`` and ``calibrate(rates=...)`` with the row's framework's
    behaviour: its overlap recipe and fixed costs (``--frameworks``)."""
    from perfkit.calc.behaviour import Behaviour
    from perfkit.calc.rates import Rates

    name = framework_preset(str(m.extra.get("framework", "")))
    if name is None:
        return {}
    behaviour = Behaviour.preset(name, attention_implementation=m.attention_implementation)
    # the row's own fields (its amendments) over the preset's, as predict applies them
    fields = {**behaviour.overrides(), **m.kwargs().get("overrides", {})}
    return {"behaviour": behaviour, "rates": Rates().replace(**fields)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", action="store_true", help="print every row")
    ap.add_argument("--csv", type=Path, help="write every row to this CSV")
    ap.add_argument("--frameworks", action="store_true",
                    help="price each row with its stated framework's behaviour preset "
                         "(overlap recipe, fixed costs)")
    args = ap.parse_args(argv)
    df = evaluate(options=framework_options if args.frameworks else None)
    counts = df.groupby("source_id", sort=False).size()
    print("rows per source:", ", ".join(f"{s} {n}" for s, n in counts.items()))
    _print(summary(df))
    refused = df.filter(like="_refused")
    reasons = pd.Series(refused.stack().values).value_counts() if refused.size else []
    if len(reasons):
        print("\nrefusals (prediction × row) by reason:")
        for why, n in reasons.items():
            print(f"  {n:4d}  {why}")
    if "fits" in df:
        print(f"\nrows predicted not to fit in memory (reported, kept): "
              f"{int((df['fits'] == False).sum())}")  # noqa: E712
    if args.rows:
        cols = [c for c in ("row_id", "role", "measured_s", "box_s", "box_err", "cal_s",
                            "cal_err", "loso_s", "loso_err") if c in df]
        print(df[cols].to_string(index=False))
    if args.csv:
        df.to_csv(args.csv, index=False)


if __name__ == "__main__":
    main()
