"""A panel's pieces as library calls: its data and features, its model and engine configuration,
the §5.1 noise factors of each method, the C grid (C_theory = L²T/n² from the data or the clip
norm), the networks' per-seed sweep and the non-private reference accuracy (spec §5.1, A8, A21)."""

from __future__ import annotations

import math

import jax
import numpy as np

from dpprep import models, optimizers
from dpprep.corrdp import noise, sgd, utility
from dpprep.corrdp.data import CorrDPData, load_corrdp

from .config import PANELS, Panel, Profile


def panel_data(panel: Panel, data_dir=None) -> CorrDPData:
    return load_corrdp(panel.dataset, data_dir, m_s=panel.m_s, variant=panel.variant)


def _features(panel: Panel, data: CorrDPData) -> np.ndarray:
    """GLMs take the intercept as a data column; networks drop it (they have biases)."""
    x = np.asarray(data.x, np.float32)
    if not panel.is_glm and data.intercept is not None:
        x = np.delete(x, data.intercept, axis=1)
    return x


def _columns(panel: Panel, data: CorrDPData) -> tuple[list[int], list[int]]:
    """S and U as column indices of :func:`_features`."""
    if panel.is_glm or data.intercept is None:
        return list(data.sensitive), list(data.insensitive)
    shift = lambda idx: [i - (i > data.intercept) for i in idx]  # noqa: E731
    return shift(data.sensitive), shift(data.insensitive)


def build_model(panel: Panel, d: int, n: int) -> models.Model:
    """The panel's library model (the factories are cached: one object, so one compilation, per
    shape)."""
    if panel.model == "ridge":  # F = mean((y − Xθ)²) + ||θ||²/n (spec §5.2)
        return models.linear_regression(d, ridge=1.0 / n, fit_intercept=False)
    if panel.model == "ols":
        return models.linear_regression(d, fit_intercept=False)
    if panel.model == "logistic":
        return models.logistic_regression(d, fit_intercept=False)
    if panel.model == "mlp_classifier":
        return models.mlp(d, panel.hidden, 2, activation="softplus", loss="softmax")
    return models.mlp(d, panel.hidden, 1, activation="softplus", loss="squared")


def method_param_factors(
    panel: Panel, data: CorrDPData, params0, method: str, *, population: bool = False
):
    """The §5.1 variance-factor pytree of ``method`` ("standard", "semi" or "corrdp") for the
    panel's model: :func:`dpprep.corrdp.noise.method_factors` on the columns of :func:`_features`
    (CorrDP's TV~ from :func:`dpprep.corrdp.utility.dataset_tv`; ``population``: the synthetic
    population TV instead of the plug-in, A21), laid out by
    :func:`dpprep.corrdp.noise.param_factors`
    (Eq. 5; the first-layer bias takes the insensitive factor, A8)."""
    s_cols, u_cols = _columns(panel, data)
    tv = (
        utility.dataset_tv(data, panel.delta, population=population) if method == "corrdp" else None
    )
    factors = noise.method_factors(
        method, params0["w" if panel.is_glm else "w1"].shape[0], s_cols, tv, insensitive=u_cols
    )
    return noise.param_factors(params0, factors, bias_factor="insensitive", insensitive=u_cols)


def lipschitz_bound(panel: Panel, x: np.ndarray, y: np.ndarray) -> float:
    """The L of C_theory (module docstring): the clip norm of a clipped panel, else
    :func:`dpprep.corrdp.utility.gradient_bound` (least squares: at the exact minimiser)."""
    if panel.clip_mode is not None:
        return panel.l2_clip_norm
    theta_hat = (
        utility.exact_minimizer(panel.model, x, y) if panel.model in ("ridge", "ols") else None
    )
    return utility.gradient_bound(panel.model, x, y, theta_hat)


def engine_config(panel: Panel, model: models.Model, steps: int) -> sgd.CorrDPSGD:
    optimizer = optimizers.optimizer("adam") if panel.optimizer == "adam" else None
    return sgd.CorrDPSGD(
        model,
        steps,
        panel.learning_rate,
        panel.delta,
        sampling=panel.sampling,
        batch_size=panel.batch_size,
        optimizer=optimizer,
        clip_mode=panel.clip_mode,
        l2_clip_norm=panel.l2_clip_norm,
    )


def seed_keys(seeds: int) -> jax.Array:
    """Seeds 0..S−1 (spec §5.1): the DP noise, NN initialisation and minibatches of seed s."""
    return jax.numpy.stack([jax.random.key(s) for s in range(seeds)])


def _nn_sweep(cfg: sgd.CorrDPSGD, model: models.Model, x, y, keys, points) -> dict[str, np.ndarray]:
    """Networks start from each seed's own PyTorch-default init (spec §5.1), in the same call,
    which also scores every run in-sample (the sweep's ``eval_data``,
    :func:`dpprep.sweeps.evaluate`):
    ``{"loss"}`` and, for classifiers, ``{"accuracy"}`` in percent, float64, leaves ``(S, P)``."""
    params0 = sgd.init_per_seed(model, keys)
    evaluation = sgd.sweep_points(
        cfg,
        params0,
        (x, y),
        keys,
        points,
        params0_per_seed=True,
        eval_data=(x, y),
        return_params=False,
    ).evaluation
    out = {"loss": np.asarray(evaluation["loss"], np.float64)}
    if "accuracy" in evaluation:
        out["accuracy"] = 100.0 * np.asarray(evaluation["accuracy"], np.float64)
    return out


def c_theory(panel: Panel, data: CorrDPData) -> float:
    x, y = _features(panel, data), np.asarray(data.y)
    return noise.theory_constant(lipschitz_bound(panel, x, y), panel.steps, x.shape[0])


def c_grid(panel: Panel, data: CorrDPData, profile: Profile) -> list[tuple[float, str]]:
    """``(C, C_mode)`` pairs of a panel under ``profile`` (None in the list is C_theory; a listed
    value equal to C_theory, e.g. 0.1 for the Medical NN, is run once, as "theory")."""
    out: list[tuple[float, str]] = []
    for c in profile.c_values[panel.key]:
        value, mode = (c_theory(panel, data), "theory") if c is None else (float(c), "paper")
        if not any(math.isclose(value, v, rel_tol=1e-9) for v, _ in out):
            out.append((value, mode))
    return out


def nonprivate_accuracy(panel_key: str, data_dir=None, *, seeds: int = 3) -> np.ndarray:
    """In-sample accuracy (%) of a classification panel's non-private reference, the same config
    as its private runs with b = 0 (spec §6 items 7 and 8): one value per seed (full-batch GLMs
    are deterministic, so one run stands for every seed)."""
    panel = PANELS[panel_key]
    data = panel_data(panel, data_dir)
    x, y = _features(panel, data), np.asarray(data.y)
    model = build_model(panel, x.shape[1], x.shape[0])
    cfg = engine_config(panel, model, panel.steps)
    keys = seed_keys(seeds)
    reference = [sgd.Point("nonprivate", None, 0.0)]
    if panel.is_glm:
        w = np.asarray(
            sgd.sweep_points(cfg, model.init(None), (x, y), keys[:1], reference).params["w"]
        )[0, :, :, 0]
        return np.repeat(utility.accuracy_pp(x, y, w), seeds)
    return _nn_sweep(cfg, model, x, y, keys, reference)["accuracy"][:, 0]
