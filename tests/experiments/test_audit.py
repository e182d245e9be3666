"""Smoke run of the audit experiment: every learner is audited, nothing exceeds its theory."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from experiments import run_experiment
from experiments.audit import PROFILES, SHAPES, configs
from experiments.audit.paths import DRIVER_PATHS, learner_of, path_of


def test_audit_smoke(smoke_out):
    comparisons = run_experiment("audit", "smoke", smoke_out, quiet=True)
    by_name = {c.quantity: c for c in comparisons}
    assert by_name["audit: no lower bound exceeds its learner's theoretical ε"].status == "pass"
    out = smoke_out / "audit"
    frame = pd.read_csv(out / "audit.csv")
    assert set(frame["path"]) == set(SHAPES)  # every learner and path dpprep ships
    assert set(frame["learner"]) == {learner_of(path) for path in SHAPES}
    assert {"white_box", "final_model"} <= set(frame["threat_model"])
    honest = frame[frame["role"] == "honest"]
    assert (honest["epsilon_lb_gdp"] <= honest["theoretical_epsilon"]).all()
    assert (honest["epsilon_lb_cp"] <= honest["theoretical_epsilon"]).all()
    assert not (honest["tradeoff_delta_excess"] > 0).any() and not honest["violation"].any()
    assert "| **all** | | **26** |" in (out / "alarms.md").read_text()
    assert "## Per path" in (out / "catalogue.md").read_text()
    assert (frame["runs_per_second"] > 0).all()
    assert {"config", "versions", "seed"} <= set(frame.columns)
    assert json.loads(frame["config"].iloc[0])["learner"] == frame["learner"].iloc[0]
    assert (out / "audit.png").stat().st_size > 10_000
    # The bug catalogue: a clip-to-2C DP-GD is caught by its rigorous (GDP) bound even at smoke
    # size, and the table has the issue's columns.
    bugs = frame[frame["role"].str.startswith("bug:")]
    assert list(bugs["bug"]) == ["clip_2c"] and bugs["violation"].all()
    assert by_name["audit catalogue: clip_2c in DP-GD (white_box) caught"].status == "pass"
    table = (out / "catalogue.md").read_text()
    assert "| bug | learner | rigorous bound(s) |" in table
    assert "| clip_2c | DP-GD (white_box) | Clopper–Pearson + GDP + trade-off |" in table
    # A resumed run reads the finished units back: same table.
    run_experiment("audit", "smoke", smoke_out, quiet=True)
    pd.testing.assert_frame_equal(frame, pd.read_csv(out / "audit.csv"))


def test_quick_profile_covers_the_issue_targets():
    plan = configs(PROFILES["quick"])
    honest = {(c.learner, c.threat_model, c.epsilon) for role, c in plan if role == "honest"}
    for eps in (1.0, 2.0, 4.0):
        assert ("dp_gd", "white_box", eps) in honest and (
            "dp_sgd_poisson",
            "white_box",
            eps,
        ) in honest
    assert all(c.delta == 1e-5 for _, c in plan)
    assert any(role == "broken" for role, _ in plan)
    # Every bug class of the catalogue is audited on some learner, at the learners' default runs.
    from experiments.audit.bugs import BUGS

    assert {role.split(":", 1)[1] for role, _ in plan if role.startswith("bug:")} == set(BUGS)
    # at the learners' default runs (host loops: their paths' own)
    assert all(
        c.runs == SHAPES[path_of(c)].get("runs", 20_000)
        for role, c in plan
        if role.startswith("bug:")
    )


def test_quick_profile_has_two_hundred_honest_audits_for_the_false_alarm_rate():
    # >= 200 honest audits across learners, paths, ε and seeds (alarms.md and the REPORT row).
    plan = configs(PROFILES["quick"])
    honest = [c for role, c in plan if role == "honest"]
    assert len(honest) >= 200 and {path_of(c) for c in honest} == set(SHAPES)
    assert len({(c.learner, c.epsilon) for c in honest}) >= 15
    assert {c.seed for c in honest} == {0, 1, 2, 3, 4}
    # every audit its own key: configs differ, so do their keys
    from dpprep.auditing import audit_key
    import jax

    keys = {tuple(np.asarray(jax.random.key_data(audit_key(c))).ravel()) for c in honest}
    assert len(keys) == len(honest)


def test_every_driver_path_is_audited_with_its_options():
    plan = configs(PROFILES["quick"])
    paths = {path_of(c) for _, c in plan}
    assert set(DRIVER_PATHS) <= paths
    options = {path_of(c): c for _, c in plan}
    assert options["train_options"].leaves == 3 and options["train_options"].steps_per_call == 7
    assert options["train_options"].learning_rate == 4.0
    assert {options[p].sampling for p in DRIVER_PATHS} == {"full", "poisson", "shuffle"}
    # a replace-one plan; the last iterate alone, with SGD and with Adam
    assert options["dp_step_replace_one"].neighboring_relation == "replace_one"
    for path, optimizer in (("dp_step_full_final", "sgd"), ("dp_step_adam_final", "adam")):
        cfg = options[path]
        assert (cfg.threat_model, cfg.optimizer) == ("final_model", optimizer)
    # a stochastic model (dropout) through train's engine and dp_step's keyed loss
    assert options["train_dropout"].dropout == options["dp_step_dropout"].dropout == 0.1
    # path_of tells every driver path apart (each audit lands in its own row of the report)
    assert len({path_of(c) for _, c in plan if c.learner in ("dp_step",)}) == 6
