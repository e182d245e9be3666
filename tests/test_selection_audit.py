"""Issue 22 item 4: an audit of a small private-selection procedure against its end-to-end claim.

The auditing module's runners are vmapped over runs; a selection draws a random K per run, so here
:func:`dpprep.selection.select` runs once per run in a loop (small data, few steps) with a
final-model canary: in one world the first record is a canary ``x_c = 0.9·e_0`` with label 1 on a
coordinate no other record uses, in the other it is an ordinary record (replace-one). The score is
the released model's weight on ``e_0``; :func:`dpprep.auditing.lower_bounds` turns the two samples
into ε lower bounds, which must not exceed the selection's end-to-end ε. A positive control (the
same procedure with almost no training noise, far above the claim) must exceed it: the audit can
fail.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from dpprep import models
from dpprep.algorithms import Hyper, TrainConfig
from dpprep.auditing import lower_bounds
from dpprep.selection import PrivateSelection, Repetitions, select

pytestmark = pytest.mark.slow  # end-to-end audits of private selection

N, D, RUNS, CLAIM, DELTA = 40, 3, 120, 2.0, 1e-5
GRID = {"learning_rate": [2.0, 4.0]}


def _setup():
    rng = np.random.default_rng(0)
    x = np.zeros((N, D), np.float32)
    x[:, 1:] = rng.uniform(-0.4, 0.4, size=(N, D - 1))
    y = rng.integers(0, 2, size=N).astype(np.int32)
    x_in, y_in = x.copy(), y.copy()
    x_in[0] = [0.9, 0.0, 0.0]
    y_in[0] = 1
    selection = PrivateSelection(Repetitions(2.0, 1.0), score_noise=8.0, validation_size=4)
    return selection, (x, y), (x_in, y_in)


def _config(selection, **noise) -> TrainConfig:
    """The selection's plan: full-batch DP-GD, 4 steps, clipped at 1, replace-one, on the N − 4
    training rows, at ``noise_multiplier=z`` or calibrated to ``target_epsilon`` end to end."""
    plan = selection.plan(
        "full",
        N,
        steps=4,
        l2_clip_norm=1.0,
        delta=DELTA,
        neighboring_relation="replace_one",
        **noise,
    )
    return TrainConfig(
        model=models.logistic_regression(D, fit_intercept=False),
        hyper=Hyper(learning_rate=1.0),
        plan=plan,
        iterates="last",
    )


def _scores(config, data, key) -> np.ndarray:
    params0 = config.model.init(jax.random.PRNGKey(0))
    out = []
    for i in range(RUNS):
        r = select(config, params0, data, jax.random.fold_in(key, i), GRID)
        out.append(float(np.ravel(jax.tree_util.tree_leaves(r.params)[0])[0]))
    return np.asarray(out)


@pytest.mark.slow
def test_selection_audit_stays_below_its_end_to_end_claim():
    selection, outside, inside = _setup()
    key = jax.random.PRNGKey(22)
    config = _config(selection, target_epsilon=CLAIM)
    assert config.plan.epsilon <= CLAIM  # the end-to-end claim the audit tests
    s_in = _scores(config, inside, jax.random.fold_in(key, 1))
    s_out = _scores(config, outside, jax.random.fold_in(key, 2))
    bounds = lower_bounds(s_in, s_out, delta=DELTA, significance=0.05)
    assert bounds.epsilon_gdp <= CLAIM and bounds.epsilon_cp <= CLAIM, bounds
    assert bounds.auroc > 0.5  # the canary is seen (the scores are not noise alone)
    # Positive control: almost no training noise, the same selection: the canary is exposed.
    barely_noisy = _config(selection, noise_multiplier=1e-3)
    c_in = _scores(barely_noisy, inside, jax.random.fold_in(key, 3))
    c_out = _scores(barely_noisy, outside, jax.random.fold_in(key, 4))
    control = lower_bounds(c_in, c_out, delta=DELTA, significance=0.05)
    assert control.epsilon_gdp > CLAIM, control
