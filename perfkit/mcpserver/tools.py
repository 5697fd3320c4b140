"""The tools of ``perfkit mcp``, as plain functions: each takes the folders the user
allowed and returns one answer of :mod:`perfkit.answers` (a dict). The MCP wiring is in
:mod:`perfkit.mcpserver.server`; these run and are tested without the SDK.

Paths are read only (perfkit never writes into a profile folder; its cache lives
elsewhere) and must lie inside a folder given with ``--allow``; ``sample:NAME`` (a bundled
sample) is always allowed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import InvalidArgumentError, PathNotFoundError, PerfkitError

__all__ = ["PathNotAllowedError", "Tools"]


class PathNotAllowedError(PerfkitError):
    """A tool was given a path outside the folders ``perfkit mcp --allow`` names."""

    code = "path_not_allowed"

    def __init__(self, path: str, allowed: Iterable[Path]) -> None:
        self.path = path
        folders = ", ".join(str(a) for a in allowed) or "none"
        super().__init__(f"path not allowed: {path} is outside the folders this server "
                         f"may read ({folders}; perfkit mcp --allow DIR adds one)")


class Tools:
    """The tools, bound to the allowed folders, with the profiles they load kept.

    Parameters
    ----------
    allow : iterable of path
        Folders whose files (at any depth) the tools may read. Each is resolved (``~``,
        symbolic links) when the server starts.
    """

    def __init__(self, allow: Iterable[str | os.PathLike[str]]) -> None:
        self.allowed = tuple(Path(a).expanduser().resolve() for a in allow)
        self._profiles: dict[tuple[str, Any], Any] = {}

    def check_path(self, path: str) -> str:
        """``path`` if a tool may read it: ``sample:NAME``, or a path inside an allowed
        folder once resolved (so ``..`` and links cannot leave it).

        Raises
        ------
        PathNotAllowedError
            Outside every allowed folder.
        """
        from ..bundled_samples import is_sample_spec, path_not_found

        if is_sample_spec(path):
            return path
        real = Path(path).expanduser().resolve()
        if not any(real == a or real.is_relative_to(a) for a in self.allowed):
            raise PathNotAllowedError(path, self.allowed)
        if not real.exists():  # said with the caller's path, not the resolved one
            raise PathNotFoundError(path, path_not_found(path))
        return str(real)

    def profile(self, path: str, run: int | str | None = None,
                argument: str = "run") -> Any:
        """The profile at an allowed ``path`` (loaded once per path and run);
        ``argument``: the tool's argument that picks the run, named where a folder holds
        several."""
        key = (self.check_path(path), run)
        if key not in self._profiles:
            from ..answers.paths import load_path

            self._profiles[key] = load_path(key[0], run=run, command="mcp",
                                            argument=argument)
        return self._profiles[key]

    def open_profile(self, path: str, run: int | str | None = None,
                     findings: int = 5) -> dict[str, Any]:
        """The ``info`` answer: what the profile is, its job, steps, top findings and
        what its recording lacks."""
        from ..answers import info_answer

        _count("findings", findings)
        return info_answer(self.profile(path, run), n_findings=findings)

    def list_runs(self, path: str) -> dict[str, Any]:
        """The ``runs`` answer: the separate runs a folder holds."""
        from ..answers import runs_answer
        from ..io.engines.local import runs

        checked = self.check_path(path)
        return runs_answer(runs(checked), path=checked)

    def get_job(self, path: str, run: int | str | None = None) -> dict[str, Any]:
        """The ``job`` answer: the job read from the profile, each value's source."""
        from ..answers import job_answer
        from ..job import infer_job

        return job_answer(infer_job(self.profile(path, run)), path=path)

    def advise(self, path: str, run: int | str | None = None,
               limit: int | None = None) -> dict[str, Any]:
        """The ``advise`` answer: the advisor's findings, best first."""
        from ..advisor import advise
        from ..answers import advise_answer
        from ..job import infer_job

        if limit is not None:
            _count("limit", limit)
        p = self.profile(path, run)
        job = infer_job(p)
        found = advise(p, model=job.model, parallel=job.parallel, hardware=job.hardware)
        return advise_answer(found, path=path, limit=limit)

    def check_recording(self, path: str, run: int | str | None = None) -> dict[str, Any]:
        """The ``check`` answer: what the recording lacks and the switch for it."""
        from ..answers import check_answer

        return check_answer(self.profile(path, run), path=path)

    def compare(self, a: str, b: str, run_a: int | str | None = None,
                run_b: int | str | None = None) -> dict[str, Any]:
        """The ``compare`` answer of run ``b`` against run ``a``
        (``perfkit.compare.compare(a, b).to_dict()``); ``run_a`` and ``run_b`` pick one
        of the separate runs a folder holds.

        Raises
        ------
        PerfkitError
            ``perfkit.compare`` is not part of this perfkit; a folder of several runs
            without ``run_a`` / ``run_b`` (named so in the message).
        """
        pa, pb = self.profile(a, run_a, "run_a"), self.profile(b, run_b, "run_b")
        try:
            from ..compare import compare  # type: ignore[attr-defined]
        except ImportError as exc:
            raise PerfkitError("compare is not available: this perfkit has no "
                               "perfkit.compare module") from exc
        return compare(pa, pb).to_dict()

    def predict_layout(self, path: str, run: int | str | None = None, *,
                       model: str | None = None, hardware: str | None = None,
                       config: list[str] | None = None, **layout: Any) -> dict[str, Any]:
        """The ``predict`` answer: calibrate on the profile, predict the layout given by
        ``layout`` (the options of ``perfkit plan``: dp, tp, pp, vpp, cp, ep,
        micro_batch_size, num_micro_batches, optimizer_shard, recompute,
        sequence_parallel; None keeps the run's). ``model`` and ``hardware`` (presets) and
        ``config`` (files inside the allowed folders) give what the profile does not show,
        as ``perfkit plan``'s ``--model``, ``--hardware`` and ``--config`` do."""
        from ..answers import predict_answer
        from ..answers.calibration import TOOL_OPTIONS, calibrated, wall_step_s
        from ..plan import predict
        from ..plan.relayout import relayout

        names = ("dp", "tp", "pp", "vpp", "cp", "ep", "micro_batch_size",
                 "num_micro_batches", "optimizer_shard", "recompute", "sequence_parallel")
        unknown = set(layout) - set(names)
        if unknown:
            raise PerfkitError(f"predict_layout: unknown layout options {sorted(unknown)}")
        configs = [self.check_path(c) for c in config or ()]
        p = self.profile(path, run)
        cal = calibrated(p, config=configs, model=model, hardware=hardware,
                         options=TOOL_OPTIONS)
        batch = (None if layout.get("num_micro_batches") is not None
                 else cal.job.global_batch_size)
        pred = predict(cal, parallel=relayout(cal.job.parallel, layout,
                                              cal.job.global_batch_size),
                       global_batch_size=batch)
        return predict_answer(pred, cal, path=path, wall_step_s=wall_step_s(p))


def _count(name: str, value: Any) -> None:
    """``value`` is a whole number >= 0 (as the command line's options check it)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgumentError(name, "must be a whole number >= 0", value)
