"""Cost of a Table 1 grid before running it: FLOPs and a projected GPU time.

Projections, not measurements: :func:`grid_flops` counts the linear probe's FLOPs per unit from
the profile alone (no data loaded), :func:`projected_gpu_hours` divides by an assumed GPU rate.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from dpprep import dpsgdf

from .config import GRIDS, Grid
from .units import Unit, build_units


#: (training rows, feature dimension, classes) of each dataset. CIFAR-100's are the paper's
#: linear probe on 640-d penultimate features of an ImageNet-pretrained WRN-28-10 (De et al. 2022);
#: the features are user-supplied, so d = 640 is what those features have, not something checked
#: here.
DATASET_SHAPES = {
    "mnist": (60_000, 784, 10),
    "fashion_mnist": (60_000, 784, 10),
    "cifar100_features": (50_000, 640, 100),
}
#: The FLOP rate GPU projections assume: an H100 SXM's float32 (non-tensor-core) peak, 67 TFLOP/s.
#: The paper profile runs float32 matmuls, so TF32 tensor cores do not apply; at peak the time is a
#: lower bound, and a sustained fraction of it (``efficiency``) is a guess until measured on a GPU.
GPU_FLOP_RATE = 67e12


def example_step_flops(d: int, k: int, *, clipped: bool = True) -> int:
    """FLOPs one example costs one model in one step of the linear softmax probe (a multiply-add
    is 2 FLOPs): the logits ``x W + b`` (2dK + K), the softmax residual ``p − onehot`` (3K: exp,
    normalise, subtract), the gradient sum ``Xᵀ R`` with its bias row (2dK + K); with per-example
    clipping also the norm ``‖g_i‖² = (‖x_i‖² + 1)·‖r_i‖²`` (2d + 2K; the linear model's gradient
    is an outer product, so the norm never forms it) and the clip scaling of ``r_i`` (K). The
    per-step noise and update (≈ dK per model, not per example) and the test evaluation (< 0.2 %
    of the paper grid) are left out. 4dK dominates: 4dK + 2d + 8K = 33,008 for MNIST (d = 784,
    K = 10), 258,080 for CIFAR-100 (d = 640, K = 100)."""
    flops = 4 * d * k + 5 * k
    return flops + 2 * d + 3 * k if clipped else flops


def _unit_rows(unit: Unit, n: int, rows: str) -> float:
    """Examples one model of ``unit`` processes at one seed: the plan's steps × the expected batch
    size (``rows="expected"``; for shuffled batches the batch size) or × the padded batch the
    compiled step actually computes on (``rows="padded"``: Poisson batches are padded to a fixed
    shape that overflows with negligible probability, 1.5× B at B = 256, 1.05× at 16384)."""
    plan = dpsgdf.layout(unit.models[0].config(unit.batch_size, unit.epochs), n)
    return float(plan.steps * (plan.pad if rows == "padded" else plan.batch_size))


def grid_flops(
    profile: "str | Grid", search: str | None = None, *, rows: str = "expected"
) -> dict[str, float]:
    """FLOPs of a Table 1 grid: Σ over units of seeds × models × examples per model-seed
    (:func:`_unit_rows`) × :func:`example_step_flops` (clipped for DPSGD / DPSGD-F, not for
    non-private SGD), with each dataset's shape from :data:`DATASET_SHAPES` (``subset`` applied).
    A pure function of the profile (a name in :data:`GRIDS` or a :class:`Grid`): no data is
    loaded and nothing is run; ``search`` overrides the grid's protocol (the environment is not
    read). Calibrations (CPU, seconds each) are not counted.

    Returns ``{"total": …, <dataset>: …}``; under ``search="staged"`` also ``"stage1"`` (every
    configuration at seed 0), ``"stage2"`` (an upper bound: per (dataset, ε, method) the ``top_k``
    most expensive configurations, i.e. the largest E, at all seeds; which configurations stage 2
    runs is only known after stage 1) and ``"stage2_mean"`` (``top_k`` configurations of average
    cost); ``"total"`` is ``stage1 + stage2``. The A15 sensitivity variants count in full either
    way. When the grid reruns the selected configurations for C16 (``grid.rerun_spread``), also
    ``"spread"``, added to ``"total"`` and the datasets' (and outside ``"stage1"``/``"stage2"``):
    per (dataset, ε, method) its most
    expensive configuration at ``spread_seeds`` seeds (an upper bound, as which one is selected is
    only known after the search; exact when a cell's configurations cost the same, as at quick)."""
    if rows not in ("expected", "padded"):
        raise ValueError(f"rows must be 'expected' or 'padded', got {rows!r}")
    grid = GRIDS[profile] if isinstance(profile, str) else profile
    if search is not None:
        grid = dataclasses.replace(grid, search=search)
    out: dict[str, float] = {"total": 0.0}
    if grid.search == "staged":
        out |= {"stage1": 0.0, "stage2": 0.0, "stage2_mean": 0.0}
    if grid.rerun_spread:
        out["spread"] = 0.0
    for name in grid.datasets:
        n, d, k = DATASET_SHAPES[name]
        n = min(n, grid.subset) if grid.subset else n
        per_config: dict[tuple, list[float]] = {}
        # the most expensive main configuration's one-seed FLOPs per cell
        per_seed: dict[tuple, float] = {}
        total = 0.0
        for unit in build_units({"name": name, "unit": np.zeros((n, 0), np.float32)}, grid):
            examples = _unit_rows(unit, n, rows)
            for m in unit.models:
                flops = examples * example_step_flops(d, k, clipped=m.method != "nonprivate")
                total += unit.seeds * flops
                if unit.stage == "stage1":
                    per_config.setdefault((m.method, m.epsilon), []).append(grid.seeds * flops)
                if unit.variant == "main":
                    per_seed[(m.method, m.epsilon)] = max(
                        flops, per_seed.get((m.method, m.epsilon), 0.0)
                    )
        if grid.search == "staged":
            top = sum(
                sum(sorted(costs, reverse=True)[: grid.top_k]) for costs in per_config.values()
            )
            mean = sum(min(grid.top_k, len(c)) * float(np.mean(c)) for c in per_config.values())
            out["stage1"] += total
            out["stage2"] += top
            out["stage2_mean"] += mean
            total += top
        if grid.rerun_spread:
            spread = grid.spread_seeds * sum(per_seed.values())
            out["spread"] += spread
            total += spread
        out[name] = total
        out["total"] += total
    return out


def projected_gpu_hours(
    flops: float, *, rate: float = GPU_FLOP_RATE, efficiency: float = 1.0
) -> float:
    """A PROJECTION, not a measurement: hours to compute ``flops`` at ``efficiency`` × ``rate``
    FLOP/s (default: the H100 float32 peak, :data:`GPU_FLOP_RATE`)."""
    if not (rate > 0 and 0 < efficiency <= 1):
        raise ValueError(
            f"need rate > 0 and 0 < efficiency <= 1, got rate={rate!r}, efficiency={efficiency!r}"
        )
    return flops / (rate * efficiency) / 3600
