"""hu2024_fig3_selection (issue 22 item 3): Fig 3 (c) with the step size selected privately."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from dpprep.data.synthetic import low_rank_logistic
from dpprep.plan import DPPlan
from experiments import REGISTRY, run_experiment
from experiments.hu2024_fig3_selection import (
    DELTA,
    EXPERIMENT,
    PROFILES,
    plan_options,
    selection_of,
    train_config,
)


def test_registered_and_in_the_smoke_run():
    assert REGISTRY[EXPERIMENT][0] == "experiments.hu2024_fig3_selection"


def test_smoke_pays_the_tuning_and_resumes(smoke_run, smoke_out):
    """From the session's smoke run: every selection is accounted end to end at its target
    (selection
    and training charged), needs more training noise than the training-only run, picks a grid step
    size, and its model is measured as Fig 3 measures (excess risk ≥ 0 over the ball); a rerun
    recomputes nothing."""
    scfg = PROFILES["smoke"]
    cfg = scfg.fig3
    out = smoke_out / EXPERIMENT
    runs = pd.read_csv(out / "runs.csv")
    # K (the candidates a selection drew) is secret: never published.
    assert "num_candidates" not in runs.columns
    assert "paid_K" not in pd.read_csv(out / "summary.csv").columns
    paid = runs[runs.protocol == "selected_privately"]
    free = runs[runs.protocol == "tuned_nonprivately"]
    cases = len(cfg.cases) * len(cfg.epsilons)
    assert len(paid) == cases * cfg.seeds and len(free) == cases * cfg.seeds * len(
        cfg.learning_rates
    )
    for r in paid.itertuples():
        assert 0.95 * r.epsilon_target < r.epsilon_charged <= r.epsilon_target * (1 + 1e-6)
        assert r.charged == "selection+training"
        assert r.learning_rate in cfg.learning_rates
        assert r.epsilon_training < r.epsilon_charged
        z_free = free[free.epsilon_target == r.epsilon_target].noise_multiplier.iloc[0]
        assert r.noise_multiplier > z_free  # the tuning is paid with more training noise
    np.testing.assert_allclose(free.epsilon_charged, free.epsilon_target, rtol=1e-6)
    assert (free.charged == "training").all()
    assert (runs.excess_risk > -1e-5).all() and np.isfinite(runs.excess_risk).all()
    summary = pd.read_csv(out / "summary.csv")
    assert (
        len(summary) == cases and (summary.paid_epsilon_max <= summary.epsilon * (1 + 1e-6)).all()
    )
    assert (out / "fig3_selection.png").stat().st_size > 10_000
    comparisons = pd.read_csv(out / "comparisons.csv")
    rows = comparisons[comparisons.quantity.str.contains("selected privately")]
    assert len(rows) == cases and rows.note.str.contains("end-to-end eps").all()
    assert comparisons.quantity.str.contains(r"\(a\) non-private PCA with tuning paid").any()
    units = sorted((out / ".units" / "smoke").glob("*.json"))
    assert units
    stamps = {u: u.stat().st_mtime_ns for u in units}
    again = run_experiment(EXPERIMENT, "smoke", smoke_out, quiet=True)
    assert all(u.stat().st_mtime_ns == t for u, t in stamps.items())
    assert [c.measured for c in again] == list(comparisons.measured.astype(str))


def test_clip_norm_never_bites_on_fig3_data():
    """The clip norm C = 1 that select's multiplier needs leaves Fig 3's DP-GD unchanged: every
    per-example gradient of the logistic loss over the unit ball has norm ≤ ‖x‖ ≤ data_radius < 1.
    """
    cfg = PROFILES["smoke"].fig3
    n, d = cfg.cases[0]
    data = low_rank_logistic(
        n,
        d,
        cfg.k,
        radius=cfg.data_radius,
        tail_mass=cfg.tail_mass,
        label_scale=cfg.label_scale,
        seed=cfg.data_seed,
    )
    config = train_config(
        cfg, d, DPPlan.create("full", n, noise_multiplier=1.0, **plan_options(cfg))
    )
    x, y = jnp.asarray(data.x, jnp.float32), jnp.asarray(data.y)
    rng = np.random.default_rng(0)
    for _ in range(3):
        theta = rng.normal(size=d)
        theta = theta / np.linalg.norm(theta) * rng.uniform(0, cfg.radius)
        params = jax.tree_util.tree_map(
            lambda p: jnp.asarray(theta, jnp.float32).reshape(p.shape),
            config.model.init(jax.random.PRNGKey(0)),
        )
        grads = jax.vmap(
            jax.grad(lambda p, xi, yi: config.model.per_example_loss(p, xi[None], yi[None])[0]),
            in_axes=(None, 0, 0),
        )(params, x, y)
        norms = np.sqrt(
            sum(
                np.sum(np.asarray(g).reshape(n, -1) ** 2, axis=1)
                for g in jax.tree_util.tree_leaves(grads)
            )
        )
        assert norms.max() <= cfg.data_radius + 1e-5 < config.plan.l2_clip_norm


def test_quick_profile_accounting_is_feasible():
    """Every quick ε lies above the selection's floor (K noisy scores alone); the smallest
    calibrates, to more training noise than the training-only run at the same ε."""
    scfg = PROFILES["quick"]
    n, _ = scfg.fig3.cases[0]
    selection = selection_of(scfg)
    for e in scfg.fig3.epsilons[:1]:
        # The selection's plan (what the experiment runs): calibrated for the whole procedure.
        paid = selection.plan("full", n, target_epsilon=e, **plan_options(scfg.fig3))
        plan = paid.execution
        assert plan.n == n - scfg.validation_size
        assert selection.floor(plan, DELTA) < min(scfg.fig3.epsilons)
        z = selection.calibrate(plan, e, DELTA)
        # The plan runs z as float32 computes it: z itself, or the next float32 above it where
        # float32 would round z down past the target.
        assert paid.noise_multiplier in (z, float(np.nextafter(np.float32(z), np.float32(np.inf))))
        assert paid.noise_multiplier >= z and paid.epsilon <= e * (1 + 1e-9)
        assert selection.epsilon(plan, z, DELTA) <= e * (1 + 1e-9)
        training_only = DPPlan.create(
            "full", n, noise_multiplier=1.0, **plan_options(scfg.fig3)
        ).execution
        assert z > training_only.calibrate(e, DELTA)
