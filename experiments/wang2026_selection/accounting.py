"""The runs' accounts: each run as a full-batch DP-GD plan with noise multiplier ``z = σ·n/L_f``,
a private selection's account (selection + training) and a training-only run's.

**What is charged.** Every row carries an :class:`dpprep.selection.EndToEnd` (``runs.csv``):
paid rows charge selection + training (RDP, Papernot & Steinke's (ICLR 2022) theorem as
dp-accounting applies it to a ``RepeatAndSelectDpEvent``; each candidate's T Gaussian steps are
charged as the mixture over the uniformly drawn C, the log-mean-exp of the grid points' RDP curves,
and under replace-one the procedure costs the larger of the training runs' selection and the noisy
counts', the replaced record sitting in one part); training-only rows charge one training run
(PLD) and list the selection as not charged. Neither charges the **pre-processing**: MinMax and
StandardScaler are fitted on the data (Hu et al. 2024 would charge that); as in Wang, Zhang &
Cummings (2026), the encoded rows are taken as the private data set.
"""

from __future__ import annotations

import dataclasses
import math

from dpprep.corrdp import noise
from dpprep.plan import ExecutionPlan
from dpprep.selection import EndToEnd, Part, PrivateSelection, Repetitions, training_only

from .config import PREPROCESSING_NOTE, Profile
from .panel import Setup


def sigma(setup: Setup, epsilon: float, c: float) -> float:
    return math.sqrt(noise.base_variance(epsilon, setup.delta, c))


def run_plan(setup: Setup, n: int) -> ExecutionPlan:
    """A run as DP-GD: full batch, replace-one, T steps on ``n`` rows."""
    return ExecutionPlan.create("full", n, steps=setup.steps, neighboring_relation="replace_one")


def multiplier(setup: Setup, method: str, epsilon: float, c: float, n: int) -> float:
    """``z = σ·n/L_f``: the std of the noise on the (whitened) gradient sum over its sensitivity."""
    return sigma(setup, epsilon, c) * n / setup.bound[method]


def selection_of(setup: Setup, profile: Profile) -> PrivateSelection:
    key = setup.panel.key
    return PrivateSelection(
        Repetitions(profile.mean_candidates, 1.0),
        profile.score_noise[key],
        profile.validation_size[key],
    )


def paid_account(setup: Setup, profile: Profile, method: str, epsilon: float) -> EndToEnd:
    """The selection's account at nominal ``epsilon``: every C of the grid is its own noise level
    and each candidate draws its C uniformly and releases it, so a candidate is charged as the
    mixture over the grid's C (:meth:`dpprep.selection.PrivateSelection.end_to_end_of_grid`),
    repeated and selected (RDP); replace-one, so the larger of the training runs' and the noisy
    counts' parts."""
    selection = selection_of(setup, profile)
    n_train = selection.check_size(setup.x.shape[0])
    levels = [multiplier(setup, method, epsilon, c, n_train) for c in setup.grid]
    account = selection.end_to_end_of_grid(run_plan(setup, n_train), levels, setup.delta)
    pre, stats, sel, train = account.parts
    return dataclasses.replace(
        account,
        parts=(
            Part(pre.name, None, False, PREPROCESSING_NOTE),
            stats,
            Part(
                sel.name,
                sel.epsilon,
                True,
                f"C drawn uniformly from {list(setup.grid)}; " + sel.note,
            ),
            Part(
                train.name,
                train.epsilon,
                True,
                f"{train.note}; the least noisy C = {min(setup.grid):.3g}, "
                f"L_f = {setup.bound[method]:.4g}: {setup.basis[method]}",
            ),
        ),
    )


def training_account(setup: Setup, method: str, epsilon: float, c: float) -> EndToEnd:
    """One run on the whole data at ``c``, its C chosen on the data and not charged (PLD)."""
    n = setup.x.shape[0]
    z = multiplier(setup, method, epsilon, c, n)
    account = training_only(run_plan(setup, n), z, setup.delta, tuned=True)
    pre, stats, sel, train = account.parts
    return dataclasses.replace(
        account,
        parts=(
            Part(pre.name, None, False, PREPROCESSING_NOTE),
            stats,
            sel,
            Part(
                train.name,
                train.epsilon,
                True,
                f"{train.note}, C = {c:.3g}, z = {z:.4g}, L_f = {setup.bound[method]:.4g}",
            ),
        ),
    )
