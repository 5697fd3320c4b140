"""``perfkit simulate OUT [--scenario NAME | --model ... --dp ... --fault ...]``: write a
simulated profile (:func:`perfkit.simulate.simulate`), one of the bundled teaching
scenarios or any model, parallel layout and faults
(:func:`perfkit.cli.fault_spec.parse_fault`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from ...errors import InvalidArgumentError, PerfkitError
from ...format import counted
from ...specs import Hardware, ModelSpec, ParallelConfig
from .. import fault_spec
from ..args import paragraph

__all__ = ["add_parser", "run", "EPILOG", "simulate_command"]

#: The end of ``perfkit simulate --help``: the faults and examples.
EPILOG = """\
faults (--fault NAME[:VALUE,...], repeatable; values are field=value or positional in the
order shown; list items are joined with '+'):
  slow-rank:rank[,factor]                       e.g. slow-rank:rank=3,factor=1.5
  slow-link:src,dst[,bandwidth_factor]          e.g. slow-link:2,3,0.15
  unbalanced-stage:stage[,factor]               e.g. unbalanced-stage:stage=1,factor=1.4
  data-loading-stall:[stall_us,every,ranks]     e.g. data-stall:stall_us=120000,every=2,ranks=0+1
  unfused-operators:[ops]                       e.g. unfused-operators:ops=rms_norm+rotary
  host-bound:[launch_us]   no-overlap   memory-pressure:[fraction,realloc_us]   full-recompute

examples:
  perfkit simulate /tmp/slow-rank --scenario slow-rank
  perfkit simulate /tmp/job --model llama2-7b --num-layers 4 --dp 4 --num-micro-batches 2 \\
      --steps 2 --fault slow-rank:rank=2,factor=1.25
  perfkit simulate /tmp/pp --dp 2 --tp 2 --pp 2 --num-layers 8 --num-micro-batches 8 --light

OUT receives one folder per rank. It may be new, empty, or hold an earlier simulation
(replaced); anything else in it needs --force and is kept. See docs/simulate.md.
"""


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``simulate`` command to the subparsers of ``perfkit``."""
    from ...simulate.scenarios import SCENARIOS

    raw = argparse.RawDescriptionHelpFormatter
    sim_p = sub.add_parser(
        "simulate", help="write a simulated profile (a teaching scenario or your own job)",
        formatter_class=raw, epilog=EPILOG,
        description=paragraph("Write the profile of a training job that never ran, one folder "
                              "per rank in the Ascend text-export layout (perfkit.simulate), "
                              "with planted faults whose answer is known."))
    sim_p.add_argument("out", metavar="OUT", help="folder to write the rank folders into")
    sim_p.add_argument("--scenario", default=None, metavar="NAME",
                       help="one of the bundled scenarios of data/simulated/ (same settings "
                            "and seed, so the same files): "
                            + ", ".join(s.name for s in SCENARIOS)
                            + "; cannot be combined with the job options")
    job = sim_p.add_argument_group("the job (without --scenario)")
    job.add_argument("--model", default=None,
                     help="model preset (default llama2-13b): "
                          + ", ".join(ModelSpec.presets()))
    job.add_argument("--num-layers", type=int, default=None, metavar="N",
                     help="layers (default: the preset's)")
    job.add_argument("--seq-length", type=int, default=None, metavar="N",
                     help="sequence length (default: the preset's)")
    job.add_argument("--hardware", default=None,
                     help="hardware preset (default ascend-910b): "
                          + ", ".join(Hardware.presets()))
    for flag, what in (("--dp", "data parallel"), ("--tp", "tensor parallel"),
                       ("--pp", "pipeline stages"), ("--vpp", "virtual pipeline chunks"),
                       ("--micro-batch-size", "sequences per micro-batch"),
                       ("--num-micro-batches", "micro-batches per step"),
                       ("--optimizer-shard", "optimizer state sharded over N ranks")):
        job.add_argument(flag, type=int, default=None, metavar="N", help=f"{what} (default 1)")
    job.add_argument("--recompute", choices=("none", "selective", "full"), default=None,
                     help="recompute mode (default none)")
    job.add_argument("--recompute-layers", default=None, metavar="N[,N...]",
                     help="fully recomputed layers, one number or one per stage (e.g. 4,0)")
    job.add_argument("--fault", dest="faults", action="append", default=None,
                     metavar="NAME[:VALUE,...]",
                     help="plant a fault (repeatable); see the list below")
    job.add_argument("--efficiency", type=float, default=None,
                     help="achieved share of peak FLOP/s on matrix kernels (default 0.62)")
    job.add_argument("--allow-oom", action="store_true", default=None,
                     help="write the profile even when the job does not fit the device's "
                          "memory (it is refused otherwise)")
    job.add_argument("--light", action="store_true", default=None,
                     help="small files: no PMU columns, no per-kernel events in "
                          "trace_view.json")
    sim_p.add_argument("--steps", type=int, default=None, metavar="N",
                       help="training steps (default 3, or the scenario's)")
    sim_p.add_argument("--seed", type=int, default=0,
                       help="noise seed; same inputs and seed give the same bytes (default 0)")
    sim_p.add_argument("--framework", choices=("pytorch", "mindspore"), default="pytorch",
                       help="torch_npu (*_ascend_pt) or MindSpore (*_ascend_ms) layout "
                            "(default pytorch)")
    sim_p.add_argument("--force", action="store_true",
                       help="write into a folder that holds other files (they are kept)")
    return sim_p


def run(args: argparse.Namespace) -> int:
    """Run ``perfkit simulate`` (:func:`simulate_command`)."""
    return simulate_command(args)


_SIM_MARKER = "perfkit_simulation"


def _is_simulated_rank(path: Path) -> bool:
    """A rank folder written by :func:`perfkit.simulate.simulate`."""
    if not (path.is_dir() and path.name.endswith(("_ascend_pt", "_ascend_ms"))):
        return False
    try:
        meta = json.loads((path / "profiler_metadata.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and _SIM_MARKER in meta


#: ``perfkit simulate`` options that describe the job (not allowed with ``--scenario``).
_JOB_OPTIONS = ("model", "num_layers", "seq_length", "hardware", "dp", "tp", "pp", "vpp",
                "micro_batch_size", "num_micro_batches", "optimizer_shard", "recompute",
                "recompute_layers", "faults", "efficiency", "light", "allow_oom")


def _recompute_layers(text: str | None) -> int | tuple[int, ...] | None:
    if text is None:
        return None
    try:
        values = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise InvalidArgumentError("--recompute-layers", "must be a whole number or one per "
                                   "pipeline stage joined by ',', e.g. 4,0", text) from None
    return values[0] if len(values) == 1 else values


def _preset(cls: Any, option: str, name: str) -> Any:
    if name not in cls.presets():
        raise InvalidArgumentError(option, f"unknown preset; known: {', '.join(cls.presets())}",
                                   name)
    return cls.preset(name)


def simulate_command(args: argparse.Namespace) -> int:
    """``perfkit simulate``: validate, simulate into a temporary folder, then move in.

    OUT may be missing (created), empty, or hold rank folders of an earlier simulation
    (they are replaced). Anything else in OUT needs ``--force``, and is then left as it
    is. A failed simulation leaves OUT untouched.
    """
    from ...simulate import OutOfMemoryError, simulate
    from ...simulate import scenarios as S

    faults = tuple(fault_spec.parse_fault(spec) for spec in (args.faults or []))
    if args.scenario is not None:
        given = [f"--{k.replace('_', '-')}".replace("--faults", "--fault")
                 for k in _JOB_OPTIONS if getattr(args, k) is not None]
        if given:
            raise InvalidArgumentError("--scenario", "sets the model, layout, hardware and "
                                       f"faults itself; drop {', '.join(given)}")
        if args.scenario not in S.scenario_names():
            raise InvalidArgumentError("--scenario", "must be one of "
                                       f"{', '.join(S.scenario_names())}", args.scenario)
        scenario = S.scenario(args.scenario)
        what = f"scenario {scenario.name} ({scenario.title})"
        ranks = scenario.num_ranks
        steps = args.steps if args.steps is not None else scenario.steps

        def run(out: Path) -> Path:
            return S.write_scenario(scenario, out, seed=args.seed, steps=steps,
                                    framework=args.framework)
    else:
        model = _preset(ModelSpec, "--model", args.model or "llama2-13b")
        changes = {k: v for k, v in (("num_layers", args.num_layers),
                                     ("seq_length", args.seq_length)) if v is not None}
        if changes:
            model = model.replace(**changes)
        layout = {k: getattr(args, k) for k in ("dp", "tp", "pp", "vpp", "micro_batch_size",
                                                 "num_micro_batches", "optimizer_shard",
                                                 "recompute") if getattr(args, k) is not None}
        parallel = ParallelConfig(recompute_layers=_recompute_layers(args.recompute_layers),
                                  **layout)
        parallel.validate(model)
        hardware = _preset(Hardware, "--hardware", args.hardware or "ascend-910b")
        steps = 3 if args.steps is None else args.steps
        ranks = parallel.dp * parallel.tp * parallel.pp
        what = (f"{model.name} ({model.num_layers} layers) on {hardware.name}, dp {parallel.dp}"
                f" x tp {parallel.tp} x pp {parallel.pp}, "
                f"{counted(parallel.num_micro_batches, 'micro-batch')}"
                + (f", faults: {', '.join(map(repr, faults))}" if faults else ""))
        light = {"aic_metrics": None, "trace_kernels": False} if args.light else {}
        extra = {} if args.efficiency is None else {"efficiency": args.efficiency}

        def run(out: Path) -> Path:
            try:
                return simulate(model, parallel, hardware, steps=steps, faults=faults,
                                seed=args.seed, out=out, framework=args.framework,
                                allow_oom=bool(args.allow_oom), **light, **extra)
            except OutOfMemoryError as exc:  # the advice in this command's flags
                raise PerfkitError(
                    f"{exc.need} (more devices: --dp, --tp, --pp; "
                    "--optimizer-shard N, --recompute selective|full, --num-layers N for a "
                    "smaller model); pass --allow-oom to write the profile anyway") from None

    out = Path(args.out).expanduser()
    if out.exists() and not out.is_dir():
        raise InvalidArgumentError("OUT", "is a file; give a folder for the rank folders",
                                   str(out))
    old = [p for p in out.iterdir() if _is_simulated_rank(p)] if out.is_dir() else []
    others = sorted(p.name for p in out.iterdir() if p not in old) if out.is_dir() else []
    if others and not args.force:
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        raise InvalidArgumentError(
            "OUT", f"{out} is not empty and is not the output of an earlier perfkit simulate "
            f"(it holds {shown}); choose a new folder, or pass --force to write next to "
            "what is there (nothing of it is deleted)")
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    print(f"perfkit simulate: {what}; {counted(ranks, 'rank')}, {counted(steps, 'step')}",
          file=sys.stderr,
          flush=True)
    try:
        with tempfile.TemporaryDirectory(prefix=".perfkit-simulate-", dir=out) as tmp:
            run(Path(tmp))
            for p in old:
                shutil.rmtree(p)
            for p in sorted(Path(tmp).iterdir()):
                p.rename(out / p.name)
    except BaseException:
        if created and not any(out.iterdir()):
            out.rmdir()  # only the empty folder made above
        raise
    size = sum(f.stat().st_size for p in out.iterdir() if _is_simulated_rank(p)
               for f in p.rglob("*") if f.is_file())
    replaced = (f" (replaced {counted(len(old), 'rank folder')} of an earlier simulation)"
                if old else "")
    print(f"wrote {counted(ranks, 'rank folder')}, {counted(steps, 'step')}, "
          f"{size / 1e6:.1f} MB to {out}"
          f"{replaced}\nopen it with: perfkit info {out}   or in Python: "
          f"perfkit.load({str(out)!r})")
    return 0
