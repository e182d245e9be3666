"""The cost models' shared pieces: :class:`Cost`, FLOP counts of the engines' kernels and the
dataset shapes they need (checked against the loaders by
``tests/experiments/test_planning_costs.py``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Sequence


GIB = 2**30
# Sizes (n_train, d, classes) of the datasets the cost models need; read from the files would cost
# a load per plan, and cifar100_features is user-supplied (640-d WRN features, dpprep.data).
DATA_SHAPES = {
    "mnist": (60_000, 784, 10),
    "fashion_mnist": (60_000, 784, 10),
    "cifar100_features": (50_000, 640, 100),
    "adult": (45_175, 31, 2),
    "credit_default": (30_000, 23, 2),
    "sepsis": (110_204, 3, 2),
}
# Wang et al.'s CorrDP views (dpprep.corrdp.data.load_corrdp, default variant): (rows, columns of x
# with the intercept, whether one of them is the intercept), and the rows of the rebalanced Sepsis
# set (sepsis_rebalanced). Like DATA_SHAPES, tests/experiments/test_planning_costs.py loads each
# through the library's loaders and checks these against the real shapes.
CORRDP_SHAPES = {
    "adult": (45_175, 32, True),
    "credit": (30_000, 34, True),
    "sepsis": (10_000, 3, False),
    "medical": (1_000, 9, True),
    "synthetic": (2_000, 100, False),
}
SEPSIS_REBALANCED_ROWS = 179_971


@dataclasses.dataclass(frozen=True)
class Cost:
    """What one profile of one experiment costs. ``flops=None``: no analytic count (``basis`` says
    why); ``cheap``: closed-form or accounting work whose time is seconds whatever its FLOPs;
    ``floor``: much of the work is not counted or runs far below a GLM sweep's rate (calibrations,
    eigendecompositions, many small runs), so a time from ``flops`` is a lower bound."""

    units: int | None
    flops: float | None
    peak_bytes: float | None
    basis: str
    cheap: bool = False
    floor: bool = False


def glm_flops(d: int, k: int, example_steps: float) -> float:
    """FLOPs of training a GLM of ``d`` features and ``k`` outputs with per-example clipping over
    ``example_steps`` examples (summed over steps, models and seeds): ``4dk + 2d + 8k`` each (logits
    and gradient sum 4dk, the clipping norm and scale; the count of
    :func:`experiments.sun2024_table1.example_step_flops`, so the measured rate and that module's
    grid count are in the same unit)."""
    return (4 * d * k + 2 * d + 8 * k) * float(example_steps)


def mlp_flops(d: int, h: int, k: int, *, train: bool = True) -> float:
    """FLOPs of one example through the 2-layer perceptron ``d → h → k`` of
    :func:`dpprep.models.mlp`:
    the forward pass 2dh + 2hk (+ biases and the softplus, ≈ 4h + 2k); a training step adds the
    backward pass, ∂W2 and ∂hidden (4hk), ∂W1 (2dh; no gradient w.r.t. the input) and the
    activation's derivative: 4dh + 6hk + 8h + 5k in all."""
    return float(
        4 * d * h + 6 * h * k + 8 * h + 5 * k if train else 2 * d * h + 2 * h * k + 4 * h + 2 * k
    )


def same_grid(grids: dict, profile: str) -> str:
    """The note for a profile whose grid equals the quick one (the quick run's measured time
    applies)."""
    same = profile == "paper" and grids.get("paper", grids["quick"]) == grids["quick"]
    return "; paper grid = quick grid, so the quick run's time applies" if same else ""


def accounting_only(units: int | None, what: str) -> Cost:
    return Cost(units, 0.0, None, f"accounting only, seconds ({what})", cheap=True)


def corrdp_dims(panel: Any) -> tuple[int, int]:
    """``(n, d)`` of a Wang et al. panel as trained (:func:`experiments.wang2026_fig1._features`):
    the CorrDP view's shape (:data:`CORRDP_SHAPES`), less the intercept column for a network."""
    n, m, intercept = CORRDP_SHAPES[panel.dataset]
    return n, m - int(intercept and not panel.is_glm)


def corrdp_runs_flops(panel: Any, runs: int, steps: int, *, clipped: bool = False) -> float:
    """``runs`` CorrDP-SGD runs of ``panel``, ``steps`` steps each, then their in-sample scoring.
    GLMs: 4d + 5 FLOPs per example-step (:func:`experiments.sun2024_table1.example_step_flops`,
    k = 1; + 2d + 3 with per-example clipping) over the full batch, which for least squares is the
    (d + 1)-row quadratic sketch, then 2nd to score; networks: :func:`mlp_flops` over the batch
    (``batch_size``, or n for full batch; only the batch mean is clipped), then a forward pass over
    the n rows."""
    from experiments.sun2024_table1 import example_step_flops

    n, d = corrdp_dims(panel)
    if panel.is_glm:
        rows = d + 1 if panel.model in ("ridge", "ols") else n
        return runs * (steps * rows * example_step_flops(d, 1, clipped=clipped) + 2.0 * n * d)
    k = 1 if panel.task == "regression" else 2
    batch = n if panel.sampling == "full" else panel.batch_size
    return runs * (
        steps * batch * mlp_flops(d, panel.hidden, k)
        + n * mlp_flops(d, panel.hidden, k, train=False)
    )


def c_count(panel: Any, values: Sequence[float | None]) -> tuple[int, bool]:
    """Distinct C of a panel (:func:`experiments.wang2026_fig1.c_grid`) and whether the count is
    exact: C_theory = L²T/n² (``None``) is computed where L is the clip norm (networks); a GLM's L
    is read from its data, so its C_theory counts as one more value (an upper bound)."""
    from dpprep.corrdp import noise

    seen: list[float] = []
    unknown = 0
    for c in values:
        if c is None and panel.clip_mode is None:
            unknown += 1
            continue
        value = (
            noise.theory_constant(panel.l2_clip_norm, panel.steps, corrdp_dims(panel)[0])
            if c is None
            else float(c)
        )
        if not any(math.isclose(value, v, rel_tol=1e-9) for v in seen):
            seen.append(value)
    return len(seen) + unknown, unknown == 0


def corrdp_panels(
    panels: Sequence[Any], profile: Any, population: set[str]
) -> tuple[int, float, bool]:
    """Units, FLOPs and exactness of the (panel, C) units of
    :func:`experiments.wang2026_fig1.panel_items`
    under a wang2026_fig1 ``Profile``: one engine call of seeds × points runs (3 methods × ε, + the
    population CorrDP where asked; networks + their non-private run) and, for GLMs, the one-seed
    non-private (+ Partial) reference runs."""
    from experiments.wang2026_fig1 import PRIVATE

    units, flops, exact = 0, 0.0, True
    for panel in panels:
        count, known = c_count(panel, profile.c_values[panel.key])
        steps = max(1, round(panel.steps * profile.step_fraction))
        points = (len(PRIVATE) + (panel.key in population)) * len(profile.epsilons)
        seeds = profile.seeds[panel.key]
        if panel.is_glm:
            per_c = corrdp_runs_flops(panel, seeds * points, steps) + corrdp_runs_flops(
                panel, 1 + panel.partial, steps
            )
        else:
            per_c = corrdp_runs_flops(panel, seeds * (points + 1), steps)
        units, flops, exact = units + count, flops + count * per_c, exact and known
    return units, flops, exact


CORRDP_BASIS = (
    "GLMs (4d + 5) per example-step over n rows (least squares: the d + 1 sketch rows), networks "
    "d→h→k (4dh + 6hk + 8h + 5k) per example-step over the batch, + in-sample scoring"
)
