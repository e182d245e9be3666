"""wang2026_selection (issue 22 item 3): Figure 1 (b) Adult and (d) Credit with C selected
privately."""

from __future__ import annotations

import dataclasses
import math

import jax
import numpy as np
import pandas as pd
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import RdpAccountant

from dpprep import sweeps
from dpprep.corrdp import noise, sgd
from dpprep.selection import PrivateSelection, Repetitions, candidate_key, split
from experiments import REGISTRY, RunContext, run_experiment
from experiments import wang2026_selection as ws


@pytest.fixture(scope="module")
def smoke_setups(data_dir):
    profile = ws.PROFILES["smoke"]
    return {key: ws.make_setup(key, profile, data_dir) for key in ws.PANEL_KEYS}


def test_registered():
    assert REGISTRY[ws.EXPERIMENT][0] == "experiments.wang2026_selection"


@pytest.mark.slow  # an experiment end to end
def test_smoke_run_end_to_end(tmp_path, data_dir):
    """The smoke profile from scratch: every selection charges selection + training (not the
    pre-processing) at the ε recomputed from its panel, above its own training run's ε; every chosen
    C is a grid point; the paper-style rows charge training only; a rerun recomputes nothing."""
    profile = ws.PROFILES["smoke"]
    comparisons = run_experiment(ws.EXPERIMENT, "smoke", tmp_path, data_dir=data_dir, quiet=True)
    out = tmp_path / ws.EXPERIMENT
    runs = pd.read_csv(out / "runs.csv")
    paid = runs[runs.protocol == "selected_privately"]
    free = runs[runs.protocol == "training_only"]
    per_panel = len(ws.METHODS) * len(profile.epsilons) * profile.seeds
    assert len(paid) == len(ws.PANEL_KEYS) * per_panel
    grids = {k: len(profile.c_values[k]) for k in ws.PANEL_KEYS}
    assert len(free) == sum(per_panel * g for g in grids.values())
    assert (paid.charged == "selection+training").all() and (free.charged == "training").all()
    assert paid.epsilon_pre_processing.isna().all() and free.epsilon_pre_processing.isna().all()
    assert (paid.epsilon_training < paid.epsilon_charged).all()
    # K (the candidates a selection drew) is secret: never published.
    assert "num_candidates" not in runs.columns
    setups = {k: ws.make_setup(k, profile, data_dir) for k in ws.PANEL_KEYS}
    for r in paid.itertuples():
        setup = setups[r.panel]
        assert any(math.isclose(r.C, c, rel_tol=1e-9) for c in setup.grid)
        assert r.epsilon_charged == pytest.approx(
            ws.paid_account(setup, profile, r.method, r.nominal_epsilon).epsilon, rel=1e-9
        )
        same = free[
            (free.panel == r.panel)
            & (free.method == r.method)
            & (free.nominal_epsilon == r.nominal_epsilon)
        ]
        assert r.epsilon_charged > same.epsilon_charged.max()  # paying for the tuning costs ε
    np.testing.assert_allclose(
        runs.accuracy_gap_pp, runs.nonprivate_accuracy - runs.accuracy, atol=1e-9
    )
    np.testing.assert_allclose(runs[runs.panel == "d"]["clip_norm"], math.sqrt(34))
    assert runs[runs.panel == "b"]["clip_norm"].isna().all()
    summary = pd.read_csv(out / "summary.csv")
    assert len(summary) == len(ws.PANEL_KEYS) * len(ws.METHODS) * len(profile.epsilons)
    assert (out / "selection_vs_epsilon.png").stat().st_size > 10_000
    frame = pd.read_csv(out / "comparisons.csv")
    assert (frame.status == "info").all()
    rows = frame[frame.quantity.str.contains("C selected privately, paid")]
    assert (
        len(rows) == len(summary)
        and rows.measured.str.contains("eps charged \\(selection \\+ training\\)").all()
    )
    assert frame.quantity.str.contains("standard-DP guarantee").sum() == 2
    assert frame.measured.str.contains("CLIPPED").sum() == 1  # Credit, and only Credit
    units = sorted((out / ".units" / "smoke").glob("*.json"))
    assert len(units) == len(ws.PANEL_KEYS) * (1 + profile.seeds)
    stamps = {u: u.stat().st_mtime_ns for u in units}
    again = run_experiment(ws.EXPERIMENT, "smoke", tmp_path, data_dir=data_dir, quiet=True)
    assert all(u.stat().st_mtime_ns == t for u, t in stamps.items())
    assert [c.measured for c in again] == [c.measured for c in comparisons]


@pytest.mark.parametrize("key", ws.PANEL_KEYS)
@pytest.mark.parametrize("method", ws.METHODS)
def test_end_to_end_epsilon_is_dp_accountings(smoke_setups, key, method):
    """The paid ε, rebuilt from dp-accounting and closed forms: each candidate draws C uniformly and
    releases it, so its T full-batch Gaussian steps (sensitivity 2·L_f of the whitened sum: z/2 in
    dp-accounting's add/remove reading) are the mixture over the grid, log-mean-exp of the points'
    RDP T·α/(2(z_C/2)²); repeated and selected (Papernot & Steinke, dp-accounting's function); the
    replaced record sits in the training or the validation part, so the larger of that and the
    noisy counts' selection. Below the least noisy C's charge, above each candidate alone and the
    training-only ε of every grid point; the training-only ε of Standard is fig1's diagnostic."""
    from dp_accounting.rdp import rdp_privacy_accountant
    from scipy.special import logsumexp

    profile = ws.PROFILES["quick"]
    setup = dataclasses.replace(smoke_setups[key], steps=200)
    n = setup.x.shape[0]
    v, s = profile.validation_size[key], profile.score_noise[key]
    orders = np.asarray(rdp_privacy_accountant.DEFAULT_RDP_ORDERS, float)

    def selected(candidate):
        accountant = RdpAccountant()
        return accountant.compose(
            dp_event.RepeatAndSelectDpEvent(candidate, profile.mean_candidates, 1.0)
        ).get_epsilon(setup.delta)

    for eps in (0.2, 1.0):
        got = ws.paid_account(setup, profile, method, eps)
        halved = [ws.sigma(setup, eps, c) * (n - v) / (2 * setup.bound[method]) for c in setup.grid]
        curves = np.stack([setup.steps * orders / (2 * z**2) for z in halved])
        mixture = (logsumexp((orders - 1) * curves, axis=0) - math.log(len(halved))) / (orders - 1)
        runs = rdp_privacy_accountant._compute_rdp_repeat_and_select(
            orders, mixture, profile.mean_candidates, 1.0
        )
        training = rdp_privacy_accountant.compute_epsilon(orders, runs, setup.delta)[0]
        counts = selected(dp_event.GaussianDpEvent(s))
        assert got.epsilon == pytest.approx(max(training, counts), rel=1e-9)
        least = min(halved)
        step = dp_event.GaussianDpEvent(least)
        at_least_noisy = selected(
            dp_event.ComposedDpEvent(
                [dp_event.SelfComposedDpEvent(step, setup.steps), dp_event.GaussianDpEvent(s)]
            )
        )
        assert got.epsilon < at_least_noisy
        assert got.epsilon > selected(
            dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(max(halved)), setup.steps)
        )
        assert got.accountant == "rdp" and got.charged == ("selection", "training")
        assert got.part("training").epsilon < got.epsilon
        for c in setup.grid:
            free = ws.training_account(setup, method, eps, c)
            assert free.epsilon < got.epsilon and free.charged == ("training",)
            assert not free.part("selection").charged
            if method == "standard":
                assert free.epsilon == pytest.approx(
                    sgd.standard_dp_epsilon(
                        ws.sigma(setup, eps, c),
                        n=n,
                        steps=setup.steps,
                        lipschitz=setup.bound["standard"],
                        delta=setup.delta,
                    ),
                    rel=1e-9,
                )


def test_sensitivity_bounds(smoke_setups):
    """Adult: the domain bound √10 for Standard, √(Σ_blocks 1/f) for CorrDP (race 0.23, gender 0.9,
    workclass 1, fnlwgt 0.22); Credit: clipped at √34, CorrDP's bound through SEX's 0.103; a
    refusal where nothing bounds the gradient."""
    adult, credit = smoke_setups["b"], smoke_setups["d"]
    assert adult.l2_clip_norm is None and adult.bound["standard"] == pytest.approx(math.sqrt(10))
    assert adult.bound["corrdp"] == pytest.approx(
        math.sqrt(5 + 1 + 1 + 1 / 0.23 + 1 / 0.9 + 1 / 0.22)
    )  # 5 S blocks, workclass, intercept
    assert (
        credit.l2_clip_norm == pytest.approx(math.sqrt(34))
        and credit.cfg.clip_mode == "per_example"
    )
    assert credit.bound["standard"] == pytest.approx(math.sqrt(34))
    assert credit.bound["corrdp"] == pytest.approx(math.sqrt(34) / math.sqrt(0.103))
    data = ws.panel_data(credit.panel)
    with pytest.raises(ValueError, match="no a-priori gradient bound"):
        noise.whitened_gradient_bound(data, np.ones(data.m))
    with pytest.raises(ValueError, match="without noise"):
        noise.whitened_gradient_bound(ws.panel_data(adult.panel), np.zeros(32))


@pytest.mark.slow  # over 8 s on the reference machine (2 cores, 2 test workers)
def test_one_candidate_is_a_plain_run(smoke_setups):
    """K fixed at 1 (mean 1): each selection's output is its single candidate, which is exactly the
    plain CorrDP-SGD run (sgd.sweep_points) at the drawn C with the candidate's key on the training
    split; and the padded, vmapped candidates of a bigger draw equal their runs one by one."""
    setup = dataclasses.replace(smoke_setups["b"], steps=30)
    setup = dataclasses.replace(setup, cfg=dataclasses.replace(setup.cfg, steps=30))
    key = jax.random.key(7)
    train, validation = split((setup.x, setup.y), 2000, key)
    train = (np.asarray(train[0]), np.asarray(train[1]))
    validation = (np.asarray(validation[0]), np.asarray(validation[1]))
    requests = [
        ws.Request(m, e, ws.selection_key(key, m, e)) for m in ws.METHODS for e in (0.3, 2.0)
    ]
    one = PrivateSelection(Repetitions(1.0), 5.0, 2000)
    out = ws.select_many(setup, train, validation, requests, one)
    for r, res in zip(requests, out):
        assert res["num_candidates"] == 1 and res["best"] == 0
        point = sgd.Point(r.method, r.epsilon, res["C"], setup.factors[r.method])
        plain = sgd.sweep_points(
            setup.cfg, setup.params0, train, jax.numpy.stack([candidate_key(r.key, 0)]), [point]
        )
        np.testing.assert_allclose(
            res["w"], np.asarray(plain.params["w"])[0, 0, :, 0], rtol=1e-6, atol=1e-7
        )
    # Bigger draws packed two candidates per call (the last call padded): each chosen model is its
    # own run.
    many = PrivateSelection(Repetitions(3.0), 5.0, 2000)
    packed = ws.select_many(setup, train, validation, requests[:3], many, chunk=2)
    assert sum(res["num_candidates"] for res in packed) > 3
    for r, res in zip(requests[:3], packed):
        point = sgd.Point(r.method, r.epsilon, res["C"], setup.factors[r.method])
        alone = sgd.sweep_points(
            setup.cfg,
            setup.params0,
            train,
            jax.numpy.stack([candidate_key(r.key, res["best"])]),
            [point],
        )
        np.testing.assert_allclose(
            res["w"], np.asarray(alone.params["w"])[0, 0, :, 0], rtol=1e-6, atol=1e-7
        )
        assert setup.grid[res["grid_indices"][res["best"]]] == res["C"]


def _refuse_training(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("trained before the input was checked")

    monkeypatch.setattr(sweeps, "sweep_points", boom)


@pytest.mark.parametrize(
    "change, name",
    [
        ({"c_values": {"b": (), "d": (1e-3,)}}, "c_values"),
        ({"validation_size": {"b": 45_175, "d": 1000}}, "validation_size"),
        ({"validation_size": {"b": 2000, "d": 0}}, "validation_size"),
        ({"mean_candidates": 0.5}, "mean"),
        ({"epsilons": ()}, "epsilons"),
    ],
)
def test_bad_input_refused_before_training(monkeypatch, tmp_path, data_dir, change, name):
    _refuse_training(monkeypatch)
    monkeypatch.setitem(ws.PROFILES, "smoke", dataclasses.replace(ws.PROFILES["smoke"], **change))
    ctx = RunContext("smoke", tmp_path, store=None, progress=None, data_dir=data_dir)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=name):
        ws.run(ctx)
