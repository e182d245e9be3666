"""What one unit of Figure 1 computes: a panel at one C, every seed × ε × method in one compiled
engine call (:func:`dpprep.corrdp.sgd.sweep_points`) with the in-sample metrics of spec A18/A22, and
the mechanism measurement (how far the insensitive first-layer rows move under CorrDP vs
Standard)."""

from __future__ import annotations

import time
from typing import Sequence

import jax
import numpy as np

from dpprep.corrdp import noise, sgd, utility
from dpprep.corrdp.data import CorrDPData, domain_bound

from .config import MECHANISM_EPSILON, PRIVATE, Panel
from .model import (
    _columns,
    _features,
    _nn_sweep,
    build_model,
    engine_config,
    lipschitz_bound,
    method_param_factors,
    seed_keys,
)


def run_unit(
    panel: Panel,
    data: CorrDPData,
    c: float,
    c_mode: str,
    seeds: int,
    epsilons: Sequence[float],
    steps: int,
    *,
    extra_population: bool = False,
) -> dict:
    """Runs one (panel, C) unit and returns its tidy rows as a dict of lists."""
    x, y = _features(panel, data), np.asarray(data.y)
    s_cols, u_cols = _columns(panel, data)
    d = x.shape[1]
    model = build_model(panel, d, x.shape[0])
    cfg = engine_config(panel, model, steps)
    keys = seed_keys(seeds)
    params0 = model.init(jax.random.key(0))  # GLMs: 0; networks: re-initialised per seed below
    factors = noise.method_factors(
        "corrdp", d, s_cols, utility.dataset_tv(data, panel.delta), insensitive=u_cols
    )
    methods = list(PRIVATE) + (["corrdp_population"] if extra_population else [])
    points = []
    for method in methods:
        base = "corrdp" if method == "corrdp_population" else method
        pf = method_param_factors(
            panel, data, params0, base, population=method == "corrdp_population"
        )
        points += [sgd.Point(method, eps, c, pf) for eps in epsilons]
    if not panel.is_glm:
        points.append(sgd.Point("nonprivate", None, 0.0))
    train = sgd.quadratic_sketch(x, y) if panel.model in ("ridge", "ols") else (x, y)
    start = time.perf_counter()
    if panel.is_glm:
        result = sgd.sweep_points(cfg, params0, train, keys, points)
        w = np.asarray(result.params["w"])[..., 0]  # (S, P, d)
        refs = [sgd.Point("nonprivate", None, 0.0, feature_scale=np.ones(d))]
        if panel.partial:
            refs.append(
                sgd.Point(
                    "partial",
                    None,
                    0.0,
                    feature_scale=noise.partial_feature_mask(d, s_cols, u_cols),
                )
            )
        ref = sgd.sweep_points(cfg, params0, train, keys[:1], refs)
        # (R, d): the weights acting on the raw columns (Partial's masked S columns contribute 0).
        w_ref = np.asarray(ref.params["w"])[0, :, :, 0] * np.stack(
            [np.asarray(r.feature_scale) for r in refs]
        )
    else:
        # in-sample loss (and accuracy), leaves (S, P)
        met = _nn_sweep(cfg, model, x, y, keys, points)
    seconds = time.perf_counter() - start
    lipschitz = lipschitz_bound(panel, x, y)
    c_theory = noise.theory_constant(lipschitz, panel.steps, x.shape[0])
    domain_lipschitz, domain_basis = domain_bound(data)
    rows: list[dict] = []

    def add(method, eps, seed, metric, value):
        rows.append(
            {
                "method": method,
                "epsilon": eps,
                "seed": seed,
                "metric": metric,
                "value": float(value),
            }
        )

    if panel.is_glm:
        if panel.task == "regression":
            f_hat = float(
                utility.objective(panel.model, x, y, utility.exact_minimizer(panel.model, x, y))
            )
            f_priv = utility.objective(panel.model, x, y, w)  # (S, P)
            f_ref = utility.objective(panel.model, x, y, w_ref)
            for si in range(seeds):
                for pi, p in enumerate(points):
                    add(p.method, p.epsilon, si, "gap", f_priv[si, pi] - f_hat)
                    add(p.method, p.epsilon, si, "gap_vs_nonprivate", f_priv[si, pi] - f_ref[0])
                for ri, r in enumerate(refs):
                    add(r.method, None, si, "gap", f_ref[ri] - f_hat)
                    add(r.method, None, si, "gap_vs_nonprivate", f_ref[ri] - f_ref[0])
        else:
            acc = utility.accuracy_pp(x, y, w)
            acc_ref = utility.accuracy_pp(x, y, w_ref)
            for si in range(seeds):
                for pi, p in enumerate(points):
                    add(p.method, p.epsilon, si, "accuracy", acc[si, pi])
                    add(p.method, p.epsilon, si, "accuracy_gap_pp", acc_ref[0] - acc[si, pi])
                for ri, r in enumerate(refs):
                    add(r.method, None, si, "accuracy", acc_ref[ri])
                    add(r.method, None, si, "accuracy_gap_pp", acc_ref[0] - acc_ref[ri])
    else:
        npi = len(points) - 1
        for si in range(seeds):
            for pi, p in enumerate(points):
                eps = p.epsilon
                if panel.task == "regression":
                    add(p.method, eps, si, "loss", met["loss"][si, pi])
                    add(p.method, eps, si, "gap", met["loss"][si, pi] - met["loss"][si, npi])
                else:
                    add(p.method, eps, si, "accuracy", met["accuracy"][si, pi])
                    add(
                        p.method,
                        eps,
                        si,
                        "accuracy_gap_pp",
                        met["accuracy"][si, npi] - met["accuracy"][si, pi],
                    )
    out = {k: [r[k] for r in rows] for k in ("method", "epsilon", "seed", "metric", "value")}
    n = x.shape[0]
    # The accuracy (%) of always predicting the majority class: what a collapsed classifier scores.
    majority = (
        100.0 * max(float(np.mean(y)), 1.0 - float(np.mean(y)))
        if panel.task == "classification"
        else None
    )
    return {
        "rows": out,
        "C": c,
        "C_mode": c_mode,
        "C_theory": c_theory,
        "lipschitz": lipschitz,
        "seconds": seconds,
        "n": n,
        "d": d,
        "steps": steps,
        "corrdp_factors": factors.tolist(),
        "runs": seeds * len(points),
        "majority_pp": majority,
        "domain_lipschitz": domain_lipschitz,
        "domain_basis": domain_basis,
    }


def insensitive_displacement(
    panel: Panel,
    data: CorrDPData,
    c: float,
    seeds: int,
    steps: int,
    epsilon: float = MECHANISM_EPSILON,
) -> dict:
    """How far the first-layer weights of the insensitive inputs (the rows ``U`` of ``w1``) move
    under CorrDP relative to Standard: per seed ``‖Δw1[U]‖_corrdp / ‖Δw1[U]‖_standard`` with
    ``Δ = θ_T − θ_0``, both methods from the seed's own initialisation with the same noise draws
    (the same keys: CorrDP's noise on ``U`` is exactly ``sqrt(f)`` times Standard's). Under plain
    (S)GD with the noise dominating, the ratio is ``sqrt(f)``; under Adam, which divides each
    coordinate's step by its own RMS, it stays near 1. Also returns ``sqrt(f)`` on ``U`` and, for
    classifiers, the fraction of rows each run predicts as the majority class."""
    if panel.is_glm:
        raise ValueError(f"panel {panel.key!r} is a GLM; the displacement is measured on networks")
    x, y = _features(panel, data), np.asarray(data.y)
    _, u_cols = _columns(panel, data)
    model = build_model(panel, x.shape[1], x.shape[0])
    keys = seed_keys(seeds)
    params0 = sgd.init_per_seed(model, keys)
    one = jax.tree_util.tree_map(lambda p: np.asarray(p)[0], params0)
    methods = ("standard", "corrdp")
    points = [sgd.Point(m, epsilon, c, method_param_factors(panel, data, one, m)) for m in methods]
    result = sgd.sweep_points(
        engine_config(panel, model, steps), params0, (x, y), keys, points, params0_per_seed=True
    )
    w1_0 = np.asarray(params0["w1"], np.float64)[:, u_cols]  # (S, |U|, hidden)
    w1 = np.asarray(result.params["w1"], np.float64)[:, :, u_cols]  # (S, 2, |U|, hidden)
    moved = np.sqrt(np.sum((w1 - w1_0[:, None]) ** 2, axis=(2, 3)))  # (S, 2)
    factors = noise.method_factors(
        "corrdp",
        x.shape[1],
        _columns(panel, data)[0],
        utility.dataset_tv(data, panel.delta),
        insensitive=u_cols,
    )
    out = {
        "panel": panel.key,
        "optimizer": panel.optimizer,
        "learning_rate": panel.learning_rate,
        "C": c,
        "epsilon": epsilon,
        "steps": steps,
        "ratio": (moved[:, 1] / moved[:, 0]).tolist(),
        "sqrt_factor": np.sqrt(factors[u_cols]).tolist(),
        "majority_prediction": None,
    }
    if panel.task == "classification":
        majority = int(np.mean(y) > 0.5)
        apply = jax.jit(model.apply)
        out["majority_prediction"] = [
            [
                float(
                    np.mean(
                        np.argmax(
                            np.asarray(
                                apply(
                                    jax.tree_util.tree_map(
                                        lambda p, s=s, k=k: p[s, k], result.params
                                    ),
                                    x,
                                )
                            ),
                            axis=-1,
                        )
                        == majority
                    )
                )
                for k in range(len(methods))
            ]
            for s in range(seeds)
        ]
    return out
