"""One unit of Hu et al. (2024) Figure 3: every run of one (n, d, k) case (data, θ*, PCA,
calibrations, DP-PCA releases, the sweeps of each trainer and PTR's Algorithm 1) as tidy rows plus
the case's facts."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from dpprep.data.synthetic import low_rank_logistic
from dpprep.preprocess import dp_pca, pca_reduce, ptr
from dpprep.preprocess.sensitivity import pca_dim_sensitivity
from dpprep.solvers import logistic_ball_optimum

from .calibration import calibrations, dp_gd_config, dp_sgd_config, sgd_calibrations
from .config import METHODS, Fig3Config
from .training import train_methods


def run_case(
    cfg: Fig3Config,
    n: int,
    d: int,
    progress=lambda message: None,
    *,
    k: int | None = None,
    max_steps: int | None = None,
    first_chunk_only: bool = False,
) -> dict:
    """Every run of one (n, d) at rank ``k`` (the data's and every PCA's; ``cfg.k`` when None):
    returns the tidy rows (as lists) plus case-level facts.

    ``max_steps``/``first_chunk_only`` (``run_all --validate``,
    :class:`experiments.results.SweepUnit`)
    check the case cheaply at its real shapes: every training loop (θ*, the sweeps, PTR) runs at
    most ``max_steps`` steps, each sweep its first chunk, and one DP-PCA release (the first ε's,
    the first seed's) stands for all (same shapes); the numbers are then meaningless."""
    if k is not None and k != cfg.k:
        cfg = dataclasses.replace(cfg, cases=((n, d),), k=k, rank_cases=())
    limits = {"max_steps": max_steps, "first_chunk_only": first_chunk_only}
    cut = lambda steps: steps if max_steps is None else min(steps, max_steps)  # noqa: E731
    progress(f"n={n}, d={d}, k={cfg.k}: data, θ*, PCA, calibrations")
    data = low_rank_logistic(
        n,
        d,
        cfg.k,
        radius=cfg.data_radius,
        tail_mass=cfg.tail_mass,
        label_scale=cfg.label_scale,
        seed=cfg.data_seed,
    )
    x, y = data.x, data.y
    theta_star, loss_star, mapping = logistic_ball_optimum(x, y, cfg.radius, cut(cfg.optimum_steps))
    rank = pca_reduce(x, cfg.k, mode="rank")
    # dimension reduction by the same eigenvectors (one eigendecomposition): Prop. 5's dim
    # sensitivity
    dim_data, dim_sens = x @ rank.components, pca_dim_sensitivity(n, rank.gap_k, rank.gap_1)
    cal = calibrations(cfg, n, rank.gap_k, rank.sensitivity, dim_sens)
    eps_list, lrs, seeds = list(cfg.epsilons), np.asarray(cfg.learning_rates), cfg.seeds
    E, P, S = len(eps_list), len(lrs), seeds
    keys = jax.random.split(jax.random.key(cfg.noise_seed), S)
    aux_keys, train_keys = (jnp.stack(a) for a in zip(*(jax.random.split(k) for k in keys)))
    noise = {
        (m, v): cal[(cal.method == m) & (cal.variant == v)].set_index("epsilon")["noise_std"]
        for m, v in METHODS
    }

    progress(f"n={n}, d={d}: DP-PCA releases")
    # DP-PCA release per (ε, seed) at (ε/2, δ/2) with the seed's auxiliary key (the key PTR's test
    # takes: ptr.algorithm1 splits each seed's key the same way; a different method).
    moment = x.T @ x / n
    release = lambda e, s: dp_pca.dp_pca(  # noqa: E731
        x,
        cfg.k,
        e / 2,
        cfg.delta / 2,
        aux_keys[s],
        mode="dim",
        second_moment=moment,
    )
    if first_chunk_only:
        one = release(eps_list[0], 0)
        releases = [[one] * S for _ in eps_list]
    else:
        releases = [[release(e, s) for s in range(S)] for e in eps_list]
    loss, calls = train_methods(
        dp_gd_config(cfg, d, n),
        dp_gd_config(cfg, cfg.k, n),
        "noise_multiplier",
        noise,
        x,
        y,
        rank.data,
        dim_data,
        releases,
        train_keys,
        eps_list,
        lrs,
        n,
        d,
        progress,
        **limits,
    )
    progress(f"n={n}, d={d}: PTR (Algorithm 1)")
    # (d): Algorithm 1 for every (ε, seed, step size) at each ε's PTR level, sharing the rank
    # reduction's
    # eigendecomposition; its DP-GD on A_kA_kᵀS (when some test passed) is one chunk of E·P points
    # of pca-rank's compiled function. On ⊥ the learner outputs θ = 0.
    ptr_cal = cal[cal.method == "ptr"].set_index("epsilon")
    run = ptr.algorithm1_sweep(
        x,
        y,
        k=cfg.k,
        beta=cfg.beta_fraction * rank.gap_k,
        epsilons=[ptr_cal.loc[e, "ptr_epsilon"] for e in eps_list],
        delta=cfg.delta,
        keys=keys,
        steps=cut(cfg.steps),
        learning_rates=lrs,
        radius=cfg.radius,
        smoothness=cfg.smoothness,
        pca=rank,
        eval_data=(x, y),
        chunk_size=E * P,
        return_params=False,
    )
    calls += int(run.trained)  # one chunk of E·P points, when some seed passed
    passed, bottom_loss = run.passed, math.log(2.0)  # the loss of θ = 0
    loss[METHODS[5]] = np.full((E, S, P), bottom_loss)
    if run.trained:
        # float64 first: np.where with a float32 array would round log 2 to float32
        loss[METHODS[5]] = np.where(
            passed[:, :, None], np.asarray(run.evaluation["loss"], np.float64), bottom_loss
        )
    runs = [("dp_gd", cal, loss, METHODS)]
    functions = 3
    if "dp_sgd" in cfg.trainers:
        progress(f"n={n}, d={d}: DP-SGD calibrations")
        sgd_cal = sgd_calibrations(cfg, n, rank.sensitivity, dim_sens)
        sgd_noise = {
            (m, v): (
                sgd_cal[(sgd_cal.method == m) & (sgd_cal.variant == v)].set_index("epsilon")[
                    "noise_std"
                ]
            )
            for m, v in METHODS[:5]
        }
        sgd_loss, sgd_calls = train_methods(
            dp_sgd_config(cfg, d, n),
            dp_sgd_config(cfg, cfg.k, n),
            "noise_multiplier",
            sgd_noise,
            x,
            y,
            rank.data,
            dim_data,
            releases,
            train_keys,
            eps_list,
            lrs,
            n,
            d,
            progress,
            **limits,
        )
        runs.append(("dp_sgd", sgd_cal, sgd_loss, METHODS[:5]))
        calls, functions = calls + sgd_calls, functions + 3

    rows = []
    for trainer, table, losses, methods in runs:
        for m in methods:
            c = table[(table.method == m[0]) & (table.variant == m[1])].set_index("epsilon")
            for i, e in enumerate(eps_list):
                for s in range(S):
                    for p, lr in enumerate(lrs):
                        rows.append(
                            {
                                "trainer": trainer,
                                "method": m[0],
                                "variant": m[1],
                                "n": n,
                                "d": d,
                                "k": cfg.k,
                                "epsilon": e,
                                "delta": cfg.delta,
                                "epsilon_b": c.loc[e, "epsilon_b"],
                                "ptr_epsilon": c.loc[e, "ptr_epsilon"],
                                "noise_std": c.loc[e, "noise_std"],
                                "dp_pca_noise": c.loc[e, "dp_pca_noise"],
                                "seed": s,
                                "learning_rate": float(lr),
                                "loss": float(losses[m][i, s, p]),
                                "excess_risk": float(losses[m][i, s, p]) - loss_star,
                                "bottom": bool(m[0] == "ptr" and not passed[i, s]),
                            }
                        )
    frame = pd.DataFrame(rows)
    return {
        "rows": frame.to_dict(orient="list"),
        "k": cfg.k,
        "loss_star": loss_star,
        "gradient_mapping": mapping,
        "theta_star_norm": float(np.linalg.norm(theta_star)),
        "gap_k": rank.gap_k,
        "gap_1": rank.gap_1,
        "tau_rank": rank.sensitivity.tau,
        "tau_dim": dim_sens.tau,
        "beta": cfg.beta_fraction * rank.gap_k,
        "compiled_functions": functions,
        "compiled_calls": calls,
    }
