"""A panel as run here: its data, the engine config (clipped for Credit), the methods' factors,
each method's whitened gradient bound ``L_f``, the C grid; and the checks of a profile.

**What is certified.** The paper's (Wang, Zhang & Cummings 2026) ε is not a DP guarantee; the
honest figure is the standard (ε, δ)-DP, replace-one, that dp-accounting certifies for these
full-batch Gaussian steps when every per-example gradient is bounded. Logistic regression has
``∇ℓ = (σ(θᵀx) − y)·x``, ``|σ − y| ≤ 1``. A method adds ``N(0, σ² diag(f))`` to the mean gradient
(Standard ``f = 1``; CorrDP the paper's published TV factors on the insensitive columns, public
constants like C): releasing it is releasing ``D^{-1/2}·mean + N(0, σ²I)``, whose sensitivity is
``2·L_f/n`` with ``L_f = max ‖D^{-1/2}∇ℓ‖``, so each run is a full-batch DP-GD plan with noise
multiplier ``z = σ·n/L_f`` (:class:`dpprep.plan.ExecutionPlan`; equal to
:func:`dpprep.corrdp.sgd.standard_dp_epsilon` for Standard). Semi (no noise on U) and Partial
(non-private on U) release some coordinates without noise: no finite standard-DP ε, so they are
not selected here (a row says so).

* **Adult** (panel b): every raw feature encodes to a one-hot block or a MinMax column in [0, 1]
  (norm ≤ 1) plus the intercept, over the whole *domain* (:func:`dpprep.corrdp.data.domain_bound`),
  so ``L_f² ≤ Σ_blocks max_{i∈block} 1/f_i`` (:func:`dpprep.corrdp.noise.whitened_gradient_bound`)
  (Standard: √10; CorrDP with race 0.23, gender 0.90, workclass 1.0, fnlwgt 0.22: √17.0 = 4.12).
  The paper's mechanism, unchanged, has a guarantee.
* **Credit** (panel d): StandardScaler bounds no record a priori
  (``dpprep.corrdp.data.NO_DOMAIN_BOUND``); a record with a huge ``‖x‖`` moves the unclipped mean
  arbitrarily, so the paper's mechanism has **no** guarantee and no end-to-end ε may be claimed
  for it. Decision: run Credit with **per-example gradient clipping at L = √m** (m = 34 columns
  with the intercept: the root-mean-square row norm StandardScaler gives *any* data set with this
  schema, each standardised column having mean square 1; fixed by the schema, not by the values).
  That **changes the mechanism** (rows with ``|σ − y|·‖x‖ > L`` are shrunk) and gives the
  guarantee ``L_f = L/√min f`` (the Euclidean clip bounds ``‖D^{-1/2}g‖`` only through the
  smallest factor: SEX 0.103, so CorrDP's ``L_f`` is 3.1·L). We chose clipping over "no
  guarantee" because the question of this experiment is what the accuracy costs at an ε somebody
  can certify; the unclipped paper runs are ``wang2026_fig1``'s panel (d), with no guarantee.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Sequence

import jax
import numpy as np

from dpprep.corrdp import noise, sgd
from dpprep.corrdp.data import CorrDPData, domain_bound
from dpprep.selection import PrivateSelection, Repetitions
from experiments.wang2026_fig1 import (
    PANELS,
    Panel,
    _features,
    build_model,
    method_param_factors,
    panel_data,
)

from .config import METHODS, Profile


@dataclasses.dataclass(frozen=True)
class Setup:
    """One panel as run here: its data, the engine config (clipped for Credit), the methods'
    factor pytrees and each method's whitened gradient bound ``L_f`` (module docstring)."""

    panel: Panel
    x: np.ndarray
    y: np.ndarray
    cfg: sgd.CorrDPSGD
    params0: Any
    factors: dict[str, Any]
    bound: dict[str, float]
    basis: dict[str, str]
    l2_clip_norm: float | None
    grid: tuple[float, ...]
    steps: int

    @property
    def delta(self) -> float:
        return self.panel.delta


def credit_clip_norm(data: CorrDPData) -> float:
    """``√m``: the root-mean-square row norm that StandardScaler gives any data set of ``m``
    columns (each standardised column has mean square 1; the intercept is 1). Fixed by the schema.
    """
    return math.sqrt(data.m)


def c_grid(
    x: np.ndarray, lipschitz: float, steps: int, values: Sequence[float | None]
) -> tuple[float, ...]:
    """The C grid, ascending (None = C_theory = L²T/n² with ``L`` the mechanism's bound)."""
    if not values:
        raise ValueError("c_values must name at least one C for every panel")
    grid = sorted(
        {
            noise.theory_constant(lipschitz, steps, x.shape[0]) if c is None else float(c)
            for c in values
        }
    )
    for c in grid:
        if not (math.isfinite(c) and c > 0):
            raise ValueError(f"c_values must be finite and > 0 (None: C_theory), got {c!r}")
    return tuple(grid)


def make_setup(panel_key: str, profile: Profile, data_dir=None) -> Setup:
    panel = PANELS[panel_key]
    data = panel_data(panel, data_dir)
    x, y = _features(panel, data), np.asarray(data.y)
    steps = max(1, round(panel.steps * profile.step_fraction))
    model = build_model(panel, x.shape[1], x.shape[0])
    params0 = model.init(jax.random.key(0))
    has_bound = domain_bound(data)[0] is not None
    clip = None if has_bound else credit_clip_norm(data)
    cfg = sgd.CorrDPSGD(
        model,
        steps,
        panel.learning_rate,
        panel.delta,
        clip_mode=None if clip is None else "per_example",
        l2_clip_norm=math.inf if clip is None else clip,
    )
    factors, bound, basis = {}, {}, {}
    for method in METHODS:
        factors[method] = method_param_factors(panel, data, params0, method)
        bound[method], basis[method] = noise.whitened_gradient_bound(
            data, np.asarray(factors[method]["w"]), clip
        )
    grid = c_grid(x, bound["standard"], steps, profile.c_values.get(panel_key, ()))
    return Setup(panel, x, y, cfg, params0, factors, bound, basis, clip, grid, steps)


def check_profile(profile: Profile, setups: dict[str, Setup]) -> None:
    """Bad input, before any training: ValueError naming the argument."""
    if not profile.epsilons:
        raise ValueError("epsilons must name at least one nominal ε")
    for key, setup in setups.items():
        v = profile.validation_size.get(key)
        if v is None or not 1 <= int(v) < setup.x.shape[0]:
            raise ValueError(
                f"validation_size={v!r} for panel {key!r} must be between 1 and n − 1 ="
                f" {setup.x.shape[0] - 1}"
            )
    PrivateSelection(
        Repetitions(profile.mean_candidates, 1.0), min(profile.score_noise.values()), 1
    )
