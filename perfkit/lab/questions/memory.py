"""The questions of memory and recompute: a layout's need and fit, recompute's effect."""

from __future__ import annotations

from ...calc import activation_memory, static_memory
from ...format import sig
from ..data import StudentData
from ..scenario import MEMORY_RESERVE
from .registry import GIB, NONE_TAKES_EFFECT, Question, Solution, question
from .tolerance import SHOWN_DIGITS, memory_tolerance

__all__ = ["MemoryNeed", "MemoryFit", "RecomputeEffective", "RecomputeMul"]


# ---- memory --------------------------------------------------------------------------------

def _layout_memory(data: StudentData) -> tuple[float, float, float]:
    lay = data.setup.layout
    model = lay.model
    static = static_memory(model, lay.parallel, scheme="mindspore").total_bytes
    act = activation_memory(model, lay.parallel).total_bytes
    limit = data.hardware.memory_bytes * (1 - MEMORY_RESERVE)
    return static, act, limit


def _layout_text(data: StudentData) -> str:
    lay = data.setup.layout
    p = lay.parallel
    extras = [f"optimizer sharded over {p.optimizer_shard}" if p.optimizer_shard > 1
              else "optimizer not sharded",
              "no recompute" if p.recompute == "none" else f"{p.recompute} recompute"]
    if p.sequence_parallel:
        extras.append("sequence parallel")
    return (f"the full {lay.preset} ({lay.model.num_layers} layers, sequence "
            f"{lay.model.seq_length}) with dp {p.dp} × tp {p.tp} × pp {p.pp}, micro-batch "
            f"size {p.micro_batch_size}, {p.num_micro_batches} micro-batches, "
            + ", ".join(extras))


@question
class MemoryNeed(Question):
    id = "memory_need"
    title = "Memory of a layout"
    stage = "memory"
    unit = "GiB"
    #: Each student's tolerance comes from the rounding of the calculator's figures
    #: (:func:`memory_tolerance`); this is the question's, where it cannot.
    rel_tol = 0.03
    tolerance_words = ("each student's own: the rounding of the calculator's figures (3 "
                       "significant digits)")
    guide = "05_memory"
    evidence = ("brief", "calculator")
    hint = ("Static memory (MindSpore's accounting): 10 bytes per parameter on the device "
            "(fp16 weights, fp32 Adam moments) divided by the optimizer shard, plus 2 bytes "
            "of fp16 gradient when accumulating micro-batches or pipelining. Activations: "
            "the seed's per-layer table times the layers and micro-batches in flight on the "
            "busiest stage (the first).")

    def solve(self, data: StudentData) -> Solution:
        """Static memory (MindSpore scheme) plus activations of the busiest device.

        The tolerance is the student's own (:func:`memory_tolerance`): the rounding of
        the calculator's static, activation and total memory (3 significant digits). The
        likely wrong quantities, activations alone and model states alone, are marked
        wrong wherever they lie further than that from the answer; ``facts`` gives them
        and says whether both can be told apart (``told_apart``), and so does the
        derivation."""
        static, act, _ = _layout_memory(data)
        value = (static + act) / GIB
        tol = memory_tolerance(static, act)
        wrong = {"activations alone": act / GIB, "model states alone": static / GIB}
        apart = all(abs(v - value) > tol for v in wrong.values())
        verdicts = "; ".join(
            f"{name} is {sig(v, 4)} GiB: " + (
                "the checker marks it wrong" if abs(v - value) > tol else
                "too close to the answer to tell apart, so the checker cannot mark it wrong")
            for name, v in wrong.items())
        return Solution(
            prompt=f"How much device memory does {_layout_text(data)} need per device: "
                   "model states plus activations, in GiB?",
            answer=value, options=None,
            derivation=f"perfkit.static_memory(scheme='mindspore') = "
                       f"{sig(static / GIB, 4)} GiB + perfkit.activation_memory = "
                       f"{sig(act / GIB, 4)} GiB = {sig(value, 4)} GiB ± {sig(tol, 2)} GiB "
                       f"(the calculator's {SHOWN_DIGITS} significant digits). "
                       f"{verdicts[0].upper()}{verdicts[1:]}.",
            explanation=f"{sig(static / GIB, 3)} GiB of weights, gradients and optimizer "
                        f"state plus {sig(act / GIB, 3)} GiB of activations.",
            settings=("layout",),
            facts={"static_gib": static / GIB, "activation_gib": act / GIB,
                   "told_apart": apart},
            rel_tol=0.0, abs_tol=tol)


@question
class MemoryFit(Question):
    id = "memory_fit"
    title = "Does the layout fit?"
    stage = "memory"
    kind = "choice"
    guide = "05_memory"
    evidence = ("brief", "calculator")
    hint = ("Compare what the layout needs per device with the usable memory: the "
            "device's memory less 10 % kept for workspace and fragmentation.")
    options = ("fits", "does not fit")

    def solve(self, data: StudentData) -> Solution:
        static, act, limit = _layout_memory(data)
        fits = static + act <= limit
        answer = self.options[0] if fits else self.options[1]
        return Solution(
            prompt=f"Does {_layout_text(data)} fit in the memory of your device "
                   f"({sig(data.hardware.memory_bytes / GIB, 3)} GiB, of which 90 % usable)?",
            answer=answer, options=list(self.options),
            derivation=f"{sig((static + act) / GIB, 4)} GiB needed vs {sig(limit / GIB, 4)} GiB "
                       "usable (device memory × 0.9)",
            explanation=f"{sig((static + act) / GIB, 3)} GiB against {sig(limit / GIB, 3)} GiB "
                        "usable. "
                        + ("" if fits else "Shard the optimizer, recompute more, or split "
                           "the model further (tp, pp)."),
            settings=("layout",))


# ---- recompute -----------------------------------------------------------------------------

@question
class RecomputeEffective(Question):
    id = "recompute_effective"
    title = "Which recompute patterns take effect?"
    stage = "recompute"
    kind = "choices"
    guide = "06_recompute"
    evidence = ("ir",)
    hint = ("A pattern takes effect only when the compiler really cloned an operator it "
            "selects into the backward graph (the clone carries duplicated: Bool(1)). "
            "Being configured, or even marked recompute: Bool(1), is not enough.")

    def solve(self, data: StudentData) -> Solution:
        pats = data.recompute_check.patterns
        configured = [str(p) for p in pats["pattern"]]
        taken = [str(p) for p, d in zip(pats["pattern"], pats["duplicated"], strict=True)
                 if d > 0]
        answer = taken or [NONE_TAKES_EFFECT]
        table = "; ".join(f"{p}: matched {int(m)}, marked {int(k)}, duplicated {int(d)}"
                          for p, m, k, d in zip(pats["pattern"], pats["matched"],
                                                pats["marked"], pats["duplicated"],
                                                strict=True))
        return Solution(
            prompt="Your configuration (ir/recompute.yaml) selects these patterns for "
                   "recompute. In your IR dump (ir/recompute_validate.ir.gz), which of them "
                   "take effect?",
            answer=answer, options=configured + [NONE_TAKES_EFFECT],
            derivation=f"perfkit.analysis.recompute_check: {table}",
            explanation=("Only " + ", ".join(taken) + " produced clones in the backward "
                         "graph." if taken else "None of them produced a clone in the "
                         "backward graph."),
            settings=("recompute",))


@question
class RecomputeMul(Question):
    id = "recompute_mul"
    title = "Is the MLP's Mul recomputed?"
    stage = "recompute"
    kind = "choice"
    guide = "06_recompute"
    evidence = ("ir",)
    hint = ("Follow the Mul of layer 1's MLP through the dump: is it marked for recompute, "
            "and does a clone of it appear in the backward graph? If it is marked but not "
            "cloned, look at its neighbours.")
    options = ("yes: it is cloned into the backward graph",
               "no: it is marked, but the Reshape next to it is not recomputed, so the "
               "compiler drops the clone",
               "no: it is not even marked; the configuration never reached the graph")

    def solve(self, data: StudentData) -> Solution:
        check = data.recompute_check
        m = check.matches
        mul = m[(m["op"] == "Mul") & (m["path"].astype(str).str.endswith(".mul"))
                & m["configured"].astype(bool)]
        if mul["duplicated"].astype(bool).any():
            answer = self.options[0]
        elif mul["marked"].astype(bool).any():
            answer = self.options[1]
        else:
            answer = self.options[2]
        return Solution(
            prompt="Look at the Mul of the MLP (it multiplies the SiLU branch by the up "
                   "projection) in layer 1, the layer that is not fully recomputed. Is it "
                   "recomputed?",
            answer=answer, options=list(self.options),
            derivation=f"perfkit.analysis.recompute_check matches of the Mul: "
                       f"marked {int(mul['marked'].astype(bool).sum())}, duplicated "
                       f"{int(mul['duplicated'].astype(bool).sum())} (of {len(mul)})",
            explanation={
                self.options[0]: "The Mul and the Reshapes around it are all selected, so "
                                 "the compiler can drop their forward outputs and clone "
                                 "them in the backward pass.",
                self.options[1]: "Recomputing the Mul alone saves nothing while its "
                                 "Reshape neighbours keep their outputs: add the Reshapes "
                                 "to the patterns.",
                self.options[2]: "No node carries the recompute mark: check that the "
                                 "recompute configuration is passed to the model at all.",
            }[answer],
            settings=("recompute",))
