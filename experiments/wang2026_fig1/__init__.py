"""Wang, Zhang, Cummings (2026) Figure 1: CorrDP-SGD vs Standard / Semi / Partial (spec §5).

Panels (spec §5.2–5.6): (a) synthetic ridge, (b) Adult LR, (c) Sepsis NN, (d) Credit LR,
(e) Medical Cost OLS, (f) Medical Cost NN. ε ∈ {0.1 … 5} (log axis), seeds 0..S−1, methods of
§5.1: Standard (factor 1), Semi (0 on U), CorrDP (TV~ on U, no floor), Partial (non-private on the
insensitive columns, GLM panels a–b only), and the non-private reference (same config, b = 0).

**ε is nominal** (paper mode, C_mode="paper"): it enters only through ``σ² = C·K_δ/ε²``; no
accountant stands behind it (spec §5.1). ``C``: synthetic 1.0, Adult 3e-3 (§5.1); Credit, Sepsis
and Medical have no calibration target, so they run ``C ∈ {C_theory, 1e-3, 1e-2, 1e-1, 1}``
(profile ``paper``; ``quick`` runs the list on Sepsis and the Medical LR and C = 1e-2 on Credit
and the Medical NN, and 5 seeds on Adult, see :data:`PROFILES`) and the
primary curve is the smallest ``C`` at which Standard's gap at ε = 0.2 exceeds 3× its across-seed
s.d. (§5.1). ``C_theory = L²T/n²`` with ``L`` the clip norm (NN panels) or a per-example gradient
bound of the data (``max‖x‖`` for LR; ``2·max|r_i|·‖x_i‖`` at θ̂ for least squares: data-dependent,
a diagnostic only). Adult also runs C = 1e-3 (profiles ``quick`` and ``paper``): the paper sets
``σ_i² = C·(log(1/δ)+1)/ε²`` "for some constant C > 0" (Section 5) and never gives C, and whether
its "less than a 4% accuracy drop ... (0.2 < ε < 0.5)" on Adult (Section 5.2) holds depends on that
constant, so item 18 is read at every C run on Adult. Adult keeps its preset 3e-3 as its primary
curve and for items 19–21 (:data:`PRESET_C`, :func:`primary_of`); the synthetic panel runs only C =
1.

Every (seed × ε × method) of a panel and C is ONE compiled engine call
(:func:`dpprep.corrdp.sgd.sweep`). Full-batch GLM panels run their deterministic non-private and
Partial references in one extra one-seed call (no noise, full batch: every seed is the same run).
The least-squares panels (a, e) run on :func:`dpprep.corrdp.sgd.quadratic_sketch` rows, which give
the identical full-batch objective and gradient. Metrics (in-sample, spec A18/A22):
regression: ``gap = F(θ^priv) − F(θ̂)`` (θ̂ the exact minimiser for GLMs, the same-seed non-private
network for NNs) and ``gap_vs_nonprivate`` (against the same-config non-private GD run);
classification: ``accuracy_gap_pp = acc(non-private) − acc(private)`` in percentage points.
Every piece is a tested library function: the noise factors are
:func:`dpprep.corrdp.noise.method_factors` / :func:`~dpprep.corrdp.noise.param_factors` with the
TV of :func:`dpprep.corrdp.utility.dataset_tv`; GLM objectives, θ̂, ``L`` and accuracy come from
:mod:`dpprep.corrdp.utility` (float64); networks are scored by the sweep's ``eval_data``
(:func:`dpprep.sweeps.evaluate`).

**DP guarantee:** none for panels a, e (least squares: unbounded per-example gradients, nothing
clipped) and c, f (only the batch mean is clipped); REPORT's first row of this experiment says so
(:func:`dp_status`). For the LR panels :func:`dp_diagnostic` accounts the Standard run with a bound
on ``‖x‖`` over the encoded domain where one exists (Adult: √10,
:func:`dpprep.corrdp.data.domain_bound`); Credit
(StandardScaler) has none, and its rows are labelled as no guarantee.

**Adam and the network panels:** Adam normalises each coordinate's step, so CorrDP's smaller noise
on U barely moves the first-layer U rows differently from Standard (:func:`insensitive_displacement`
measures the ratio under Adam and plain SGD, :func:`mechanism_rows` reports it), and on the Sepsis
NN every private run collapses towards the majority class at some ε (:func:`collapse_row`). The
plain-SGD variants c′, f′ (:data:`VARIANTS`) are run and reported beside c and f.

Outputs: ``fig1.csv`` (tidy: panel, dataset, method, epsilon, seed, metric, value, C, C_mode, …),
``fig1_summary.csv`` (mean, s.d. with ddof = 1), ``fig1.png``; comparisons for spec §6 items
14–22 and the §5.2 magnitude table (its CorrDP column uses the *population* TV 0.364, run as the
extra method ``corrdp_population``; the figure's CorrDP uses the per-feature plug-in, A21).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Sequence

import jax
import numpy as np
import pandas as pd

from dpprep import models, optimizers
from dpprep.corrdp import noise, sgd, utility
from dpprep.corrdp.data import CorrDPData, domain_bound, load_corrdp
from experiments.results import Comparison, config_json, provenance_json, save_figure, write_csv
from experiments import RunContext

EPSILONS = (0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0)
PRIVATE = ("standard", "semi", "corrdp")
NOMINAL = "nominal ε (σ² = C·K_δ/ε²; no accountant, spec §5.1)"


@dataclasses.dataclass(frozen=True)
class Panel:
    """One panel's protocol (spec §5.2–5.6)."""

    key: str
    dataset: str
    model: str  # "ridge", "ols", "logistic", "mlp_classifier", "mlp_regressor"
    steps: int
    learning_rate: float
    sampling: str = "full"
    batch_size: int | None = None
    optimizer: str = "gd"  # "gd" or "adam"
    clip_mode: str | None = None
    clip_norm: float = math.inf
    hidden: int = 0
    partial: bool = False
    variant: str = "default"
    m_s: int = 10
    title: str = ""

    @property
    def task(self) -> str:
        return "regression" if self.model in ("ridge", "ols", "mlp_regressor") else "classification"

    @property
    def is_glm(self) -> bool:
        return not self.model.startswith("mlp")

    @property
    def delta(self) -> float:
        return noise.PAPER_DELTA[self.dataset]


PANELS: dict[str, Panel] = {
    "a": Panel(
        "a", "synthetic", "ridge", 4000, 1e-3, partial=True, title="(a) Synthetic, ridge (m_s = 10)"
    ),
    "b": Panel("b", "adult", "logistic", 5000, 0.05, partial=True, title="(b) Adult, LR"),
    "c": Panel(
        "c",
        "sepsis",
        "mlp_classifier",
        200,
        0.005,
        sampling="without_replacement",
        batch_size=1024,
        optimizer="adam",
        clip_mode="batch",
        clip_norm=5.0,
        hidden=5,
        title="(c) Sepsis, NN",
    ),
    "d": Panel("d", "credit", "logistic", 2000, 0.005, title="(d) Credit Card, LR"),
    "e": Panel("e", "medical", "ols", 5000, 0.001, title="(e) Medical Cost, LR"),
    "f": Panel(
        "f",
        "medical",
        "mlp_regressor",
        1000,
        0.005,
        optimizer="adam",
        clip_mode="batch",
        clip_norm=10.0,
        hidden=20,
        title="(f) Medical Cost, NN",
    ),
}

#: The network panels again with plain (minibatch) SGD / full-batch GD instead of Adam (issue 20).
#: Adam divides each coordinate's update by its own running RMS, so where the noise dominates the
#: gradient (the private runs here) a coordinate moves about one learning rate per step whatever
#: its noise scale: CorrDP's smaller noise on U barely changes the update
#: (:func:`insensitive_displacement` measures it), and item 22 cannot show. Under plain SGD the
#: step is proportional to the noise, so the methods can differ. Learning rates: the paper gives
#: none for SGD; 0.3 (Sepsis) and 0.03 (Medical) were picked from {0.05, 0.3, 1, 3} and
#: {0.03, 0.1, 0.3} as the ones whose non-private and ε = 1 (C = 1e-2) runs trained stably
#: on 3 seeds (not tuned further, and not per method).
VARIANTS: dict[str, Panel] = {
    "c_sgd": dataclasses.replace(
        PANELS["c"],
        key="c_sgd",
        optimizer="gd",
        learning_rate=0.3,
        title="(c') Sepsis, NN, plain SGD (variant)",
    ),
    "f_sgd": dataclasses.replace(
        PANELS["f"],
        key="f_sgd",
        optimizer="gd",
        learning_rate=0.03,
        title="(f') Medical Cost, NN, plain GD (variant)",
    ),
}
#: Each variant's panel and the original it is reported beside.
VARIANT_OF = {"c_sgd": "c", "f_sgd": "f"}
ALL_PANELS: dict[str, Panel] = PANELS | VARIANTS
#: The ε of the mechanism measurement (the Sepsis ties of the quick run sit at ε = 0.75–2).
MECHANISM_EPSILON = 1.0


@dataclasses.dataclass(frozen=True)
class Profile:
    """Seeds, ε grid, step cut and C list per panel (``None`` in a C list = C_theory)."""

    seeds: dict[str, int]
    epsilons: tuple[float, ...]
    c_values: dict[str, tuple[float | None, ...]]
    step_fraction: float = 1.0


_SWEEP_C = (None, *noise.PAPER_C_SWEEP)
#: Adult's preset C (the reproduction spec's pick between the 1e-3 and 1e-2 it ran; the paper gives
#: no C) and the smaller C run beside it: item 18's verdict turns on C (:func:`adult_items`).
ADULT_C = 3e-3
ADULT_C_LOW = 1e-3
#: The panels whose paper-mode C is a preset (synthetic 1, Adult 3e-3): their primary curve and the
#: items read at it stay at the preset whatever other C the profile runs on them
#: (:func:`primary_of`); the §5.1 rule (:func:`primary_c`) picks the primary C of the other panels.
PRESET_C = {"a": 1.0, "b": ADULT_C}
PROFILES = {
    "smoke": Profile(
        {k: 2 for k in ALL_PANELS},
        (0.2, 0.3, 1.0, 5.0),
        {
            "a": (1.0,),
            "b": (3e-3,),
            "c": (1e-2,),
            "d": (1e-2,),
            "e": (1e-2,),
            "f": (1e-2,),
            "c_sgd": (1e-2,),
            "f_sgd": (1e-2,),
        },
        step_fraction=0.05,
    ),
    # Every panel keeps T and all ten ε. Adult (full-batch GD, n = 45k, T = 5000) runs seeds 0..4:
    # with 10 seeds it alone took 137 s of a 4:52 run of the four CorrDP experiments on the shared
    # 2-core CPU; every other panel runs seeds 0..9. The §5.1 C list runs on the Sepsis NN and the
    # Medical LR (cheap); Credit and the Medical NN run C = 1e-2 (the paper profile adds the list).
    # The plain-SGD variants of the networks run C = 1e-2, the C at which every Adam run of the
    # Sepsis NN collapsed to the majority class at ε = 0.75–2; with the four mechanism units, an
    # estimated 1–2 min more on that CPU (from 3–5-seed runs of the same configs; not timed at
    # quick).
    # Adult runs C = 1e-3 beside its preset 3e-3 (item 18 at both; one more Adult unit, ≈ 30 s at
    # 5 seeds on that CPU).
    "quick": Profile(
        {k: 5 if k == "b" else 10 for k in ALL_PANELS},
        EPSILONS,
        {
            "a": (1.0,),
            "b": (ADULT_C_LOW, ADULT_C),
            "c": _SWEEP_C,
            "d": (1e-2,),
            "e": _SWEEP_C,
            "f": (1e-2,),
            "c_sgd": (1e-2,),
            "f_sgd": (1e-2,),
        },
    ),
    "paper": Profile(
        {k: 10 for k in ALL_PANELS},
        EPSILONS,
        {
            "a": (1.0,),
            "b": (ADULT_C_LOW, ADULT_C),
            "c": _SWEEP_C,
            "d": _SWEEP_C,
            "e": _SWEEP_C,
            "f": _SWEEP_C,
            "c_sgd": _SWEEP_C,
            "f_sgd": _SWEEP_C,
        },
    ),
}


# --------------------------------------------------------------------------------------------------
# Data, models and factors


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
        return panel.clip_norm
    theta_hat = (
        utility.exact_minimiser(panel.model, x, y) if panel.model in ("ridge", "ols") else None
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
        clip_norm=panel.clip_norm,
    )


def seed_keys(seeds: int) -> jax.Array:
    """Seeds 0..S−1 (spec §5.1): the DP noise, NN initialisation and minibatches of seed s."""
    return jax.numpy.stack([jax.random.key(s) for s in range(seeds)])


# --------------------------------------------------------------------------------------------------
# One unit: a panel at one C (every seed × ε × method in one compiled call)


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
        result = sgd.sweep(cfg, params0, train, keys, points)
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
        ref = sgd.sweep(cfg, params0, train, keys[:1], refs)
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
                utility.objective(panel.model, x, y, utility.exact_minimiser(panel.model, x, y))
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


def _nn_sweep(cfg: sgd.CorrDPSGD, model: models.Model, x, y, keys, points) -> dict[str, np.ndarray]:
    """Networks start from each seed's own PyTorch-default init (spec §5.1), in the same call,
    which also scores every run in-sample (the sweep's ``eval_data``,
    :func:`dpprep.sweeps.evaluate`):
    ``{"loss"}`` and, for classifiers, ``{"accuracy"}`` in percent, float64, leaves ``(S, P)``."""
    params0 = sgd.init_per_seed(model, keys)
    evaluation = sgd.sweep(
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
    result = sgd.sweep(
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


# --------------------------------------------------------------------------------------------------
# Summaries, comparisons, figure


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    keys = ["panel", "dataset", "C", "C_mode", "method", "epsilon", "metric"]
    g = frame.groupby(keys, dropna=False)["value"]
    out = g.agg(
        mean="mean",
        sd=lambda v: float(np.std(v, ddof=1)) if len(v) > 1 else float("nan"),
        count="count",
    )
    return out.reset_index().assign(epsilon_kind="nominal")


def curve(
    summary: pd.DataFrame, panel: str, method: str, metric: str, c: float | None = None
) -> pd.DataFrame:
    d = summary[
        (summary["panel"] == panel) & (summary["method"] == method) & (summary["metric"] == metric)
    ]
    if c is not None:
        d = d[np.isclose(d["C"], c)]
    return d.sort_values("epsilon").set_index("epsilon")


def primary_c(summary: pd.DataFrame, panel: str, metric: str) -> float:
    """§5.1: the smallest C whose Standard gap at ε = 0.2 exceeds 3× its across-seed s.d.
    (the largest C when none does, or the only one)."""
    d = summary[
        (summary["panel"] == panel)
        & (summary["method"] == "standard")
        & (summary["metric"] == metric)
    ]
    cs = sorted(d["C"].unique())
    for c in cs:
        row = d[np.isclose(d["C"], c) & np.isclose(d["epsilon"], 0.2)]
        if len(row) and row["mean"].iloc[0] > 3 * row["sd"].iloc[0]:
            return float(c)
    return float(cs[-1])


def primary_of(summary: pd.DataFrame, panel: Panel) -> float:
    """The panel's primary C: its preset (:data:`PRESET_C`: synthetic 1, Adult 3e-3) where it has
    one and the profile ran it, else :func:`primary_c`'s rule. The rule is for the panels without a
    calibration target; on Adult it could pick another C it runs (1e-3) and move the primary curve.
    """
    preset = PRESET_C.get(panel.key)
    ran = summary[summary["panel"] == panel.key]["C"].to_numpy(float)
    if preset is not None and np.isclose(ran, preset).any():
        return preset
    return primary_c(summary, panel.key, metric_of(panel))


# --------------------------------------------------------------------------------------------------
# The experiment


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


def unit_key(
    prefix: str, panel: Panel, c: float, seeds: int, epsilons: Sequence[float], steps: int
) -> str:
    spec = config_json(
        dataclasses.asdict(panel) | {"seeds": seeds, "eps": list(epsilons), "steps": steps}
    )
    return f"{prefix}/{panel.key}/{panel.dataset}/m_s={panel.m_s}/C={c:.6g}/{spec}"


def panel_frame(record: dict, panel: Panel, versions: str) -> pd.DataFrame:
    frame = pd.DataFrame(record["rows"])
    frame.insert(0, "panel", panel.key)
    frame.insert(1, "dataset", panel.dataset)
    for name, value in (
        ("m_s", panel.m_s),
        ("C", record["C"]),
        ("C_mode", record["C_mode"]),
        ("C_theory", record["C_theory"]),
        ("delta", panel.delta),
        ("steps", record["steps"]),
        ("learning_rate", panel.learning_rate),
        ("n", record["n"]),
    ):
        frame[name] = value
    frame["epsilon_kind"] = "nominal"
    frame["versions"] = versions
    return frame


def run_panels(
    ctx: RunContext,
    panels: Sequence[Panel],
    profile: Profile,
    prefix: str,
    population: set[str] = frozenset(),
) -> tuple[pd.DataFrame, list[dict]]:
    """Every (panel, C) unit through ``ctx.store.run_many``; returns the tidy frame and the
    records."""
    items, metas = panel_items(ctx, panels, profile, prefix, population)
    return assemble(ctx, metas, ctx.store.run_many(items))


def panel_items(
    ctx: RunContext,
    panels: Sequence[Panel],
    profile: Profile,
    prefix: str,
    population: set[str] = frozenset(),
) -> tuple[list, list]:
    """The ``(key, compute)`` units of every (panel, C) and their ``(key, panel)``, for one
    ``run_many`` (a sharded run must submit a grid in one call)."""
    datas: dict[tuple, CorrDPData] = {}
    items, metas = [], []
    for panel in panels:
        dkey = (panel.dataset, panel.m_s, panel.variant)
        if dkey not in datas:
            datas[dkey] = panel_data(panel, ctx.data_dir)
        data = datas[dkey]
        seeds = profile.seeds[panel.key]
        steps = max(1, round(panel.steps * profile.step_fraction))
        for c, c_mode in c_grid(panel, data, profile):
            key = unit_key(prefix, panel, c, seeds, profile.epsilons, steps)

            def compute(panel=panel, data=data, c=c, c_mode=c_mode, seeds=seeds, steps=steps):
                ctx.progress(
                    f"panel {panel.key} ({panel.dataset}, m_s={panel.m_s}) C={c:.3g}: "
                    f"{seeds} seeds x {len(profile.epsilons)} eps"
                )
                return run_unit(
                    panel,
                    data,
                    c,
                    c_mode,
                    seeds,
                    profile.epsilons,
                    steps,
                    extra_population=panel.key in population,
                )

            items.append((key, compute))
            metas.append((key, panel))
    return items, metas


def assemble(ctx: RunContext, metas: list, records: list[dict]) -> tuple[pd.DataFrame, list[dict]]:
    """The tidy frame and the records (tagged with panel and key) of :func:`panel_items`' units."""
    frames = [
        panel_frame(rec, panel, provenance_json(ctx.store.provenance(key)))
        for (key, panel), rec in zip(metas, records)
    ]
    return pd.concat(frames, ignore_index=True), [
        dict(rec, panel=panel.key, key=key) for (key, panel), rec in zip(metas, records)
    ]


#: The C of the mechanism measurement: the quick run's C at which every Adam run of the Sepsis NN
#: collapsed to the majority class at ε = 0.75–2.
MECHANISM_C = 1e-2


def mechanism_items(ctx: RunContext, profile: Profile) -> list:
    """One unit per network panel and its plain-SGD variant: :func:`insensitive_displacement` at
    ε = 1, C = :data:`MECHANISM_C` (the panel's seeds and step cut)."""
    items = []
    for variant, base in VARIANT_OF.items():
        for panel in (PANELS[base], VARIANTS[variant]):
            seeds = profile.seeds[panel.key]
            steps = max(1, round(panel.steps * profile.step_fraction))
            spec = config_json(
                dataclasses.asdict(panel)
                | {
                    "seeds": seeds,
                    "steps": steps,
                    "C": MECHANISM_C,
                    "eps": MECHANISM_EPSILON,
                }
            )

            def compute(panel=panel, seeds=seeds, steps=steps):
                ctx.progress(
                    f"mechanism: panel {panel.key} ({panel.optimizer}) U-row displacement, {seeds}"
                    " seeds"
                )
                return insensitive_displacement(
                    panel, panel_data(panel, ctx.data_dir), MECHANISM_C, seeds, steps
                )

            items.append((f"fig1-mechanism/{panel.key}/{spec}", compute))
    return items


def mechanism_rows(mechanism: list[dict]) -> list[Comparison]:
    """Per network panel: the U-row displacement ratio under Adam (as run) and plain SGD (the
    variant). Holds if Adam's ratio lies nearer 1 than ``sqrt(f)`` and plain SGD's nearer
    ``sqrt(f)`` than 1 (the midpoint between the two regimes; no tuned threshold)."""
    by_key = {m["panel"]: m for m in mechanism}
    out = []
    for variant, base in VARIANT_OF.items():
        adam, plain = by_key[base], by_key[variant]
        root = float(np.mean(adam["sqrt_factor"]))
        mid = (1.0 + root) / 2
        r_adam, r_plain = np.asarray(adam["ratio"]), np.asarray(plain["ratio"])
        span = lambda r: f"{r.mean():.3f} ({r.min():.3f}–{r.max():.3f} over {len(r)} seeds)"  # noqa: E731
        kind = "GD" if VARIANTS[variant].sampling == "full" else "SGD"
        roots = _fmt(sorted(set(np.round(adam["sqrt_factor"], 4))))
        measured = (
            f"Adam (as run, lr {adam['learning_rate']:g}): {span(r_adam)}; plain {kind} "
            f"(variant, lr {plain['learning_rate']:g}): {span(r_plain)}; sqrt(f) on U = {roots}"
        )
        if adam["majority_prediction"] is not None:
            collapsed = lambda m: int((np.asarray(m["majority_prediction"]) >= 0.99).sum())  # noqa: E731
            total = np.size(adam["majority_prediction"])
            measured += (
                "; runs predicting the majority class for ≥ 99 % of rows: Adam"
                f" {collapsed(adam)}/{total}, plain {collapsed(plain)}/{total}"
            )
        out.append(
            Comparison.claim(
                f"{PANELS[base].title}: why CorrDP ≈ Standard — insensitive-row displacement"
                f" ‖Δw1[U]‖ CorrDP ÷ Standard (ε = {adam['epsilon']:g}, C = {adam['C']:g}, T ="
                f" {adam['steps']}, same noise draws)",
                "CorrDP's noise on U is sqrt(f) × Standard's: Adam ratio ≈ 1, plain SGD ratio ≈"
                " sqrt(f)",
                measured,
                bool(r_adam.mean() > mid and r_plain.mean() < mid),
                note=(
                    "Adam divides each coordinate's step by its own RMS, so where the noise"
                    " dominates the gradient a coordinate moves about one learning rate per step"
                    " whatever its noise scale: CorrDP's smaller noise on U barely changes the"
                    " update, and item 22 cannot show under Adam; the plain-SGD variant"
                    f" ({VARIANTS[variant].title}) is reported beside it. Criterion: Adam's mean"
                    f" ratio above, plain's below, the midpoint (1 + sqrt(f))/2 = {mid:.3f}"
                ),
            )
        )
    return out


def collapse_row(
    frame: pd.DataFrame, panel: Panel, c: float, majority: float, n: int, near: float = 0.5
) -> Comparison:
    """Which private runs of a classification panel score exactly the majority-class rate (the
    classifier that always predicts the majority class) or within ``near`` pp of it, per ε, and the
    methods' mean accuracy gaps at the ε where every run is within ``near``. "Exactly": within half
    an example (50/n pp; the evaluation's accuracy is float32)."""
    d = frame[
        (frame["panel"] == panel.key) & np.isclose(frame["C"], c) & frame["method"].isin(PRIVATE)
    ]
    acc = d[d["metric"] == "accuracy"]
    dev = (acc["value"] - majority).abs()
    counts = (
        pd.DataFrame({"exact": dev <= 50.0 / n, "near": dev <= near})
        .groupby(acc["epsilon"])
        .agg(["sum", "count"])
    )
    rows = [
        (float(e), int(r[("exact", "sum")]), int(r[("near", "sum")]), int(r[("near", "count")]))
        for e, r in counts.iterrows()
    ]
    measured = f"runs within ±{near:g} pp (exactly at it): " + "; ".join(
        f"ε = {e:g}: {m}/{n} ({k})" for e, k, m, n in rows
    )
    every = [e for e, _, m, n in rows if m == n]
    if every:
        gap = (
            d[(d["metric"] == "accuracy_gap_pp") & d["epsilon"].isin(every)]
            .groupby(["method", "epsilon"])["value"]
            .mean()
        )
        measured += (
            f". Every run within ±{near:g} pp at ε = {_fmt(every)}: there the methods' mean"
            f" accuracy gaps are {gap.min():.2f}–{gap.max():.2f} pp, a tie between (near-)constant"
            " classifiers"
        )
    else:
        measured += f". At no ε is every run within ±{near:g} pp"
    return Comparison.info(
        f"{panel.title}: private runs at the majority-class rate {majority:.2f} %, C = {c:.3g}",
        measured,
        note=(
            "in-sample accuracy of each (method, seed) run against always predicting the majority"
            " class"
        ),
    )


def metric_of(panel: Panel) -> str:
    return "gap" if panel.task == "regression" else "accuracy_gap_pp"


def _fmt(values) -> str:
    return ", ".join(f"{v:.3g}" for v in values)


def _c_text(c: float) -> str:
    """``C`` as the comparisons name it: 3e-3, 1e-3, 2.5e-3."""
    mantissa, exponent = f"{c:.2e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def adult_items(summary: pd.DataFrame, epsilons: Sequence[float]) -> list[Comparison]:
    """Spec §6 items 18–21 on Adult (Fig. 1b). Item 18, "less than a 4% accuracy drop compared with
    the non-private baseline, even in a relatively high privacy regime (0.2 < ε < 0.5)" (paper,
    Section 5.2), is read at every C run on Adult: the paper's noise ``σ_i² = C·(log(1/δ)+1)/ε²``
    has "some constant C > 0" (Section 5) that it never gives, the gaps grow with C, and the verdict
    turns on it. Items 19–21 are read at the primary C (:func:`primary_of`: the preset 3e-3)."""
    out: list[Comparison] = []
    m = "accuracy_gap_pp"
    adult = summary[summary["panel"] == "b"]
    cs = [float(c) for c in sorted(adult["C"].unique())]
    c_b = primary_of(summary, PANELS["b"])
    sel = [e for e in (0.3, 0.5) if e in epsilons]
    if sel:
        drops = {
            c: (
                curve(summary, "b", "corrdp", m, c)["mean"].loc[sel],
                curve(summary, "b", "standard", m, c)["mean"].loc[sel],
            )
            for c in cs
        }
        every = "; ".join(f"{_fmt(cor)} pp at C = {_c_text(c)}" for c, (cor, _) in drops.items())
        for c, (cor, std) in drops.items():
            why = (
                "the spec's pick between the 1e-3 and 1e-2 it ran (not tuned here)"
                if np.isclose(c, ADULT_C)
                else (
                    "the lower of the two C the spec ran (1e-3, 1e-2), run beside the preset"
                    f" {_c_text(ADULT_C)} (not tuned here)"
                    if np.isclose(c, ADULT_C_LOW)
                    else f"run beside the preset {_c_text(ADULT_C)} (not tuned here)"
                )
            )
            out.append(
                Comparison.claim(
                    f"#18 Adult: CorrDP accuracy drop < 4 pp for 0.2 < ε < 0.5 (C = {_c_text(c)})",
                    "< 4 pp",
                    f"{_fmt(cor)} pp at ε = {_fmt(sel)} (Standard {_fmt(std)} pp)",
                    bool((cor < 4.0).all()),
                    note=(
                        "the verdict depends on the free constant C (the paper's σ² ="
                        " C·(log(1/δ)+1)/ε², 'for some constant C > 0', never given; σ² ∝ C):"
                        f" CorrDP drop at ε = {_fmt(sel)} is {every}; C = {_c_text(c)} is {why};"
                        f" {NOMINAL}"
                    ),
                )
            )
    cor, semi, std = (curve(summary, "b", k, m, c_b) for k in ("corrdp", "semi", "standard"))
    sd = np.maximum(cor["sd"], semi["sd"])
    within = (cor["mean"] - semi["mean"]).abs() <= 2 * sd
    better = cor["mean"] < semi["mean"]
    at = f"C = {_c_text(c_b)}"
    out.append(
        Comparison.claim(
            "#19 Adult: 'CorrDP even outperforms Semi' (accepted if |CorrDP − Semi| ≤ 2 s.d. at"
            " every ε)",
            "CorrDP ≤ Semi",
            f"CorrDP − Semi {_fmt(cor['mean'] - semi['mean'])} pp; within 2 s.d. at"
            f" {int(within.sum())}/{len(within)} ε; CorrDP below Semi at"
            f" {int(better.sum())}/{len(better)} ε",
            bool(within.all()),
            note=(
                "not expected to reproduce systematically: Semi injects strictly less noise (0 on"
                f" U); {at}"
            ),
        )
    )
    ok20 = cor["mean"] <= std["mean"] + std["sd"]
    out.append(
        Comparison.claim(
            "#20 Adult: CorrDP ≤ Standard + 1 s.d. (every ε)",
            "implied",
            f"holds at {int(ok20.sum())}/{len(ok20)} ε; CorrDP − Standard"
            f" {_fmt(cor['mean'] - std['mean'])} pp",
            bool(ok20.all()),
            note=f"noise trace ratio ≈ 0.85: the curves nearly coincide; {at}",
        )
    )
    partial = adult[
        (adult["method"] == "partial") & (adult["metric"] == m) & np.isclose(adult["C"], c_b)
    ]
    pb = float(partial["mean"].iloc[0])
    hi = [e for e in epsilons if e >= 0.3]
    top = max(float(curve(summary, "b", k, m, c_b)["mean"].loc[hi].max()) for k in PRIVATE)
    out.append(
        Comparison.claim(
            f"#21 Adult: Partial worst for ε ≥ 0.3 ({at})",
            "Partial gap ≈ 6 pp above every private curve",
            f"Partial {pb:.2f} pp; largest private mean gap at ε ≥ 0.3: {top:.2f} pp",
            top < pb,
        )
    )
    return out


def comparisons(summary: pd.DataFrame, profile: Profile, records: list[dict]) -> list[Comparison]:
    out: list[Comparison] = []
    eps = np.array(profile.epsilons)
    # §5.2 magnitude table at ε = 1 (gap against non-private GD; CorrDP with the population TV).
    if 1.0 in profile.epsilons:
        a = PANELS["a"]
        # (α/4)·m_s·K_δ at ε = 1, C = 1
        semi_analytic = a.learning_rate / 4 * 10 * noise.k_delta(a.delta)
        notes = {
            "standard": NOMINAL,
            "corrdp_population": "population TV 0.364 (as the spec's table)",
        }
        for method, paper in (("standard", 0.256), ("corrdp_population", 0.117)):
            v = curve(summary, "a", method, "gap_vs_nonprivate")["mean"].loc[1.0]
            out.append(
                Comparison.numeric(
                    f"§5.2 magnitude, synthetic ε=1: {method}",
                    paper,
                    float(v),
                    rel_tol=0.15,
                    digits=3,
                    note="gap vs non-private GD, C = 1, mean over seeds; " + notes[method],
                )
            )
        # The spec's semi-sensitive target (0.040) is not the quantity of its own table: the closed
        # form
        # of the stationary noise gap is (α/4)·m_s·K_δ, and the spec's number sits near the gap to
        # the exact minimiser instead. Measured and stated, not scored against the spec's error.
        semi_np = curve(summary, "a", "semi", "gap_vs_nonprivate")["mean"].loc[1.0]
        semi_star = curve(summary, "a", "semi", "gap")["mean"].loc[1.0]
        out.append(
            Comparison.info(
                "§5.2 magnitude, synthetic ε=1: semi",
                f"{semi_np:.3g}",
                paper="0.040 (spec)",
                note=(
                    "gap vs non-private GD, C = 1, mean over seeds; the closed form (α/4)·m_s·K_δ"
                    f" is {semi_analytic:.4f} (measured {semi_np:.4f}); the spec's 0.040 is its own"
                    f" error: it is near the gap to the exact minimiser ({semi_star:.4f} measured),"
                    " not the gap vs non-private GD its table reports"
                ),
            )
        )
    partial = summary[
        (summary["panel"] == "a")
        & (summary["method"] == "partial")
        & (summary["metric"] == "gap_vs_nonprivate")
    ]
    out.append(
        Comparison.numeric(
            "§5.2 magnitude, synthetic: Partial gap",
            37.2,
            float(partial["mean"].iloc[0]),
            rel_tol=0.15,
            digits=3,
            note="ε-independent (non-private on U only)",
        )
    )
    out.append(item14(summary, profile.epsilons))
    # Items 15–17 (synthetic).
    cor, semi = curve(summary, "a", "corrdp", "gap"), curve(summary, "a", "semi", "gap")
    std = curve(summary, "a", "standard", "gap")
    low = eps[eps <= 2.0]
    high = eps[eps > 2.0]
    strict = cor["mean"].loc[low] < std["mean"].loc[low]
    overlap = (cor["mean"] - cor["sd"]).loc[high] <= (std["mean"] + std["sd"]).loc[high]
    out.append(
        Comparison.claim(
            "#15 synthetic: CorrDP < Standard (mean, every ε ≤ 2; bands may touch above)",
            "always outperforms",
            f"CorrDP/Standard gap ratio {_fmt(cor['mean'] / std['mean'])}",
            bool(strict.all() and overlap.all()),
            note=NOMINAL,
        )
    )
    ok16 = semi["mean"] <= cor["mean"] + cor["sd"]
    out.append(
        Comparison.claim(
            "#16 synthetic: Semi ≤ CorrDP + 1 s.d. (every ε)",
            "Semi is the upper bound on utility",
            f"holds at {int(ok16.sum())}/{len(ok16)} ε; Semi/CorrDP"
            f" {_fmt(semi['mean'] / cor['mean'])}",
            bool(ok16.all()),
        )
    )
    pgap = float(
        summary[
            (summary["panel"] == "a")
            & (summary["method"] == "partial")
            & (summary["metric"] == "gap")
        ]["mean"].iloc[0]
    )
    worst = max(float(curve(summary, "a", m, "gap")["mean"].max()) for m in PRIVATE)
    out.append(
        Comparison.claim(
            "#17 synthetic: Partial worst (every private method below it, every ε, C = 1)",
            "every method using S beats Partial",
            f"Partial {pgap:.3g}; largest private mean gap {worst:.3g}",
            worst < pgap,
        )
    )
    out += adult_items(summary, profile.epsilons)
    # Item 22 per panel c–f at its primary C, and on the plain-SGD variants of the networks.
    for key in ("c", "c_sgd", "d", "e", "f", "f_sgd"):
        if key not in profile.c_values:
            continue
        panel = ALL_PANELS[key]
        metric = metric_of(panel)
        c = primary_c(summary, key, metric)
        cor, semi, std = (curve(summary, key, k, metric, c) for k in ("corrdp", "semi", "standard"))
        ok1 = std["mean"] - cor["mean"] >= 0
        ok2 = (cor["mean"] - semi["mean"]).abs() <= (std["mean"] - semi["mean"]).abs()
        first, second = ok1.mean(), ok2.mean()
        fails = lambda ok: _fmt(ok.index[~ok.to_numpy()]) or "none"  # noqa: E731
        # Where "Standard − CorrDP ≥ 0" fails, say whether it fails by a tie: a difference within
        # the seeds' spread (the larger of the two methods' s.d. at that ε) is no ordering either
        # way.
        lost = ~ok1.to_numpy()
        gaps = (std["mean"] - cor["mean"]).abs().to_numpy()[lost]
        spread = np.maximum(std["sd"], cor["sd"]).to_numpy()[lost]
        ties = ""
        if lost.any():
            ties = (
                "; where Standard − CorrDP < 0 the curves tie (|Standard − CorrDP| ≤"
                f" {gaps.max():.3g}, within the seeds' s.d. at each of those ε)"
                if np.all(gaps <= spread)
                else (
                    f"; where Standard − CorrDP < 0: |Standard − CorrDP| up to {gaps.max():.3g},"
                    " beyond the seeds' s.d. at some of those ε"
                )
            )
        out.append(
            Comparison.claim(
                f"#22 {panel.title}: CorrDP ≈ Semi, both better than Standard (C = {c:.3g})",
                "Standard − CorrDP ≥ 0 and |CorrDP − Semi| ≤ |Standard − Semi| in ≥ 80 % of ε",
                f"{first:.0%} and {second:.0%} of {len(std)} ε (fail at ε = {fails(ok1)}; "
                f"{fails(ok2)}); Standard − CorrDP {_fmt(std['mean'] - cor['mean'])}",
                bool(first >= 0.8 and second >= 0.8),
                note=(
                    "primary C by the §5.1 rule among "
                    f"{sorted(set(summary[summary['panel'] == key]['C'].round(8)))}{ties}; "
                    f"{NOMINAL}"
                ),
            )
        )
    # Context rows: what this profile ran (cuts included) and what each unit cost.
    out.append(
        Comparison.info(
            "Fig. 1 profile: seeds / C per panel",
            "; ".join(
                f"{k}: {profile.seeds[k]} seeds, C ∈"
                f" {{{_fmt(r['C'] for r in records if r['panel'] == k)}}}"
                for k in ALL_PANELS
                if k in profile.c_values
            ),
            note=(
                f"ε grid {list(profile.epsilons)}; T × {profile.step_fraction:g} of the paper's;"
                f" every ε {NOMINAL}"
            ),
        )
    )
    for rec in records:
        # Wall times vary run to run, so they go to units.csv, not into the comparisons.
        out.append(
            Comparison.info(
                f"panel {rec['panel']} C={rec['C']:.3g} ({rec['C_mode']}): runs",
                f"{rec['runs']} runs, T = {rec['steps']} (one compiled call)",
                note=f"C_theory = L²T/n² = {rec['C_theory']:.3g} (L = {rec['lipschitz']:.3g})",
            )
        )
    return out


def units_frame(records: list[dict]) -> pd.DataFrame:
    """One row per unit: what it ran and its wall time (seconds of the compiled sweep calls)."""
    keys = ("panel", "C", "C_mode", "C_theory", "lipschitz", "runs", "steps", "n", "d", "seconds")
    return pd.DataFrame([{k: rec[k] for k in keys} for rec in records])


def item14(summary: pd.DataFrame, epsilons: Sequence[float]) -> Comparison:
    """Spec §6 item 14: panel a's Standard gap (vs non-private GD) ≈ (α/4)Σσ_i² = (α/4)·m·C·K_δ/ε²
    (stationary GD noise on a quadratic) for every ε ≤ 1 at C = 1, within 15 %."""
    a = PANELS["a"]
    std = curve(summary, "a", "standard", "gap_vs_nonprivate", 1.0)
    small = [e for e in epsilons if e <= 1.0]
    predicted = np.array([a.learning_rate / 4 * 100 * noise.k_delta(a.delta) / e**2 for e in small])
    ratios = std["mean"].loc[small].to_numpy() / predicted
    return Comparison.claim(
        "#14 synthetic Standard gap ≈ (α/4)Σσ_i² for ε ≤ 1 (C = 1), within 15 %",
        "ratio 1 ± 0.15",
        f"ratios {_fmt(ratios)} at ε = {_fmt(small)}",
        bool(np.all(np.abs(ratios - 1) <= 0.15)),
        note=(
            f"(α/4)Σσ² = 0.255/ε²; mean of {int(std['count'].iloc[0])} seeds; gap vs non-private"
            f" GD; {NOMINAL}"
        ),
    )


def item14_check(
    data_dir=None, *, seeds: int = 10, epsilons: Sequence[float] = (0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
) -> Comparison:
    """Item 14 on its own (for ``wang2026_checks``): panel a at C = 1 through :func:`run_unit`."""
    panel = PANELS["a"]
    record = run_unit(
        panel, panel_data(panel, data_dir), 1.0, "paper", seeds, epsilons, panel.steps
    )
    return item14(summarize(panel_frame(record, panel, "")), epsilons)


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
        w = np.asarray(sgd.sweep(cfg, model.init(None), (x, y), keys[:1], reference).params["w"])[
            0, :, :, 0
        ]
        return np.repeat(utility.accuracy_pp(x, y, w), seeds)
    return _nn_sweep(cfg, model, x, y, keys, reference)["accuracy"][:, 0]


def dp_diagnostic(records: list[dict], epsilons: Sequence[float]) -> pd.DataFrame:
    """Optional diagnostic (spec §5.1): the (ε, δ)-DP that dp-accounting certifies for the Standard
    run of the LR panels (full-batch Gaussian steps, replace-one: sensitivity 2L/n of the mean,
    PLD), where ``‖∇ℓ‖ ≤ ‖x‖ ≤ L``. ``dp_epsilon`` uses a bound ``L`` over the encoded domain
    (:func:`dpprep.corrdp.data.domain_bound`; Adult's √10) and is a guarantee; where no domain bound
    exists (Credit under
    StandardScaler) it is NaN. ``epsilon_at_data_max`` uses the data's ``max‖x‖`` instead: a DP
    statement only for neighbours whose replacement row is no longer than that, i.e. none in
    general.
    The other panels have no per-example bound at all (least squares; networks clip only the batch
    mean), see :func:`dp_status`. The paper's ε stays nominal."""
    rows = []
    for rec in records:
        panel = ALL_PANELS.get(rec["panel"])
        if panel is None or panel.model != "logistic":
            continue
        domain = rec["domain_lipschitz"]
        for eps in epsilons:
            sigma = math.sqrt(noise.base_variance(eps, panel.delta, rec["C"]))

            def accounted(lipschitz: float) -> float:
                return sgd.standard_dp_epsilon(
                    sigma, n=rec["n"], steps=rec["steps"], lipschitz=lipschitz, delta=panel.delta
                )

            rows.append(
                {
                    "panel": panel.key,
                    "dataset": panel.dataset,
                    "C": rec["C"],
                    "nominal_epsilon": eps,
                    "delta": panel.delta,
                    "sigma_on_mean": sigma,
                    "lipschitz_domain": domain,
                    "domain_basis": rec["domain_basis"],
                    "lipschitz_data_max": rec["lipschitz"],
                    "n": rec["n"],
                    "steps": rec["steps"],
                    "dp_epsilon": math.nan if domain is None else accounted(domain),
                    "epsilon_at_data_max": accounted(rec["lipschitz"]),
                }
            )
    return pd.DataFrame(rows)


def dp_status(panel: Panel, record: dict) -> str:
    """What DP the panel's private runs carry (REPORT's disclosure row), from its protocol."""
    if panel.model in ("ridge", "ols"):
        return (
            "none: least-squares per-example gradients 2(θᵀx − y)x are unbounded and nothing is"
            " clipped (C_theory's L is the data's gradient bound at θ̂, a diagnostic)"
        )
    if not panel.is_glm:
        sigma = math.sqrt(noise.base_variance(1.0, panel.delta, record["C"]))
        return (
            f"none: only the {'minibatch' if panel.sampling != 'full' else 'full-batch'} mean"
            f" gradient is clipped (to {panel.clip_norm:g}), not each example's, so one record can"
            f" move it by up to 2 × {panel.clip_norm:g}, against noise std {sigma:.2g} at nominal ε"
            f" = 1 (C = {record['C']:.3g})"
        )
    if record["domain_lipschitz"] is not None:
        return (
            "Standard only: (ε', δ)-DP by dp-accounting with the domain bound L ="
            f" {record['domain_basis']} (rows '(ε, δ)-DP of the Standard run' below); Semi and"
            " CorrDP are not accounted here"
        )
    return (
        f"none a priori ({record['domain_basis']}); the diagnostic rows below use the data's max‖x‖"
        f" = {record['lipschitz']:.3g}, which bounds only the rows present, not a neighbour's"
        " replacement"
    )


def plot(
    summary: pd.DataFrame, panels: Sequence[Panel], path, *, title: str, primary: dict[str, float]
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = 3 if len(panels) > 4 else min(2, len(panels))
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.8 * rows), squeeze=False)
    colors = {
        "standard": "C3",
        "semi": "C2",
        "corrdp": "C0",
        "partial": "C7",
        "corrdp_population": "C9",
    }
    for ax, panel in zip(axes.flat, panels):
        metric = metric_of(panel)
        c = primary[panel.key]
        # Regression gaps span decades, so their axis is log. A network's gap (against its same-seed
        # non-private run) can average ≤ 0 at large ε; a symlog axis would need a linear threshold,
        # and none reads at both profiles: at the smallest |mean| it stretches the ±1e-3 scatter
        # about zero over as many decades as the signal (quick (f′): ticks from −1 to 10), near the
        # signal it flattens the curves, and the paper profile's (f′) spans 1e-2 to 1e6. So the axis
        # is log of the positive means; a mean ≤ 0 breaks its line and is drawn as an open triangle
        # on the axis floor (a third of the smallest positive mean; named in the legend), and a band
        # whose lower edge is ≤ 0 runs to the floor (the seeds' spread reaches zero there). Panels
        # whose means are all positive are drawn as before, with no floor.
        regression = panel.task == "regression"
        curves = {
            method: curve(summary, panel.key, method, metric, c)
            for method in ("standard", "semi", "corrdp")
        }
        means = np.concatenate([d["mean"].to_numpy(float) for d in curves.values()])
        floor = (
            float(means[means > 0].min()) / 3
            if regression and (means <= 0).any() and (means > 0).any()
            else None
        )
        for i, (method, d) in enumerate(curves.items()):
            label = method.capitalize() if method != "corrdp" else "CorrDP"
            shown = d["mean"].where(d["mean"] > 0) if regression else d["mean"]
            ax.plot(d.index, shown, "-o", ms=3, color=colors[method], label=label)
            ax.fill_between(
                d.index,
                d["mean"] - d["sd"].fillna(0),
                d["mean"] + d["sd"].fillna(0),
                color=colors[method],
                alpha=0.2,
            )
            low = d.index[(d["mean"] <= 0).to_numpy()].to_numpy(float)
            # side by side where several methods are ≤ 0 at one ε
            if floor is not None and len(low):
                ax.plot(
                    low * 1.04 ** (i - 1),
                    np.full(len(low), floor),
                    "v",
                    ms=6,
                    mfc="none",
                    color=colors[method],
                    clip_on=False,
                    zorder=3,
                )
        p = summary[
            (summary["panel"] == panel.key)
            & (summary["method"] == "partial")
            & (summary["metric"] == metric)
        ]
        if len(p):
            ax.axhline(float(p["mean"].iloc[0]), color=colors["partial"], ls="--", label="Partial")
        ax.set_xscale("log")
        if regression:
            ax.set_yscale("log")
            if floor is not None:
                ax.set_ylim(bottom=floor)
                ax.plot([], [], "v", mfc="none", color="0.3", label="mean gap ≤ 0 (at the floor)")
        ax.set_xlabel("nominal ε")
        ax.set_ylabel("utility gap" if panel.task == "regression" else "accuracy gap (pp)")
        ax.set_title(f"{panel.title}, C = {c:.3g}", fontsize=9)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def run(ctx: RunContext) -> list[Comparison]:
    profile = PROFILES[ctx.profile]
    panels = list(ALL_PANELS.values())
    items, metas = panel_items(ctx, panels, profile, "fig1", population={"a"})
    extra = mechanism_items(ctx, profile)
    done = ctx.store.run_many(items + extra)  # one grid: a sharded run must submit it in one call
    frame, records = assemble(ctx, metas, done[: len(items)])
    mechanism = done[len(items) :]
    write_csv(frame, ctx.out_dir / "fig1.csv")
    summary = summarize(frame)
    write_csv(summary, ctx.out_dir / "fig1_summary.csv")
    primary = {p.key: primary_of(summary, p) for p in panels}
    plot(
        summary,
        panels,
        ctx.out_dir / "fig1.png",
        primary=primary,
        title="Wang et al. 2026 Fig. 1 (mean ± 1 s.d.; ε nominal: σ² = C·K_δ/ε²)",
    )
    write_csv(units_frame(records), ctx.out_dir / "units.csv")
    diagnostic = dp_diagnostic(records, profile.epsilons)
    write_csv(diagnostic, ctx.out_dir / "fig1_dp_diagnostic.csv")
    # Disclosure first: most panels carry no DP guarantee at all, whatever their ε axis says.
    first = {
        r["panel"]: r for r in records if np.isclose(r["C"], primary[r["panel"]])
    }  # each panel at its primary C
    out = [
        Comparison.info(
            "DP guarantee of each panel's private runs (the figure's ε is nominal: σ² = C·K_δ/ε²)",
            "; ".join(
                f"({k}) {dp_status(ALL_PANELS[k], first[k])}" for k in ALL_PANELS if k in first
            ),
            note="no panel's ε axis is an accounted ε; only the (ε, δ) rows below are",
        )
    ]
    out += comparisons(summary, profile, records)
    for key in ("c", "c_sgd"):
        panel = ALL_PANELS[key]
        c = primary[key]
        rec = next(r for r in records if r["panel"] == key and np.isclose(r["C"], c))
        out.append(collapse_row(frame, panel, c, rec["majority_pp"], rec["n"]))
    out += mechanism_rows(mechanism)
    for (key, c), d in diagnostic.groupby(["panel", "C"]):
        pairs = lambda col: "; ".join(  # noqa: E731
            f"nominal {e:g} → {v:.3g}" for e, v in zip(d["nominal_epsilon"], d[col])
        )
        data_max = f"L = max‖x‖ of the data = {d['lipschitz_data_max'].iloc[0]:.3g}"
        if d["lipschitz_domain"].notna().all():
            out.append(
                Comparison.info(
                    f"panel {key} C={c:.3g}: (ε, δ)-DP of the Standard run (diagnostic)",
                    pairs("dp_epsilon"),
                    note=(
                        "dp-accounting PLD, full-batch Gaussian, replace-one, domain bound L ="
                        f" {d['domain_basis'].iloc[0]} = {d['lipschitz_domain'].iloc[0]:.3g}, δ ="
                        f" {d['delta'].iloc[0]:g} (with {data_max}:"
                        f" {pairs('epsilon_at_data_max')}); the figure's ε is nominal"
                    ),
                )
            )
        else:
            out.append(
                Comparison.info(
                    f"panel {key} C={c:.3g}: no (ε, δ)-DP guarantee (no domain bound); ε if every"
                    f" record obeyed {data_max}",
                    pairs("epsilon_at_data_max"),
                    note=(
                        f"{d['domain_basis'].iloc[0]}: the data's max‖x‖ bounds only the rows"
                        " present, so this is no DP guarantee; dp-accounting PLD, full-batch"
                        f" Gaussian, replace-one, δ = {d['delta'].iloc[0]:g}"
                    ),
                )
            )
    return out
