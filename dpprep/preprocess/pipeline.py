"""Pipelines of several pre-processing steps and their composed sensitivity (Δ∞, Δ2).

Hu et al.'s Theorem 2 covers one data-dependent pre-processing π with sensitivities (Def. 4)
Δ∞ (how many common records of replace-one neighbours ``S1 = S ∪ {z1}``, ``S2 = S ∪ {z2}`` are
processed differently) and Δ2 (how far each moves). A :class:`Pipeline` chains steps (e.g. impute →
quantize → PCA) and reports the (Δ∞, Δ2) of the whole chain where a bound can be proven, so that the
result plugs into ``dpprep.preprocess.privacy.meta.overall_privacy`` unchanged. Where none is known
it raises a ValueError naming the two steps — never a silently invalid number.

Derivation. Run the pipeline on S1 and S2 and look at the two datasets ``A_t``, ``B_t`` after step
t. Invariant: they differ at the replaced position (arbitrarily) and at no more than ``c_t`` common
positions, each by at most ``r_t`` in L2; ``(c_0, r_0) = (0, 0)`` and the pipeline's
``(Δ∞, Δ2) = (c_m, r_m)``. Step t+1 maps ``(c, r)`` to ``(c', r')`` as follows.

1. **Row-wise, data-independent, L-Lipschitz map f** (unit-ball projection, a public rescaling):
   positions equal before stay equal, changed ones move ≤ L·r: ``(c, L·r)``.
2. **Data-dependent step with replace-one sensitivity (Δ∞, Δ2), input pair replace-one (c = 0)**:
   Def. 4 applies verbatim: ``(Δ∞, Δ2)``. This covers any data-dependent step first in the
   pipeline or after row-wise steps only (which keep c = 0); its sensitivity is the one it computes
   on its own input (the pipeline's intermediate data), as a bound over the collection ℒ of such
   inputs (the paper's conditional guarantee).
3. **Data-dependent step after a step that changed common records (c > 0)**: the inputs differ at
   ``k = c + 1`` positions, not one, so Def. 4 does not apply. A *group version* is needed; we prove
   one only for steps that declare one of two structural properties:

   - **chain**: go from ``A_t`` to ``B_t`` by replacing the k differing positions one at a time;
     consecutive datasets are replace-one neighbours. If the step's sensitivity holds for every
     dataset on that path (the ℒ-assumption of rule 2, extended to the path), a position equal in
     ``A_t`` and ``B_t`` is processed differently only if it is so in some link: at most ``k·Δ∞``
     such positions, each moved ≤ ``k·Δ2`` (triangle inequality along the path).
   - **displacement D** (``‖π_S(x) − x‖ ≤ D`` for every dataset S and record x; quantization:
     D = η, every member snaps to a representative within η): a common position moves by at most
     ``2D`` whatever the datasets, and a changed position (inputs u, u' with ‖u − u'‖ ≤ r) by at
     most ``r + 2D``. Together with the chain:
     ``c' = c + k·Δ∞``, ``r' = max(min(k·Δ2, 2D), r + 2D)``.
   - **uniform, 1-Lipschitz record map** (PCA rank reduction ``x ↦ P_S x``: Δ2 bounds
     ``‖(P_A − P_B)x‖ ≤ ‖P_A − P_B‖_op`` for *every* x in the unit ball, and each ``P_S`` is a
     projection): common positions move ≤ ``k·Δ2`` (chain), changed ones
     ``‖P_A u − P_B u'‖ ≤ ‖u − u'‖ + ‖(P_A − P_B)u'‖ ≤ r + k·Δ2``:
     ``c' = min(c + k·Δ∞, n)``, ``r' = r + k·Δ2``.

   Steps with neither property — imputation, whose fill values depend on the changed rows *and*
   whose changed rows may differ in their missingness — have no group version here: a pipeline that
   puts them after a data-dependent step raises ValueError naming the pair.

Counts are capped at n, and Δ2 at 2R when the step's outputs lie in a ball of radius R
(``output_radius``; R = 1 for every data-dependent step here, whose outputs stay in the unit ball —
imputation projects back onto it). Every composed bound is checked over sampled neighbouring
datasets in
``tests/preprocess/test_pipeline.py``. The per-step ℒ-caveats carry over (e.g. Prop. 3's Δ∞ for
quantization can be exceeded by crafted neighbours, see
``tests/preprocess/test_dedup_quantize.py``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Literal, Sequence, cast

import numpy as np

from dpprep.preprocess.dedup import deduplicate
from dpprep.preprocess.impute import impute_mean, impute_median
from dpprep.preprocess.pca import pca_reduce
from dpprep.preprocess.quantize import quantize
from dpprep.preprocess.sensitivity import Sensitivity
from dpprep.preprocess.unit_ball import project_to_unit_ball
from dpprep.validation import check_positive, check_positive_int

__all__ = [
    "Step",
    "Pipeline",
    "PipelineResult",
    "StepTrace",
    "compose",
    "rowwise",
    "project_step",
    "impute_mean_step",
    "impute_median_step",
    "quantize_step",
    "dedup_step",
    "pca_rank_step",
]

Group = Literal["none", "displacement", "uniform"]


@dataclasses.dataclass(frozen=True)
class Step:
    """One pre-processing step: a pure function ``fn(x) -> (processed x, Sensitivity)`` and how its
    sensitivity composes (module docstring).

    ``lipschitz``: set for a row-wise data-independent map (its Lipschitz constant; ``fn``'s
    Sensitivity is then ignored). Otherwise the step is data-dependent and ``group`` says which
    group version it has: ``"none"`` (replace-one inputs only), ``"displacement"`` (with bound
    ``displacement`` = D) or ``"uniform"`` (1-Lipschitz record map whose Δ2 holds for every point).
    ``output_radius``: every output row has norm ≤ this (so no record moves by more than twice it);
    None if unknown.
    """

    name: str
    fn: Callable[[np.ndarray], tuple[np.ndarray, Sensitivity]]
    lipschitz: float | None = None
    group: Group = "none"
    displacement: float | None = None
    output_radius: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("name must be a non-empty string")
        if not callable(self.fn):
            raise TypeError(f"step {self.name!r}: fn must be callable")
        if self.lipschitz is not None:
            check_positive(self.lipschitz, "lipschitz", allow_zero=True)
        if self.group not in ("none", "displacement", "uniform"):
            raise ValueError(
                f"step {self.name!r}: group must be 'none', 'displacement' or 'uniform', got"
                f" {self.group!r}"
            )
        if self.output_radius is not None:
            check_positive(self.output_radius, "output_radius")
        if self.group == "displacement":
            if self.displacement is None:
                raise ValueError(f"step {self.name!r}: group='displacement' needs displacement (D)")
            check_positive(self.displacement, "displacement", allow_zero=True)

    @property
    def rowwise(self) -> bool:
        return self.lipschitz is not None


@dataclasses.dataclass(frozen=True)
class StepTrace:
    """After one step: its own replace-one sensitivity (None for row-wise steps) and the pipeline's
    composed sensitivity so far."""

    name: str
    step_sensitivity: Sensitivity | None
    composed: Sensitivity


def _compose_one(
    prev: Sensitivity, prev_name: str | None, step: Step, own: Sensitivity | None, n: int
) -> Sensitivity:
    out = _compose_uncapped(prev, prev_name, step, own, n)
    if step.output_radius is not None and out.l2 > 2.0 * step.output_radius:
        return Sensitivity(linf=out.linf, l2=2.0 * step.output_radius)
    return out


def _compose_uncapped(
    prev: Sensitivity, prev_name: str | None, step: Step, own: Sensitivity | None, n: int
) -> Sensitivity:
    c, r = prev.linf, prev.l2
    if step.rowwise:
        # rowwise steps carry a lipschitz
        return Sensitivity(linf=c, l2=step.lipschitz * r)  # type: ignore[operator]
    if own is None:
        raise ValueError(f"step {step.name!r} is data-dependent and needs its Sensitivity")
    if c == 0:
        return Sensitivity(linf=min(own.linf, n), l2=own.l2)
    k = math.floor(c) + 1  # positions in which the step's two inputs differ
    if step.group == "displacement":
        d = cast(float, step.displacement)  # displacement steps carry one (__post_init__)
        return Sensitivity(
            linf=min(c + k * own.linf, n), l2=max(min(k * own.l2, 2.0 * d), r + 2.0 * d)
        )
    if step.group == "uniform":
        return Sensitivity(linf=min(c + k * own.linf, n), l2=r + k * own.l2)
    raise _no_bound(prev_name, step.name, f"up to {c:g}")


def _no_bound(prev_name: str | None, name: str, how_many: str) -> ValueError:
    return ValueError(
        f"no sensitivity bound is known for step {prev_name!r} followed by step {name!r}:"
        f" {prev_name!r} changes {how_many} common records, and {name!r}'s sensitivity is only"
        " known for replace-one inputs (no group version); reorder the pipeline (e.g. impute"
        " first) or analyse the pair yourself"
    )


def compose(
    steps: Sequence[Step], sensitivities: Sequence[Sensitivity | None], n: int
) -> list[StepTrace]:
    """The composed (Δ∞, Δ2) after each step (module docstring), from the steps' own sensitivities
    (``None`` for row-wise steps); ``n`` caps the counts. ValueError naming the pair of steps where
    no bound is known."""
    n = check_positive_int(n, "n")
    if len(steps) != len(sensitivities):
        raise ValueError(
            f"steps and sensitivities must have the same length, got {len(steps)} and"
            f" {len(sensitivities)}"
        )
    composed = Sensitivity(0.0, 0.0)
    last_changing: str | None = None
    out = []
    for step, own in zip(steps, sensitivities):
        composed = _compose_one(composed, last_changing, step, own, n)
        if not step.rowwise and composed.linf > 0:
            last_changing = step.name
        out.append(StepTrace(step.name, None if step.rowwise else own, composed))
    return out


@dataclasses.dataclass(frozen=True, eq=False)
class PipelineResult:
    """Output of :meth:`Pipeline.run`: the processed data, the composed ``sensitivity`` (Δ∞, Δ2) and
    the per-step ``trace``."""

    data: np.ndarray
    sensitivity: Sensitivity
    trace: tuple[StepTrace, ...]


@dataclasses.dataclass(frozen=True)
class Pipeline:
    """A chain of :class:`Step`s. ``check()`` validates the order without data (ValueError naming
    the pair of steps where no bound is known); ``run(x)`` applies the steps and composes their
    sensitivities."""

    steps: tuple[Step, ...]

    def __post_init__(self) -> None:
        steps = tuple(self.steps)
        if not steps:
            raise ValueError("steps must contain at least one Step")
        for s in steps:
            if not isinstance(s, Step):
                raise TypeError(f"steps must contain Step objects, got {type(s).__name__}")
        object.__setattr__(self, "steps", steps)

    def check(self) -> None:
        """Raises ValueError if some step's sensitivity cannot be composed with what precedes it
        (decided by structure alone: a step without a group version after a data-dependent step)."""
        changing: str | None = None
        for s in self.steps:
            if s.rowwise:
                continue
            if changing is not None and s.group == "none":
                raise _no_bound(changing, s.name, "(in general) several")
            changing = s.name

    def run(self, x) -> PipelineResult:
        self.check()
        data = np.asarray(x, dtype=np.float64)
        n = data.shape[0]
        own = []
        for s in self.steps:
            data, sens = s.fn(data)
            own.append(None if s.rowwise else sens)
        trace = compose(self.steps, own, n)
        return PipelineResult(data=data, sensitivity=trace[-1].composed, trace=tuple(trace))


# --- the steps dpprep provides ------------------------------------------------------------------


def rowwise(name: str, fn: Callable[[np.ndarray], np.ndarray], lipschitz: float) -> Step:
    """A data-independent row-wise map with Lipschitz constant ``lipschitz`` (the caller vouches for
    both: it must not look at other rows)."""
    return Step(name, lambda x: (fn(x), Sensitivity(0.0, 0.0)), lipschitz=lipschitz)


def project_step() -> Step:
    """Projection of every row onto the unit ball (row-wise, 1-Lipschitz)."""
    return dataclasses.replace(
        rowwise("project to unit ball", project_to_unit_ball, 1.0), output_radius=1.0
    )


def _result(fn):
    def step(x):
        res = fn(x)
        return res.data, res.sensitivity

    return step


def impute_mean_step() -> Step:
    """Mean imputation (Cor. 4); replace-one inputs only."""
    return Step("mean imputation", _result(impute_mean), output_radius=1.0)


def impute_median_step() -> Step:
    """Median imputation (Table 3); replace-one inputs only."""
    return Step("median imputation", _result(impute_median), output_radius=1.0)


def quantize_step(eta: float, *, conservative: bool = True) -> Step:
    """η-quantization (Prop. 3): every record moves ≤ η (displacement group version)."""
    eta = check_positive(eta, "eta")
    return Step(
        f"quantization (eta={eta:g})",
        _result(lambda x: quantize(x, eta, conservative=conservative)),
        group="displacement",
        displacement=eta,
        output_radius=1.0,
    )


def dedup_step(eta: float) -> Step:
    """η-deduplication (Prop. 3): a record is kept or becomes the zero record, so it moves ≤ ‖x‖ ≤
    1."""
    eta = check_positive(eta, "eta")
    return Step(
        f"deduplication (eta={eta:g})",
        _result(lambda x: deduplicate(x, eta)),
        group="displacement",
        displacement=1.0,
        output_radius=1.0,
    )


def pca_rank_step(k: int, *, gap_lower_bound: float | None = None) -> Step:
    """PCA rank reduction ``x ↦ P_S x`` (Prop. 5): uniform group version (module docstring)."""
    k = check_positive_int(k, "k")
    return Step(
        f"PCA rank-{k}",
        _result(lambda x: pca_reduce(x, k, mode="rank", gap_lower_bound=gap_lower_bound)),
        group="uniform",
        output_radius=1.0,
    )
