"""One unit of Hu et al. (2024) Figure 3 (c) with the step size selected privately: per (n, d), the
non-private tuning's sweep (training-only ε) and one private selection per (ε, seed) at end-to-end
ε, each model measured by its excess empirical risk on S."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from dpprep import models
from dpprep.algorithms import Hyper, TrainConfig
from dpprep.data.synthetic import low_rank_logistic
from dpprep.optimizers import L2BallProjection
from dpprep.plan import DPPlan
from dpprep.selection import PrivateSelection, Repetitions, select
from dpprep.solvers import logistic_ball_optimum
from dpprep.sweeps import evaluate, sweep_points
from experiments.hu2024_fig3.config import Fig3Config

from .config import DELTA, SEED, SelectionConfig


def plan_options(cfg: Fig3Config) -> dict:
    """Fig 3's DP-GD plan (full batch, replace-one) with its noise as a multiplier of a clip norm
    C = 1 = L that never bites."""
    return {
        "steps": cfg.steps,
        "l2_clip_norm": 1.0,
        "delta": DELTA,
        "neighboring_relation": "replace_one",
    }


def train_config(cfg: Fig3Config, num_features: int, plan: DPPlan) -> TrainConfig:
    """Fig 3's DP-GD (projected onto the ball, averaged) on ``plan``."""
    return TrainConfig(
        model=models.logistic_regression(num_features, fit_intercept=False),
        hyper=Hyper(learning_rate=cfg.learning_rates[0]),
        plan=plan,
        iterates="average",
        extensions=(L2BallProjection(cfg.radius),),
    )


def selection_of(scfg: SelectionConfig) -> PrivateSelection:
    return PrivateSelection(
        Repetitions(scfg.mean_candidates, 1.0),
        score_noise=scfg.score_noise,
        validation_size=scfg.validation_size,
    )


def run_case(scfg: SelectionConfig, n: int, d: int) -> dict:
    cfg = scfg.fig3
    data = low_rank_logistic(
        n,
        d,
        cfg.k,
        radius=cfg.data_radius,
        tail_mass=cfg.tail_mass,
        label_scale=cfg.label_scale,
        seed=cfg.data_seed,
    )
    x, y = np.asarray(data.x, np.float32), np.asarray(data.y)
    _, loss_star, _ = logistic_ball_optimum(data.x, data.y, cfg.radius, cfg.optimum_steps)
    # The non-private tuning's runs: z per point (the plan's z = 1 is a placeholder each point
    # replaces).
    config = train_config(
        cfg, d, DPPlan.create("full", n, noise_multiplier=1.0, **plan_options(cfg))
    )
    params0 = config.model.init(jax.random.PRNGKey(0))
    lrs = np.asarray(cfg.learning_rates)
    plan = config.plan.execution
    selection = selection_of(scfg)
    keys = jax.random.split(jax.random.PRNGKey(SEED + cfg.noise_seed), cfg.seeds)
    rows = []
    # Non-private tuning (training-only ε): every (ε, step size) × seed in one sweep on all of S.
    zs = {e: plan.calibrate(e, DELTA) for e in cfg.epsilons}
    points = {
        "noise_multiplier": np.repeat([zs[e] for e in cfg.epsilons], len(lrs)),
        "learning_rate": np.tile(lrs, len(cfg.epsilons)),
    }
    res = sweep_points(config, params0, (x, y), keys, points, eval_data=(x, y), return_params=False)
    loss = np.asarray(res.evaluation["loss"], np.float64).reshape(
        cfg.seeds, len(cfg.epsilons), len(lrs)
    )
    for i, e in enumerate(cfg.epsilons):
        for s in range(cfg.seeds):
            for p, lr in enumerate(lrs):
                rows.append(
                    {
                        "protocol": "tuned_nonprivately",
                        "n": n,
                        "d": d,
                        "epsilon_target": e,
                        "seed": s,
                        "learning_rate": float(lr),
                        "noise_multiplier": zs[e],
                        "epsilon_charged": plan.epsilon(zs[e], DELTA),
                        "charged": "training",
                        "excess_risk": float(loss[s, i, p]) - loss_star,
                        "num_candidates": math.nan,
                        "noisy_score": math.nan,
                    }
                )
    # Private selection (end-to-end ε), one selection per (ε, seed).
    for e in cfg.epsilons:
        for s in range(cfg.seeds):
            key = jax.random.fold_in(keys[s], 1000 + int(round(e * 1000)))
            paid = train_config(
                cfg, d, selection.plan("full", n, target_epsilon=e, **plan_options(cfg))
            )
            out = select(paid, params0, (x, y), key, {"learning_rate": lrs})
            account = out.accounting
            risk = (
                math.nan
                if out.params is None
                else float(
                    evaluate(config.model, out.params, jnp.asarray(x), jnp.asarray(y))["loss"]
                )
                - loss_star
            )
            rows.append(
                {
                    "protocol": "selected_privately",
                    "n": n,
                    "d": d,
                    "epsilon_target": e,
                    "seed": s,
                    "learning_rate": (
                        math.nan if out.point is None else float(out.point["learning_rate"])
                    ),
                    "noise_multiplier": out.noise_multiplier,
                    "epsilon_charged": account.epsilon,
                    "charged": "+".join(account.charged),
                    "excess_risk": risk,
                    "num_candidates": out.diagnostics["num_candidates"],
                    "noisy_score": math.nan if out.score is None else out.score,
                    "epsilon_training": account.part("training").epsilon,
                }
            )
    return {"rows": pd.DataFrame(rows).to_dict(orient="list"), "loss_star": loss_star}
