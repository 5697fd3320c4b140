"""PyTorch profiler (Kineto) Chrome traces: ``.json`` / ``.json.gz``, one file per rank.

Accepted shapes: ``{"traceEvents": [...], "distributedInfo": {...}, ...}`` or a bare event
array, of every schema since PyTorch 1.8: the categories of PyTorch 1.8-1.9 (``Operator``,
``Runtime``, ``Kernel``, ``Memcpy``, ``Memset``; the device task's operator link written
``external id``) and of PyTorch >= 1.10 (``cpu_op``, ``user_annotation``, ``cuda_runtime``,
``cuda_driver``, ``kernel``, ``gpu_memcpy``, ``gpu_memset``, ``gpu_user_annotation``,
``python_function``, ``ac2g`` flows ...) are read as one set of kinds
(:func:`perfkit.io.canonical.categories.kineto_kind`); CUDA and ROCm/HIP traces alike (ROCm keeps
the
``cuda_runtime`` category, with ``hipLaunchKernel``, ``hipExtModuleLaunchKernel``,
``hipMemcpyAsync`` ... as names).

- ``kernels``: the device tasks (kernels, memcpy, memset). Communication is every kernel of
  a communication library (:func:`perfkit.io.canonical.categories.comm_family`: NCCL, RCCL, MSCCL,
  DeepEP, NVSHMEM, symmetric-memory and custom all-reduce kernels), with its ``family``.
  GPU-side user annotations (``gpu_user_annotation``: a ``record_function`` range drawn
  over the kernels it covered, ``ProfilerStep#N`` among them) are not tasks and are left out.
- ``ops``: the host operators (``cpu_op``) and host annotations (``user_annotation``;
  ``cat`` says which), with ``self_us`` (the time not spent in an operator nested inside,
  on the same thread) and the device time each launched.
- ``steps``: a step is its host ``ProfilerStep#N`` span; its device work is the tasks whose
  runtime launch (same ``correlation`` id) ran inside that span. A task launched outside
  every span (before the trace began, between steps) belongs to no step: it neither
  stretches a step nor counts in one. A CUDA / HIP graph replay is one ``cudaGraphLaunch`` /
  ``hipGraphLaunch`` whose correlation id every kernel of the graph carries: each kernel
  keeps its name and goes to the launch's step and operator
  (:mod:`~perfkit.io.kineto.graphs`; column ``graph_launch``). The step's window runs from
  its first to its last task. A CPU-only run (no device in the trace) is split from its host
  events: what the threads compute, and the collectives (``gloo:*`` on gloo's own threads,
  ``c10d::*``, ``record_param_comms``). A trace without ``ProfilerStep`` has its training
  iterations as steps where its optimizer's annotations tell them (:mod:`~perfkit.io.kineto.
  iterations`: each step ends where the iteration's last ``Optimizer.step#<Class>.step``
  ends, the iterations told apart by the backward pass before each; the column ``step_mark``
  names that annotation); otherwise it is one step over the whole trace (step number NA). A
  note says which.
- ``comm_ops``: the communication kernels, with the process group, collective and message
  size where the kernel's args record them (PyTorch >= 2.1); on a CPU-only run, the host
  collectives.
- ``memory``: ``[memory]`` instants. Those of a device (``Device Type`` 1 / ``Device Id``
  >= 0) are the ``allocator`` component; host allocator samples (``Device Type`` 0 /
  ``Device Id`` -1) are the ``host`` component, never the device's memory. Traces of
  PyTorch <= 1.9 record only each allocation's size: the allocated bytes are then the
  running sum since the trace began (memory held before it is not seen; a note says so).

The rank comes from ``distributedInfo.rank``, else from an explicit pattern of the file
name (:func:`perfkit.io._common.rank_from_name`), never from other digits; a note says
where. ``distributedInfo.pg_config`` becomes ``meta.groups`` and ``deviceProperties``
names the GPUs in ``meta.extra["devices"]``; ``meta.extra["vendor"]`` is ``"nvidia"`` or
``"amd"`` when the trace says (runtime and header); ``meta.extra["python_functions"]``
counts the ``python_function`` events (the Python stack ``with_stack=True`` records;
perfkit does not read them further).

With ``record_shapes=True`` every ``cpu_op`` carries ``Input Dims``, ``Input type`` and
``Concrete Inputs``; they become the ops' ``input_shapes`` / ``input_dtypes`` /
``concrete_inputs`` in the Ascend notation (``"4,64,64;64"``: dimensions joined by ``,``,
inputs by ``;``, an empty field for a non-tensor argument), and each GPU kernel gets those
of the operator that launched it (``op_name``, same ``External id``, else the innermost
operator open on the launching thread when its runtime call ran).

One module a job, every name re-exported here: :mod:`~perfkit.io.kineto.tables`
(:func:`parse`, :func:`parse_trace`: the tables put together),
:mod:`~perfkit.io.kineto.kinds` (the kind of every event),
:mod:`~perfkit.io.kineto.kernels`, :mod:`~perfkit.io.kineto.ops`,
:mod:`~perfkit.io.kineto.steps`, :mod:`~perfkit.io.kineto.comm` and
:mod:`~perfkit.io.kineto.memory` (one table each), :mod:`~perfkit.io.kineto.launches`
(which operator launched each device task), :mod:`~perfkit.io.kineto.graphs` (the tasks
graph launches ran), :mod:`~perfkit.io.kineto.iterations` (the
steps of a trace without ProfilerStep), :mod:`~perfkit.io.kineto.nesting` (events
nested on a thread: :func:`last_open`, :func:`self_times`) and
:mod:`~perfkit.io.kineto.meta` (vendor, process groups, last end).
"""

from __future__ import annotations

from typing import Any

from ..._lazy import lazy_attribute

# Each public name is imported from its module on first use (PEP 562), so a module that
# needs one helper of this package (a cached reopen's step scan) does not import the
# trace parser and its decoders.
_HOME: dict[str, str | None] = {
    "last_open": "nesting", "self_times": "nesting", "list_text": "ops",
    "shapes_text": "ops", "_steps": "steps", "CATEGORICAL": "tables",
    "TRACE_COLUMNS": "tables", "looks_like_kineto": "tables", "parse": "tables",
    "parse_trace": "tables",
}

__all__ = ["looks_like_kineto", "parse", "parse_trace", "shapes_text", "list_text", "last_open",
           "self_times", "TRACE_COLUMNS", "CATEGORICAL"]


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _HOME, globals(), name)
