"""Hu et al. (2024) Figure 3's trainers and their noise: full-batch DP-GD and Poisson DP-SGD, and
per overall ε each method's mechanism ε and noise, calibrated by the run's plan with Theorem 2
(:class:`~dpprep.preprocess.privacy.meta.PreprocessedAccountant`), PTR's level by Theorem 7 and
the DP-PCA entry noise."""

from __future__ import annotations

import math

import pandas as pd

from dpprep import models
from dpprep.algorithms import Hyper, TrainConfig
from dpprep.optimizers import L2BallProjection
from dpprep.plan import DPPlan
from dpprep.preprocess import dp_pca, ptr
from dpprep.preprocess.privacy.meta import PreprocessedAccountant
from dpprep.preprocess.sensitivity import Sensitivity

from .config import METHODS, Fig3Config


def dp_gd_config(cfg: Fig3Config, num_features: int, n: int) -> ptr.TrainConfig:
    """Projected, averaged, full-batch DP-GD (clipped at L = 1, so the multiplier is the noise std);
    the multiplier is swept (its plan's z = 1 is a placeholder each point replaces)."""
    return ptr.train_config(
        num_features, n, cfg.steps, cfg.learning_rates[0], 1.0, cfg.delta, radius=cfg.radius
    )


def calibrations(
    cfg: Fig3Config, n: int, gap_k: float, sens_rank: Sensitivity, sens_dim: Sensitivity
) -> pd.DataFrame:
    """Per overall ε: each method's mechanism ε (DP-GD's ε_b; PTR's ε), its engine noise std and the
    DP-PCA entry noise. DP-GD's noise is calibrated by its plan with Theorem 2
    (:class:`~dpprep.preprocess.privacy.meta.PreprocessedAccountant`, L = 1: the multiplier is the
    noise std).
    """
    rows = []
    plan = dp_gd_config(cfg, 1, n).plan.execution

    def noise_std(
        sensitivity: Sensitivity, eps: float, delta: float, mode: str = "exact"
    ) -> tuple[float, float]:
        accountant = PreprocessedAccountant(sensitivity, smoothness=cfg.smoothness, mode=mode)  # type: ignore[arg-type]
        z = plan.calibrate(eps, delta, accountant=accountant)
        return accountant.mechanism(plan, z).epsilon, z

    beta = cfg.beta_fraction * gap_k
    for eps in cfg.epsilons:
        none = noise_std(Sensitivity(0.0, 0.0), eps, cfg.delta)
        half = noise_std(Sensitivity(0.0, 0.0), eps / 2, cfg.delta / 2)
        rank = noise_std(sens_rank, eps, cfg.delta, "table2")
        dim = noise_std(sens_dim, eps, cfg.delta, "table2")
        eps_ptr = ptr.calibrate_epsilon(eps, cfg.delta, beta, smoothness=cfg.smoothness)
        ptr_noise = (eps_ptr / 2, ptr.dp_gd_stddev(eps_ptr / 2, cfg.steps))
        s_pca = dp_pca.analyze_gauss_noise(eps / 2, cfg.delta / 2, n)
        for (method, variant), (eb, std), extra in (
            (METHODS[0], none, math.nan),
            (METHODS[1], rank, math.nan),
            (METHODS[2], dim, math.nan),
            (METHODS[3], half, s_pca),
            (METHODS[4], half, s_pca),
            (METHODS[5], ptr_noise, math.nan),
        ):
            rows.append(
                {
                    "method": method,
                    "variant": variant,
                    "epsilon": eps,
                    "epsilon_b": eb,
                    "ptr_epsilon": eps_ptr if method == "ptr" else math.nan,
                    "noise_std": std,
                    "dp_pca_noise": extra,
                    "beta": beta if method == "ptr" else math.nan,
                }
            )
    return pd.DataFrame(rows)


def dp_sgd_config(cfg: Fig3Config, num_features: int, n: int) -> TrainConfig:
    """Poisson-subsampled, clipped (C = 1 = L: no clipping bites in the unit ball), projected and
    averaged DP-SGD; ``noise_multiplier`` z swept (std zC on the sum, divided by B)."""
    batch, steps = cfg.sgd_schedule(n)
    plan = DPPlan.create(
        "poisson",
        n,
        batch_size=batch,
        steps=steps,
        l2_clip_norm=1.0,
        noise_multiplier=1.0,
        delta=cfg.delta,
        neighboring_relation="replace_one",
    )
    return TrainConfig(
        model=models.logistic_regression(num_features, fit_intercept=False),
        hyper=Hyper(learning_rate=cfg.learning_rates[0]),
        plan=plan,
        iterates="average",
        extensions=(L2BallProjection(cfg.radius),),
    )


def sgd_calibrations(
    cfg: Fig3Config, n: int, sens_rank: Sensitivity, sens_dim: Sensitivity
) -> pd.DataFrame:
    """Per overall ε: DP-SGD's noise multiplier per method by Theorem 2 with the rigorous subsampled
    replace-one RDP/SRDP (``sgd_samp``), calibrated by the run's plan (which charges the padded
    Poisson batch's overflow slack); (a) in Table-2 mode like DP-GD's (a), (b) at (ε/2, δ/2)."""
    plan = dp_sgd_config(cfg, 1, n).plan.execution

    def multiplier(
        sensitivity: Sensitivity, eps: float, delta: float, mode: str = "exact"
    ) -> tuple[float, float]:
        accountant = PreprocessedAccountant(sensitivity, smoothness=cfg.smoothness, mode=mode)  # type: ignore[arg-type]
        z = plan.calibrate(eps, delta, accountant=accountant)
        return accountant.mechanism(plan, z).epsilon, z

    rows = []
    for eps in cfg.epsilons:
        z = {
            METHODS[0]: multiplier(Sensitivity(0.0, 0.0), eps, cfg.delta),
            METHODS[1]: multiplier(sens_rank, eps, cfg.delta, "table2"),
            METHODS[2]: multiplier(sens_dim, eps, cfg.delta, "table2"),
        }
        z[METHODS[3]] = z[METHODS[4]] = multiplier(Sensitivity(0.0, 0.0), eps / 2, cfg.delta / 2)
        s_pca = dp_pca.analyze_gauss_noise(eps / 2, cfg.delta / 2, n)
        for m in METHODS[:5]:
            rows.append(
                {
                    "method": m[0],
                    "variant": m[1],
                    "epsilon": eps,
                    "epsilon_b": z[m][0],
                    "ptr_epsilon": math.nan,
                    "noise_std": z[m][1],
                    "dp_pca_noise": s_pca if m[0] == "dp_pca" else math.nan,
                    "beta": math.nan,
                }
            )
    return pd.DataFrame(rows)
