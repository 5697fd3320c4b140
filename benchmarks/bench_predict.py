"""Prediction accuracy on published iteration times, and calibration speed.

Run: python benchmarks/bench_predict.py [--all-pairs] [--parts STUDY] [--measured]

Prints, for every run of perfkit.plan.published (Korthikanti et al. 2022 Table 5,
Narayanan et al. 2021 Table 1, MT-NLG 2022, Llama 3 Table 4, the MindFormers guide's
Llama2-13B case): the published step time, perfkit's prediction out of the box (default
rates) and calibrated (protocol: calibrate on the study's first run, predict the others),
their errors and whether the published time lies in the prediction's band; then the mean
and max errors over the runs in the statistics, overall and per study. ``--all-pairs``
also calibrates on every run in turn and predicts the rest of its study. ``--parts STUDY``
(a study name or its first word, e.g. ``MindFormers``) prints, for that study, each run's
calibrated parts per device and token, and the error of every run when each run of the
study calibrates in turn: where a calibration's misses come from.

``--held-out`` adds the held-out validation's summary (``benchmarks/validation``: runs of
six sources nobody here built the model on; out of the box, calibrated on each group's
first row, and other sources' calibrations: leave one source out).

``--measured`` prints instead the measured sets (tests/data/kineto_llama_layouts_h100
and kineto_llama_shapes_h100: one Llama on one H100 at seven layouts, in two sets;
kineto_llama_tp_h100 and kineto_llama_wide_tp_h100, the latter on Llama 2 7B's wider
layer: one tensor-parallel rank's share of three tp layouts, run without the tp
communication, so their predictions are the step less its ``tp_comm`` part): calibrated
on each set's layout ``a``'s profile, unclosed, closed (one factor, and
``closing="kernels"``: by kernel kind and pass) and as the Planner does (``fit_job``,
``predict_layout``), each layout predicted side by side with its step timed without the
profiler (environment.json) and its profiled device step
(``Calibration.measured_step_s`` of its own trace); then each layout's closed computing
and idle time against its own trace's computing time and the timed step less that, and
for a recomputed layout the same with the recompute style its trace shows
(``print_parts_measured``).

Last, the time ``perfkit.plan.calibrate`` takes on the bundled 16-rank profile
``sample:llama2-13b-baseline-dp16`` (the first call reads the profile's tables; later
calls on the same loaded profile reuse them), wall-clock and CPU time, median of 5.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

import perfkit as pk
from perfkit import plan
from perfkit.calc.elementwise import ELEMENTWISE_KERNELS
from perfkit.calc.rates import Rates
from perfkit.plan.calibrate import FORWARD_CLOSING, MATRIX_CLOSING
from perfkit.plan.published import BEHAVIOUR, PUBLISHED_RUNS, STUDIES, validate


def _pct(x: float) -> str:
    return f"{100 * x:+6.1f}%"


def print_table(table: pd.DataFrame) -> None:
    print(f"{'run':<34} {'published':>10} {'out of box':>11} {'err':>7} {'calibrated':>11} "
          f"{'err':>7} {'band':>17}  in band")
    for study in STUDIES:
        print(f"-- {study}")
        for r in table[table["study"] == study].itertuples(index=False):
            mark = "" if r.in_statistics else "  (not in statistics)"
            role = " *" if r.role == "calibrates" else ""
            print(f"{r.key + role:<34} {r.published_s:9.3f}s {r.out_of_box_s:10.3f}s "
                  f"{_pct(r.out_of_box_error)} {r.predicted_s:10.3f}s {_pct(r.error)} "
                  f"[{r.low_s:7.2f}, {r.high_s:7.2f}]  {'yes' if r.in_band else 'no'}{mark}")
    print("* the study's calibrating run (its fit closes on it)")


def print_statistics(table: pd.DataFrame) -> None:
    stats = table[table["in_statistics"]]
    predicted = stats[stats["role"] == "predicted"]
    print()
    print(f"{'':<34} {'out of box':>22} {'calibrated (predicted runs)':>30}")
    print(f"{'':<34} {'mean':>10} {'max':>10} {'mean':>12} {'max':>10} {'runs':>6}")

    def line(name: str, box: pd.Series, cal: pd.Series) -> None:
        print(f"{name:<34} {100 * box.abs().mean():9.1f}% {100 * box.abs().max():9.1f}% "
              f"{100 * cal.abs().mean():11.1f}% {100 * cal.abs().max():9.1f}% {len(cal):6d}")

    line("all studies", stats["out_of_box_error"], predicted["error"])
    for study in STUDIES:
        line(study, stats[stats["study"] == study]["out_of_box_error"],
             predicted[predicted["study"] == study]["error"])
    print(f"published time inside the calibrated band: {int(predicted['in_band'].sum())} of "
          f"{len(predicted)} predicted runs")


def all_pairs() -> None:
    """Every run calibrates in turn; the others of its study are predicted."""
    errors: dict[str, list[float]] = {s: [] for s in STUDIES}
    for anchor in PUBLISHED_RUNS:
        if not anchor.in_statistics:
            continue
        cal = plan.calibrate(anchor.step_s, anchor.model, anchor.parallel,
                             anchor.hardware_spec, activation_model=anchor.activation_model,
                             rates=anchor.rates, stage_layers=anchor.stage_layers)
        for run in PUBLISHED_RUNS:
            if run.study != anchor.study or run is anchor or not run.in_statistics:
                continue
            pred = plan.predict(cal, run.model, run.parallel, run.hardware_spec,
                                stage_layers=run.stage_layers,
                                activation_model=run.activation_model,
                                overrides={k: getattr(run.rates, k) for k in BEHAVIOUR})
            errors[run.study].append(pred.step_s / run.step_s - 1.0)
    print("\nall pairs (every run calibrates in turn):")
    every = [e for v in errors.values() for e in v]
    print(f"  all studies: mean {100 * statistics.fmean(map(abs, every)):.1f}%, "
          f"max {100 * max(map(abs, every)):.1f}% over {len(every)} predictions")
    for study, errs in errors.items():
        print(f"  {study}: mean {100 * statistics.fmean(map(abs, errs)):.1f}%, "
              f"max {100 * max(map(abs, errs)):.1f}%")


def _calibration(anchor):
    return plan.calibrate(anchor.step_s, anchor.model, anchor.parallel, anchor.hardware_spec,
                          activation_model=anchor.activation_model, rates=anchor.rates,
                          stage_layers=anchor.stage_layers)


def _predict(cal, run):
    return plan.predict(cal, run.model, run.parallel, run.hardware_spec,
                        stage_layers=run.stage_layers, activation_model=run.activation_model,
                        overrides={k: getattr(run.rates, k) for k in BEHAVIOUR})


def print_parts(name: str) -> None:
    """One study: parts per device-token of each run (calibrated on the study's anchor),
    then every run as the anchor in turn."""
    study = next((s for s in STUDIES if s == name or s.split()[0] == name), None)
    if study is None:
        raise SystemExit(f"--parts: no study {name!r}; one of {', '.join(STUDIES)}")
    runs = [r for r in PUBLISHED_RUNS if r.study == study]
    cal = _calibration(next(r for r in runs if r.calibrates))
    print(f"\n{study}: parts per device and token (µs), calibrated on the anchor")
    for run in runs:
        pred = _predict(cal, run)
        tokens = run.global_batch_size * run.model.seq_length / run.parallel.world_size
        parts = " ".join(f"{k} {1e6 * v / tokens:.1f}" for k, v in pred.parts.items() if v)
        print(f"  {run.key:<32} measured {1e6 * run.step_s / tokens:6.1f}  predicted "
              f"{1e6 * pred.step_s / tokens:6.1f} = {parts}")
    print(f"{study}: error of each run (columns) when each run (rows) calibrates")
    for anchor in runs:
        cal = _calibration(anchor)
        errs = " ".join(f"{_pct(_predict(cal, r).step_s / r.step_s - 1)}" for r in runs)
        print(f"  {anchor.key:<32} {errs}")


def time_calibrate(repeat: int = 5) -> None:
    first_wall = first_cpu = 0.0
    wall, cpu = [], []
    for i in range(repeat):
        profile = pk.load("sample:llama2-13b-baseline-dp16")
        w, c = time.perf_counter(), time.process_time()
        cal = plan.calibrate(profile)
        w, c = time.perf_counter() - w, time.process_time() - c
        if i == 0:
            first_wall, first_cpu = w, c
        wall.append(w)
        cpu.append(c)
        w, c = time.perf_counter(), time.process_time()
        plan.calibrate(profile)
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    fresh_w, again_w = wall[0::2], wall[1::2]
    fresh_c, again_c = cpu[0::2], cpu[1::2]
    print(f"\ncalibrate(sample:llama2-13b-baseline-dp16), 16 ranks, residual "
          f"{100 * cal.residual:+.2f}%:")
    print(f"  freshly loaded profile: wall {statistics.median(fresh_w):.3f} s, CPU "
          f"{statistics.median(fresh_c):.3f} s (median of {repeat}; very first call wall "
          f"{first_wall:.3f} s, CPU {first_cpu:.3f} s)")
    print(f"  profile already read:   wall {statistics.median(again_w):.3f} s, CPU "
          f"{statistics.median(again_c):.3f} s")


#: The measured layout sets (one Llama, one H100; PROVENANCE.md in each).
MEASURED = tuple(Path(__file__).resolve().parents[1] / "tests" / "data" / name
                 for name in ("kineto_llama_layouts_h100", "kineto_llama_shapes_h100",
                              "kineto_llama_tp_h100", "kineto_llama_wide_tp_h100"))


def print_measured(folder: Path, anchor: str = "a", elementwise: str = "read") -> None:
    """Each layout of a measured set predicted from ``anchor``'s profile, unclosed,
    closed (one factor; ``closing="kernels"``, by kernel kind and pass) and by the
    Planner (which changes the layout, not the model: "–" for another depth or
    sequence), against its timed step (median of 20 without the profiler,
    environment.json) and its profiled device step;
    errors are predicted / reference − 1. A tp share (``tp_share`` in environment.json)
    is predicted at that tp, less its ``tp_comm`` part (it ran without it).
    ``elementwise``: the calibrations' ``Rates.elementwise_kernels`` (how the model counts
    the layers' element-wise kernels; the traces ran eager PyTorch under autocast with
    fp32 weights), or ``"read"`` (default): no rates given, the count ``calibrate`` reads
    from the profile (``"amp"`` on these traces).
    """
    from perfkit.widgets.prediction_fit import fit_job, predict_layout

    env = json.loads((folder / "environment.json").read_text())
    layouts = env["layouts"]
    profiles = {k: pk.load(folder / f"{k}.pt.trace.json.gz", cache=False, progress=False)
                for k in layouts}
    profiled = {k: plan.calibrate(p).measured_step_s for k, p in profiles.items()}
    timed = {k: statistics.median(v["timed_steps_ms"]) / 1e3 for k, v in layouts.items()}
    rates = None if elementwise == "read" else Rates(elementwise_kernels=elementwise)
    cals = {close: plan.calibrate(profiles[anchor], close=close, rates=rates)
            for close in (False, True)}
    cals["kernels"] = plan.calibrate(profiles[anchor], close=True, closing="kernels",
                                     rates=rates)
    job = pk.infer_job(profiles[anchor])
    fit = fit_job(profiles[anchor], job)

    def layout(model: pk.ModelSpec, parallel: pk.ParallelConfig, key: str
               ) -> tuple[pk.ModelSpec, pk.ParallelConfig]:
        rec = layouts[key]
        return (dataclasses.replace(model, num_layers=rec.get("layers", model.num_layers),
                                    seq_length=rec.get("seq", model.seq_length)),
                dataclasses.replace(parallel, micro_batch_size=rec["micro_batch"],
                                    recompute=rec["recompute"], tp=rec.get("tp_share", 1)))

    def predicted(cal: plan.Calibration, key: str) -> float:
        model, parallel = layout(cal.job.model, cal.job.parallel, key)
        return _share(plan.predict(cal, model=model, parallel=parallel,
                                   global_batch_size=layouts[key]["micro_batch"],
                                   seq_length=model.seq_length))

    print(f"measured set {folder.name}: {env['gpu']}, calibrated on layout {anchor} "
          f"(residual before closing {cals[False].residual:+.1%}; element-wise kernels "
          f"counted {cals[False].rates.elementwise_kernels!r}"
          + (", read from the profile)" if rates is None else ")"))
    print(f"{'layout':<7} {'layers':>6} {'seq':>5} {'mb':>3} {'tp':>2} {'recompute':>9} "
          f"{'timed':>9} {'profiled':>9} {'unclosed':>9} {'vs timed':>8} {'closed':>9} "
          f"{'vs timed':>8} {'vs prof':>8} {'kernels':>9} {'vs timed':>8} {'Planner':>9}")
    pred = {(close, key): predicted(cal, key) for close, cal in cals.items() for key in layouts}
    for key in layouts:
        model, parallel = layout(job.model, job.parallel, key)
        planner = (f"{1e3 * _share(predict_layout(fit, job, parallel)):7.1f}ms"
                   if model == job.model else f"{'–':>9}")
        t, m = timed[key], profiled[key]
        print(f"{key + (' *' if key == anchor else ''):<7} {model.num_layers:>6} "
              f"{model.seq_length:>5} {layouts[key]['micro_batch']:>3} {parallel.tp:>2} "
              f"{layouts[key]['recompute']:>9} {1e3 * t:7.1f}ms {1e3 * m:7.1f}ms "
              f"{1e3 * pred[False, key]:7.1f}ms {_pct(pred[False, key] / t - 1)} "
              f"{1e3 * pred[True, key]:7.1f}ms {_pct(pred[True, key] / t - 1)} "
              f"{_pct(pred[True, key] / m - 1)} "
              f"{1e3 * pred['kernels', key]:7.1f}ms {_pct(pred['kernels', key] / t - 1)} "
              f"{planner}")
    print(f"ratios to {anchor}: " + ", ".join(
        f"{k} timed {timed[k] / timed[anchor]:.3f} unclosed "
        f"{pred[False, k] / pred[False, anchor]:.3f} "
        f"closed {pred[True, k] / pred[True, anchor]:.3f} "
        f"kernels {pred['kernels', k] / pred['kernels', anchor]:.3f}"
        for k in layouts if k != anchor))
    print(f"* the calibrating layout; timed: median of {len(layouts[anchor]['timed_steps_ms'])} "
          "steps without the profiler (environment.json); profiled: the trace's device step")
    for closing in (True, "kernels"):
        print_parts_measured(cals[closing], profiles, timed, layout)


def _share(pred: plan.Prediction) -> float:
    """A prediction's step, less its tensor-parallel communication where it has some: the
    tp shares of kineto_llama_tp_h100 and kineto_llama_wide_tp_h100 ran without it (a
    layout at tp 1 has none)."""
    return pred.step_s - pred.parts["tp_comm"]


#: The model's parts the device spends computing (``computing_us`` of a step).
_COMPUTING = ("compute", "recompute", "optimizer")


def print_parts_measured(cal: plan.Calibration, profiles: dict[str, pk.Profile],
                         timed: dict[str, float], layout: Callable[..., tuple]) -> None:
    """Where each layout's closed error comes from: the model's computing time against the
    computing time of the layout's own trace (``computing_us``, mean over its steps: the
    device's work does not change under the profiler), and its other parts (idle time)
    against the timed step less that computing time. For a recomputed layout, the same
    with ``overrides={"recompute_style": "needed"}``: what a recomputed layer reruns under
    ``torch.utils.checkpoint(use_reentrant=False)``, which stops once the backward's
    tensors are back (the traces' recomputed layers rerun 5 of their 6 forward products
    and attention kernels: not the MLP down projection)."""
    terms = {t for t, _, _ in cal.terms}
    how = ("kernels, by kind and pass" if FORWARD_CLOSING in terms
           else "kernels, by kind" if MATRIX_CLOSING in terms else "one factor")
    print(f"closed ({how}) parts (ms): computing model / trace, idle model / timed - trace "
          "computing; error of the step vs timed (its computing, idle shares)")
    for key, profile in profiles.items():
        busy = float(profile.steps["computing_us"].mean()) / 1e3
        model, parallel = layout(cal.job.model, cal.job.parallel, key)
        styles = [None] + (["needed"] if parallel.recompute != "none" else [])
        for style in styles:
            pred = plan.predict(cal, model=model, parallel=parallel,
                                global_batch_size=parallel.micro_batch_size,
                                seq_length=model.seq_length,
                                overrides={"recompute_style": style} if style else None)
            comp = 1e3 * sum(pred.parts[p] for p in _COMPUTING)
            idle = 1e3 * _share(pred) - comp
            t = 1e3 * timed[key]
            print(f"  {key:<2} {'recompute_style=' + style if style else '':<22} computing "
                  f"{comp:6.1f} / {busy:6.1f}  idle {idle:5.2f} / {t - busy:5.2f}  step "
                  f"{_pct(_share(pred) * 1e3 / t - 1)} ({_pct((comp - busy) / t)}, "
                  f"{_pct((idle - t + busy) / t)})")


def print_held_out() -> None:
    """The held-out validation's summary (``benchmarks/validation/run.py``): the runs
    above built and checked the model, these did not."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks.validation import run

    print("\nheld-out published runs (benchmarks/validation, PROTOCOL.md):")
    run._print(run.summary(run.evaluate()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--all-pairs", action="store_true", help="also every run as anchor")
    ap.add_argument("--no-timing", action="store_true", help="skip the calibration timing")
    ap.add_argument("--parts", metavar="STUDY", help="parts and all anchors of one study")
    ap.add_argument("--measured", action="store_true",
                    help="only the measured H100 layout sets (tests/data/"
                         "kineto_llama_layouts_h100, kineto_llama_shapes_h100, "
                         "kineto_llama_tp_h100, kineto_llama_wide_tp_h100), each "
                         "predicted from its layout a")
    ap.add_argument("--held-out", action="store_true",
                    help="also the held-out published runs (benchmarks/validation: 236 rows "
                         "of six sources; out of the box, calibrated in group and "
                         "leave-one-source-out, PROTOCOL.md)")
    ap.add_argument("--elementwise", choices=("read", *ELEMENTWISE_KERNELS), default="read",
                    help="with --measured: how the calibrations count the layers' "
                         "element-wise kernels (Rates.elementwise_kernels); 'read' "
                         "(default): what calibrate reads from the profile")
    args = ap.parse_args()
    if args.measured:
        for folder in MEASURED:
            print_measured(folder, elementwise=args.elementwise)
            print()
        return
    table = validate()
    print_table(table)
    print_statistics(table)
    if args.all_pairs:
        all_pairs()
    if args.parts:
        print_parts(args.parts)
    if args.held_out:
        print_held_out()
    if not args.no_timing:
        time_calibrate()


if __name__ == "__main__":
    main()
