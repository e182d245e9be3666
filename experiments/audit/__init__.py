"""Empirical privacy audit of every dpprep learner (issue 13): ε lower bounds beside the theory.

Each unit is one :func:`dpprep.auditing.audit`: a learner calibrated to a target ε (δ = 1e-5),
trained ``pilot + runs`` times per world (canary in / out) as vmapped chunks of one compiled call,
scored by the threat model's attack; the Gaussian-DP and Clopper–Pearson lower bounds (95 %
confidence) are set beside the ε the learner's guarantee gives the canary pair. Targets (issue 13):
white-box DP-GD's GDP bound ≥ 0.8 of ε at ε ∈ {1, 2, 4}; white-box Poisson DP-SGD ≥ 0.6; no
bound above its theoretical ε; a deliberately broken learner (half the noise its accountant
assumes) is caught. Outputs ``audit.csv``, ``audit.png`` and REPORT rows. An audit is a lower
bound, never a certificate (see :mod:`dpprep.auditing`).

The bug catalogue (issues 19 and 32): each ``(learner, bug)`` of :data:`CATALOGUE` is audited with
the bug planted in dpprep's library code (:func:`experiments.bug_catalogue.inject`) at the learner's
audit settings; a bug is *caught* when any test of the verdict refutes the claim
(:attr:`AuditResult.caught_by`: a rigorous bound — Clopper–Pearson, GDP for full-batch learners,
the trade-off test against the yardstick's curve —, the noise test, or a deterministic check of the
plan against the independent yardstick). Outputs ``catalogue.md`` (bug × learner × rigorous bound ×
held-to ε × caught? × caught by × runs × seconds × why not) and one REPORT row per entry; a missed
row's note gives the measured reason (:data:`NOT_CATCHABLE`). Every honest audit (every learner and
path) is repeated at ``Profile.honest_seeds`` (quick: 2 seeds) for the false-alarm row: each verdict
runs its k tests at 5 %/k, so none of them should flag an honest learner.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from dpprep.auditing import AuditConfig  # noqa: E402
from experiments.bug_catalogue import BUGS, audit_with_bug  # noqa: E402
from experiments.results import Comparison, provenance_json, save_figure, write_csv  # noqa: E402
from experiments import RunContext  # noqa: E402

EPSILONS = (1.0, 2.0, 4.0)
PIPELINE_EPSILONS = (0.1, 0.25, 0.5)  # DP-GD's own ε parameter (Hu et al.'s σ = L√T/(εn))
DP_GD_TARGET, POISSON_TARGET = 0.8, 0.6
# Per-learner shape of the audited run (the rest are AuditConfig defaults: n = 100, dim = 4).
SHAPES = {
    "dp_gd": {"steps": 10},
    "dp_sgd_poisson": {"epochs": 5, "batch_size": 20},
    "dp_sgd_shuffle": {"epochs": 5, "batch_size": 20},
    "dp_sgd_iteration": {"n": 10},
    "dpsgdf": {"epochs": 5, "batch_size": 20},
    "corrdp_sgd": {"steps": 10},
    "impute_dp_gd": {"steps": 10},
    "dp_sgd_poisson_vmap_clip": {"epochs": 5, "batch_size": 20},
    "dp_sgd_poisson_sweep_point": {"epochs": 5, "batch_size": 20},
    "dpsgdf_grid": {"epochs": 5, "batch_size": 20},
    "corrdp_sgd_sensitive": {"steps": 10},
    # A host loop of select() calls: its own (small) size and run count at every profile.
    "private_selection": {
        "n": 40,
        "dim": 3,
        "steps": 4,
        "runs": 600,
        "pilot_runs": 150,
        "chunk": 150,
    },
}
#: Learners audited under the final-model threat model only.
FINAL_MODEL_ONLY = ("dp_sgd_iteration", "private_selection")
TITLES = {
    "dp_gd": "DP-GD",
    "dp_sgd_poisson": "DP-SGD (Poisson)",
    "dp_sgd_shuffle": "DP-SGD (shuffled)",
    "dp_sgd_iteration": "DP-SGD by iteration",
    "dpsgdf": "DPSGD-F",
    "corrdp_sgd": "CorrDP-SGD",
    "impute_dp_gd": "mean imputation → DP-GD",
    "dp_sgd_poisson_vmap_clip": "DP-SGD (Poisson), vmap clipping of two leaves",
    "dp_sgd_poisson_sweep_point": "DP-SGD (Poisson), one point of a vmapped sweep",
    "dpsgdf_grid": "DPSGD-F, grid path (grid_group + sweep_points)",
    "corrdp_sgd_sensitive": "CorrDP-SGD, sensitive-feature canary",
    "private_selection": "private selection (end to end)",
}


@dataclasses.dataclass(frozen=True)
class Profile:
    runs: int  # evaluation runs per world
    runs_eps1_dp_gd: int  # DP-GD at ε = 1 needs more for its 0.8 target
    runs_broken: int  # the broken learners (Clopper–Pearson must resolve Poisson's gap)
    pilot_runs: int
    epsilons: tuple[float, ...]
    pipeline_epsilons: tuple[float, ...]
    final_model: tuple[str, ...]  # learners also audited under the final-model threat model
    catalogue: tuple[tuple[str, str], ...] = ()  # (learner, bug) pairs of the bug catalogue
    runs_catalogue: int = (
        20_000  # the catalogue's runs per world: the learners' default audit settings
    )
    honest_seeds: tuple[int, ...] = (
        0,
    )  # every honest audit is repeated at these seeds (false-alarm count)


#: Every bug class of issue 19 on every learner whose code path it reaches (ε = 1; the pipeline at
#: its own ε of 0.25). ``one_unclipped`` leaves the last *real* row (per the mask) of each batch
# : unclipped: the canary whenever it is sampled (full batch, Poisson); see NOT_CATCHABLE for the
# rows : that no rigorous test can catch at these settings, and why.
CATALOGUE: tuple[tuple[str, str], ...] = (
    ("dp_gd", "noise_0.7x"),
    ("dp_gd", "clip_2c"),
    ("dp_gd", "one_unclipped"),
    ("dp_gd", "double_releases"),
    ("dp_sgd_poisson", "noise_0.7x"),
    ("dp_sgd_poisson", "clip_2c"),
    ("dp_sgd_poisson", "one_unclipped"),
    ("dp_sgd_poisson", "poisson_2q"),
    ("dp_sgd_poisson", "double_releases"),
    ("dp_sgd_shuffle", "noise_0.7x"),
    ("dp_sgd_shuffle", "clip_2c"),
    ("dp_sgd_iteration", "noise_0.7x"),
    ("dp_sgd_iteration", "clip_2c"),
    ("dpsgdf", "noise_0.7x"),
    ("dpsgdf", "clip_2c"),
    ("dpsgdf", "poisson_2q"),
    ("dpsgdf", "mean_noiseless"),
    ("corrdp_sgd", "noise_0.7x"),
    ("corrdp_sgd", "clip_2c"),
    ("corrdp_sgd", "corrdp_factors_halved"),
    ("impute_dp_gd", "noise_0.7x"),
    ("impute_dp_gd", "clip_2c"),
    # Issue 32: bugs in the plan's calibration and account, the noise's structure, batch-level
    # clipping rules, slots, multi-leaf norms, and the paths (vmap clipping, a sweep's point).
    ("dp_gd", "calibration_0.7x"),
    ("dp_sgd_poisson", "calibration_0.7x"),
    ("dp_sgd_shuffle", "calibration_0.7x"),
    ("dp_sgd_iteration", "calibration_0.7x"),
    ("dpsgdf", "calibration_0.7x"),
    ("dp_gd", "half_steps_charged"),
    ("dp_sgd_poisson", "half_steps_charged"),
    ("dp_sgd_shuffle", "half_steps_charged"),
    ("dpsgdf", "half_steps_charged"),
    ("dp_gd", "noise_key_frozen"),
    ("dp_sgd_poisson", "noise_key_frozen"),
    ("dp_sgd_shuffle", "noise_key_frozen"),
    ("dpsgdf", "noise_key_frozen"),
    ("dp_sgd_poisson_sweep_point", "noise_key_frozen"),
    ("dp_gd", "batch_max_scaling"),
    ("dp_sgd_poisson", "batch_max_scaling"),
    ("dp_sgd_shuffle", "batch_max_scaling"),
    ("dp_sgd_poisson_vmap_clip", "batch_max_scaling"),
    ("dp_sgd_poisson", "padding_slots_real"),
    ("dp_sgd_poisson_sweep_point", "padding_slots_real"),
    ("dpsgdf", "padding_slots_real"),
    ("dp_sgd_poisson", "first_record_always"),
    ("dp_sgd_poisson_vmap_clip", "per_leaf_norms"),
    ("dp_sgd_poisson_vmap_clip", "noise_0.7x"),
    ("dp_sgd_poisson_vmap_clip", "clip_2c"),
    ("dp_sgd_poisson_sweep_point", "noise_0.7x"),
    ("dp_sgd_poisson_sweep_point", "clip_2c"),
    ("dpsgdf_grid", "noise_0.7x"),
    ("dpsgdf_grid", "mean_noiseless"),
    ("dpsgdf_grid", "half_steps_charged"),
    ("dpsgdf_grid", "padding_slots_real"),
    ("dpsgdf", "mean_sigma_halved"),
    ("dpsgdf_grid", "mean_sigma_halved"),
    ("dpsgdf_grid", "noise_key_frozen"),
    ("dpsgdf", "first_record_always"),
    ("dpsgdf_grid", "first_record_always"),
    ("corrdp_sgd_sensitive", "noise_0.7x"),
    ("corrdp_sgd_sensitive", "corrdp_sensitive_factors_halved"),
    ("corrdp_sgd", "corrdp_sensitive_factors_halved"),
)

#: Why a catalogue row is not caught, computed (issue 19: "the row says how many runs it needs and
#: why"); shown as the REPORT row's note when the audit misses it.
NOT_CATCHABLE: dict[tuple[str, str], str] = {
    # The shuffled learner is held to its proven no-amplification bound (5 Gaussian releases: ε 2.25
    # at the yardstick's floor) and tested against that bound's whole PLD profile. The shuffle hides
    # which batch holds the canary, so even the broken runs stay inside that curve: their
    # (non-rigorous) GDP estimates at 20,000 runs were 1.86 (2C) and 1.54 (batch scaling) < 2.25,
    # δ excess −0.0027 (measured). A sound test cannot refute a bound the broken mechanism still
    # satisfies, at any number of runs; only the unproven as-if-Poisson number (1.0) is exceeded.
    # (0.7x noise is now caught by the noise test: its columns show the missing noise directly.)
    ("dp_sgd_shuffle", "clip_2c"): (
        "within the proven no-amplification bound the shuffled learner is held to "
        "(GDP estimate 1.86 < 2.25): not a violation of it at any number of runs"
    ),
    ("dp_sgd_shuffle", "batch_max_scaling"): (
        "within the proven no-amplification bound the shuffled learner is held "
        "to (GDP estimate 1.54 < 2.25): not a violation of it at any number of runs"
    ),
    # Final model, n = 10: the margin score's in/out samples (100,000 runs per world, measured) have
    # AUROC 0.570 (0.7× noise) / 0.601 (2C), a Gaussian fit μ = 0.25 / 0.36 (ε 0.93 / 1.39 at δ =
    # 1e-5).
    # The audit's 32 thresholds sit at pilot quantiles 1/33..32/33, where the attack's best point is
    # ε 0.20 / 0.28 (measured): no run count lifts Clopper–Pearson above 1 there (3,000,000 runs per
    # world gave 0.21 for 2C, 23 s). With thresholds in the tail, the Gaussian fit needs ~1.0e6 runs
    # per
    # world for 2C (Clopper–Pearson at 0.05 over 64 points, 0.9e6 do not suffice; ~8 s at the
    # measured ~260,000 runs/s) and no finite number for 0.7× noise (fit ε 0.93 < 1).
    ("dp_sgd_iteration", "noise_0.7x"): (
        "final-model margin attack too weak: best point ε 0.20 at the audit's "
        "thresholds, Gaussian-fit ε 0.93 < 1 even with unlimited runs"
    ),
    ("dp_sgd_iteration", "clip_2c"): (
        "final-model margin attack: best point ε 0.28 at the audit's thresholds (any run "
        "count); with tail thresholds ~1.0e6 runs per world under a Gaussian fit (ε 1.39)"
    ),
    # Hu et al.'s threat model bounds every record to the domain (features in [−1, 1], L = C = 1),
    # so
    # every per-example gradient of the pipeline has norm ≤ C: clipping at 2C returns the same
    # output
    # as at C on every in-domain dataset, so the true ε is unchanged. A canary above C is outside
    # the
    # domain where the overall ε (Cor. 4's imputation sensitivity) is proven, so exceeding it there
    # would refute nothing.
    ("impute_dp_gd", "clip_2c"): (
        "not a privacy bug on the pipeline's domain: every in-domain gradient is ≤ C, so "
        "clipping at 2C changes no output (a canary above C is outside Hu et al.'s threat model)"
    ),
}

PROFILES = {
    "smoke": Profile(
        1_000,
        1_000,
        1_000,
        200,
        (2.0,),
        (0.25,),
        ("dp_gd", "dp_sgd_iteration"),
        catalogue=(("dp_gd", "clip_2c"),),
        runs_catalogue=1_000,
    ),
    "quick": Profile(
        20_000,
        60_000,
        100_000,
        2_000,
        EPSILONS,
        PIPELINE_EPSILONS,
        ("dp_gd", "dp_sgd_poisson", "dp_sgd_shuffle", "dp_sgd_iteration"),
        catalogue=CATALOGUE,
        honest_seeds=(0, 1),
    ),
    "paper": Profile(
        100_000,
        300_000,
        300_000,
        10_000,
        EPSILONS,
        PIPELINE_EPSILONS,
        ("dp_gd", "dp_sgd_poisson", "dp_sgd_shuffle", "dp_sgd_iteration"),
        catalogue=CATALOGUE,
        runs_catalogue=100_000,
        honest_seeds=(0, 1),
    ),
}


def configs(profile: Profile) -> list[tuple[str, AuditConfig]]:
    """(role, config) of every audit: ``honest`` ones are held to their theoretical ε, ``broken``
    ones must be caught, and ``bug:<name>`` ones run the catalogue's bug ``<name>``."""
    out = []
    for learner, shape in SHAPES.items():
        threats = ["final_model"] if learner in FINAL_MODEL_ONLY else ["white_box"]
        if learner in profile.final_model and learner not in FINAL_MODEL_ONLY:
            threats.append("final_model")
        eps_list = profile.pipeline_epsilons if learner == "impute_dp_gd" else profile.epsilons
        for threat in threats:
            for eps in eps_list:
                runs = (
                    profile.runs_eps1_dp_gd
                    if (learner, threat, eps) == ("dp_gd", "white_box", 1.0)
                    else profile.runs
                )
                # Seeds beyond 0 repeat the honest audits for the false-alarm count only.
                for seed in profile.honest_seeds:
                    sizes = _sizes(shape, runs, profile.pilot_runs)
                    out.append(
                        ("honest", AuditConfig(learner, threat, epsilon=eps, seed=seed, **sizes))
                    )
    # Broken: the learner adds half the noise its accountant assumes. For Poisson only the
    # Clopper–Pearson bound is rigorous, and it needs ~1e5 runs per world to resolve the gap at ε =
    # 2.
    for learner, eps in (("dp_gd", 1.0), ("dp_sgd_poisson", 2.0)):
        out.append(
            (
                "broken",
                AuditConfig(
                    learner,
                    "white_box",
                    epsilon=eps,
                    runs=profile.runs_broken,
                    pilot_runs=profile.pilot_runs,
                    noise_factor=0.5,
                    **SHAPES[learner],
                ),
            )
        )
    for learner, bug in profile.catalogue:
        if bug not in BUGS:
            raise ValueError(f"catalogue bug {bug!r} is unknown; available: {', '.join(BUGS)}")
        threat = "final_model" if learner in FINAL_MODEL_ONLY else "white_box"
        eps = 0.25 if learner == "impute_dp_gd" else 1.0
        sizes = _sizes(SHAPES[learner], profile.runs_catalogue, profile.pilot_runs)
        out.append((f"bug:{bug}", AuditConfig(learner, threat, epsilon=eps, **sizes)))
    return out


def _sizes(shape: dict[str, Any], runs: int, pilot_runs: int) -> dict[str, Any]:
    """A learner's audit sizes: the profile's run counts unless its shape sets its own (the
    selection's host loop), which a small profile scales down (smoke: a tenth of its runs)."""
    sizes = {"runs": runs, "pilot_runs": pilot_runs, **shape}
    if "runs" in shape:
        sizes["runs"] = min(shape["runs"], runs // 10)
        # ≥ the 32 thresholds
        sizes["pilot_runs"] = max(32, min(shape["pilot_runs"], sizes["runs"] // 4))
        sizes["chunk"] = min(shape["chunk"], 2 * sizes["pilot_runs"])
    return sizes


def bug_of(role: str) -> str | None:
    """The catalogue bug of a unit's role (None for honest and broken units)."""
    return role.split(":", 1)[1] if role.startswith("bug:") else None


def unit_key(role: str, cfg: AuditConfig) -> str:
    fields = dataclasses.asdict(cfg)
    return f"{role}:" + json.dumps(fields, sort_keys=True)


def run_unit(ctx: RunContext, cfg: AuditConfig, bug: str | None = None) -> dict:
    result = audit_with_bug(bug, cfg, progress=ctx.progress)
    return {**result.row(), "bug": bug or ""}


def plot(frame: pd.DataFrame, path) -> None:
    # other seeds: false-alarm count only
    honest = frame[(frame["role"] == "honest") & (frame["seed"] == 0)]
    learners = list(dict.fromkeys(honest["learner"]))
    cols = 4
    rows = math.ceil((len(learners) + 1) / cols)  # + a panel for the one legend
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.6 * rows), squeeze=False)
    # One colour per threat model and one line style per bound, the same in every panel.
    threats = {"white_box": ("white-box", "C0", "o"), "final_model": ("final model", "C2", "s")}
    bounds = {"epsilon_lb_gdp": ("GDP bound", "-"), "epsilon_lb_cp": ("Clopper–Pearson", ":")}
    for ax, learner in zip(axes.flat, learners):
        part = honest[honest["learner"] == learner]
        top = float(max(part["theoretical_epsilon"].max(), part["epsilon_lb_gdp"].max())) * 1.1
        ax.plot([0, top], [0, top], color="grey", lw=1, ls="--", label="lower bound = theory")
        for threat, (name, colour, marker) in threats.items():
            sub = part[part["threat_model"] == threat]
            if sub.empty:
                continue
            for column, (bound, ls) in bounds.items():
                ax.plot(
                    sub["theoretical_epsilon"],
                    sub[column],
                    marker=marker,
                    ls=ls,
                    color=colour,
                    mfc=colour if ls == "-" else "white",
                    label=f"{name}: {bound}",
                )
        claimed = part[np.abs(part["claimed_epsilon"] - part["theoretical_epsilon"]) > 1e-9]
        if not claimed.empty:
            ax.scatter(
                claimed["theoretical_epsilon"],
                claimed["claimed_epsilon"],
                marker="x",
                color="black",
                label="claimed ε (as reported)",
                zorder=3,
            )
        ax.set_title(TITLES[learner], fontsize=11)
        ax.set_xlabel("theoretical ε")
        ax.set_ylabel("empirical ε lower bound")
    # The legend gets a panel of its own (legible, and over no data): every entry any panel drew.
    entries: dict[str, Any] = {}
    for ax in list(axes.flat)[: len(learners)]:
        for handle, text in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(text, handle)
    for ax in list(axes.flat)[len(learners) :]:
        ax.axis("off")
    legend_ax = list(axes.flat)[len(learners)]
    legend_ax.legend(
        list(entries.values()), list(entries.keys()), loc="center", fontsize=10, frameon=False
    )
    fig.suptitle(
        "Privacy audit: empirical ε lower bounds (95 % confidence, δ = 1e-5) vs theoretical ε"
    )
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def comparisons(frame: pd.DataFrame) -> list[Comparison]:
    out: list[Comparison] = []
    every_honest = frame[frame["role"] == "honest"]
    # The per-learner rows use seed 0; the other seeds only enter the false-alarm count below.
    honest = every_honest[every_honest["seed"] == 0]
    for learner, threat, target in (
        ("dp_gd", "white_box", DP_GD_TARGET),
        ("dp_sgd_poisson", "white_box", POISSON_TARGET),
    ):
        part = honest[(honest["learner"] == learner) & (honest["threat_model"] == threat)]
        for _, r in part.iterrows():
            out.append(
                Comparison.claim(
                    f"audit {TITLES[learner]} white-box, ε = {r['epsilon_target']:g}: GDP lower"
                    " bound / theoretical ε",
                    f"≥ {target}",
                    f"{r['ratio_gdp']:.3f} ({r['epsilon_lb_gdp']:.3f} /"
                    f" {r['theoretical_epsilon']:.3f}; {r['runs_per_world']} runs per world)",
                    bool(r["ratio_gdp"] >= target),
                    note=f"Clopper–Pearson {r['epsilon_lb_cp']:.3f}",
                )
            )
    worst = (
        honest.assign(
            excess=np.maximum(honest["epsilon_lb_gdp"], honest["epsilon_lb_cp"])
            / honest["theoretical_epsilon"]
        )
        .sort_values("excess")
        .iloc[-1]
    )
    above = honest[
        (honest["epsilon_lb_gdp"] > honest["theoretical_epsilon"])
        | (honest["epsilon_lb_cp"] > honest["theoretical_epsilon"])
        | (honest["tradeoff_delta_excess"] > 0)
    ]  # NaN (no curve) compares False
    out.append(
        Comparison.claim(
            "audit: no lower bound exceeds its learner's theoretical ε",
            "none",
            f"{len(above)} of {len(honest)} audits above (or refuted by the trade-off test);"
            f" largest bound/theory {worst['excess']:.3f} ({worst['learner']},"
            f" {worst['threat_model']}, ε = {worst['epsilon_target']:g})",
            above.empty,
        )
    )
    flagged = every_honest[every_honest["violation"].astype(bool)]
    out.append(
        Comparison.claim(
            "audit: ≥ 50 honest audits across learners, paths and ε, none flagged by any test"
            " (rigorous bounds, noise test, checks; verdict at 5 %, Bonferroni over its tests)",
            "≥ 50 audits, 0 flagged",
            f"{len(flagged)} of {len(every_honest)} honest audits flagged"
            f" ({every_honest['learner'].nunique()} learners, seeds"
            f" {sorted(set(int(s) for s in every_honest['seed']))})",
            len(every_honest) >= 50 and flagged.empty,
            note="; ".join(
                f"{r['learner']} ε {r['epsilon_target']:g} seed {int(r['seed'])}"
                for _, r in flagged.iterrows()
            )
            or "each flag would have probability ≤ 5 % on an honest learner",
        )
    )
    for _, r in frame[frame["role"] == "broken"].iterrows():
        # DP-GD's trade-off is exactly Gaussian, so its GDP bound is rigorous; elsewhere only C-P
        # is.
        exact = r["learner"] == "dp_gd"
        bound = r["epsilon_lb_gdp"] if exact else r["epsilon_lb_cp"]
        out.append(
            Comparison.claim(
                f"audit catches a broken {TITLES[r['learner']]} (half the noise its accountant"
                " assumes)",
                "lower bound > claimed ε",
                f"{'GDP' if exact else 'Clopper–Pearson'} bound {bound:.3f} vs claimed"
                f" {r['claimed_epsilon']:.3f} (GDP {r['epsilon_lb_gdp']:.3f}, C-P"
                f" {r['epsilon_lb_cp']:.3f})",
                bool(bound > r["claimed_epsilon"]),
            )
        )
    corr = honest[honest["learner"] == "corrdp_sgd"]
    if not corr.empty:
        beyond = corr[corr["epsilon_lb_gdp"] > corr["claimed_epsilon"]]
        out.append(
            Comparison.info(
                "audit CorrDP-SGD: a canary changing only an insensitive feature, vs nominal ε",
                "; ".join(
                    f"nominal {r['claimed_epsilon']:g}: bound {r['epsilon_lb_gdp']:.3f},"
                    f" standard-DP ε {r['theoretical_epsilon']:.3f}"
                    for _, r in corr.iterrows()
                ),
                note=(
                    f"bound above the nominal ε in {len(beyond)} of {len(corr)}: the nominal ε is a"
                    " CorrDP guarantee (the insensitive feature is charged through its correlation"
                    " weight), not a standard-DP promise for this neighbour pair; the standard-DP"
                    " ε of the run holds"
                ),
            )
        )
    pipe = honest[honest["learner"] == "impute_dp_gd"]
    if not pipe.empty:
        exceeded = bool((pipe["epsilon_lb_gdp"] > pipe["claimed_epsilon"]).any())
        out.append(
            Comparison.claim(
                "audit mean imputation → DP-GD: the bound exceeds DP-GD's own ε (pre-processing"
                " costs privacy) and stays below Hu et al.'s overall ε",
                "naive ε < bound ≤ overall ε",
                "; ".join(
                    f"ε_mech {r['epsilon_target']:g}: naive {r['claimed_epsilon']:.3f} < bound "
                    f"{r['epsilon_lb_gdp']:.3f} ≤ overall {r['theoretical_epsilon']:.3f}"
                    for _, r in pipe.iterrows()
                ),
                exceeded and bool((pipe["epsilon_lb_gdp"] <= pipe["theoretical_epsilon"]).all()),
            )
        )
    shuffle = honest[
        (honest["learner"] == "dp_sgd_shuffle") & (honest["threat_model"] == "white_box")
    ]
    if not shuffle.empty:
        out.append(
            Comparison.info(
                "audit shuffled DP-SGD, white-box: bound vs the customary as-if-Poisson ε",
                "; ".join(
                    f"claimed {r['claimed_epsilon']:g}: bound {r['epsilon_lb_gdp']:.3f} (rigorous ε"
                    f" {r['theoretical_epsilon']:.3f})"
                    for _, r in shuffle.iterrows()
                ),
                note=(
                    "not exceeded at these settings (n = 100, B = 20, 5 epochs): no evidence"
                    " against the as-if-Poisson number here, and no proof of it either (Chua et al."
                    " 2024 exhibit settings where it fails); the audit holds the rigorous"
                    " no-amplification bound"
                ),
            )
        )
    for _, r in frame[frame["role"].str.startswith("bug:")].iterrows():
        # Caught: a bound rigorous for this learner above the ε its accounting states (the audit's
        # own reference, which no catalogue bug touches). Timings vary: catalogue.md has them.
        caught_by = r.get("caught_by", "")
        caught_by = caught_by if isinstance(caught_by, str) and caught_by else "nothing"
        out.append(
            Comparison.claim(
                f"audit catalogue: {r['bug']} in {TITLES[r['learner']]} ({r['threat_model']})"
                " caught",
                "a rigorous test refutes the claim",
                f"{_rigorous_name(r)}: ε bound {r['epsilon_lb_rigorous']:.3f} vs"
                f" {r['theoretical_epsilon']:.3f}, trade-off δ excess"
                f" {r['tradeoff_delta_excess']:.4f}; caught by {caught_by}"
                f" ({int(r['runs_per_world'])} runs per world)",
                bool(r["violation"]),
                note=(
                    f"{BUGS[r['bug']].description}; GDP {r['epsilon_lb_gdp']:.3f}, C-P"
                    f" {r['epsilon_lb_cp']:.3f}"
                )
                + (
                    ""
                    if r["violation"]
                    else f"; why not: {NOT_CATCHABLE.get((r['learner'], r['bug']), 'not analysed')}"
                ),
            )
        )
    # Timings vary run to run, so they stay in audit.csv (runs_per_second, seconds), not in REPORT
    # rows.
    out.append(
        Comparison.info(
            "audit runs",
            f"{len(frame)} audits, {int(2 * frame['runs_per_world'].sum())} evaluation runs in all "
            "(+ pilot runs that fix the thresholds)",
            note=(
                "each audit's runs are vmapped chunks of one compiled call; runs/s per audit in"
                " audit.csv"
            ),
        )
    )
    for (learner, threat), part in honest.groupby(["learner", "threat_model"], sort=False):
        cp_ratios = part["epsilon_lb_cp"] / part["theoretical_epsilon"]
        out.append(
            Comparison.info(
                f"audit {TITLES[learner]}, {threat}: GDP bound / theoretical ε",
                ", ".join(
                    f"ε {r['epsilon_target']:g}: {r['ratio_gdp']:.2f}" for _, r in part.iterrows()
                ),
                note=(f"Clopper–Pearson/theory {', '.join(f'{v:.2f}' for v in cp_ratios)}"),
            )
        )
    return out


def run(ctx: RunContext) -> list[Comparison]:
    profile = PROFILES[ctx.profile]
    plan = configs(profile)
    keys = [unit_key(role, cfg) for role, cfg in plan]
    values = ctx.store.run_many(
        [
            (key, (lambda cfg=cfg, role=role: run_unit(ctx, cfg, bug_of(role))))
            for key, (role, cfg) in zip(keys, plan)
        ]
    )
    rows = []
    for key, (role, cfg), value in zip(keys, plan, values):
        rows.append(
            {
                "role": role,
                **value,
                "config": json.dumps(dataclasses.asdict(cfg), sort_keys=True),
                "versions": provenance_json(ctx.store.provenance(key)),
            }
        )
    frame = pd.DataFrame(rows)
    write_csv(frame, ctx.out_dir / "audit.csv")
    plot(frame, ctx.out_dir / "audit.png")
    catalogue = frame[frame["role"].str.startswith("bug:")]
    (ctx.out_dir / "catalogue.md").write_text(catalogue_table(catalogue), encoding="utf-8")
    return comparisons(frame)


def _rigorous_name(r: Any) -> str:
    names = {"gdp": "GDP", "clopper_pearson": "Clopper–Pearson", "tradeoff": "trade-off"}
    return " + ".join(names[b] for b in str(r["rigorous_bounds"]).split("+"))


def catalogue_table(catalogue: pd.DataFrame) -> str:
    """The bug catalogue as a markdown table (one row per (bug, learner) unit): which tests caught
    it (rigorous bounds, the noise test's parts, the deterministic checks) or why none could."""
    lines = [
        (
            "| bug | learner | rigorous bound(s) | rigorous ε lower bound | trade-off δ excess |"
            " held to ε | caught? | caught by | runs per world | seconds | why not caught |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for _, r in catalogue.iterrows():
        caught_by = r.get("caught_by", "")
        caught_by = "" if not isinstance(caught_by, str) else caught_by.replace("+", ", ")
        why_not = (
            "" if r["violation"] else NOT_CATCHABLE.get((r["learner"], r["bug"]), "not analysed")
        )
        lines.append(
            f"| {r['bug']} | {TITLES[r['learner']]} ({r['threat_model']}) | {_rigorous_name(r)} | "
            f"{r['epsilon_lb_rigorous']:.3f} | {r['tradeoff_delta_excess']:.4f} |"
            f" {r['theoretical_epsilon']:.3f} | "
            f"{'yes' if r['violation'] else 'no'} | {caught_by} | {int(r['runs_per_world'])} |"
            f" {r['seconds']:.1f} | "
            f"{why_not} |"
        )
    return "\n".join(lines) + "\n"
