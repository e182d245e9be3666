"""Wang, Zhang & Cummings (2026) Table 2 and the App. E factors beside our TV estimators (spec §6
items 9–13).

The paper's factors are what the CorrDP runs use (hard-coded, spec §5); this table reports what
the estimators of ``dpprep.corrdp.tv`` give on the same data:

* 9 Adult (Table 2: race .23, gender .90, workclass 1, fnlwgt .22): the §5.3 mixed procedure per
  insensitive feature, ``min{discrete part + continuous part, 1}``; the histogram of the
  continuous part at several bin counts. Info only (the paper's procedure is underspecified).
* 10 Credit (SEX .103, EDUCATION .8113, MARRIAGE .8295, AGE 1): per insensitive feature, the max
  over the 19 sensitive features of the 1-D conditional-histogram TV (conditioning on each raw
  value), at several bin counts. Info only.
* 11 Sepsis (TV_max .3): the §5.4 joint-cell histogram of age given (sex, episode) on the original
  data, on the rebalanced data (the spec's check: in [0.2, 0.4]) and on the 10,000-row sample.
* 12 Medical (TV_max .36, method not described): the §5.3 mixed procedure reused with S^c = bmi,
  children and S^d = smoker (App. E.5 split; the §5.2 split as a variant). Info only.
* 13 Synthetic: the App. E.1 population TV(i) at m_s ∈ {5, 10, 20, 50, 80} against our
  derivation (±0.001), and the per-feature empirical plug-in (mean / min / max, A21).

Smoke: Adult on a 5,000-row subsample, one bin count per histogram, one synthetic data seed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpprep.corrdp import tv
from dpprep.corrdp.data import (
    ADULT_FACTORS,
    CREDIT_FACTORS,
    MEDICAL_TV_MAX,
    SEPSIS_FACTORS,
    load_corrdp,
    sepsis_rebalanced,
    synthetic_truth,
)
from dpprep.data import load
from experiments.results import Comparison, config_json, provenance_json, write_csv
from experiments import RunContext

DELTA = 1e-4
M_S = (5, 10, 20, 50, 80)
#: Our derivation (spec §5.2 table / item 13): population TV(i) for every i ∈ U.
POPULATION_TV = {5: 0.340, 10: 0.364, 20: 0.382, 50: 0.399, 80: 0.407}
#: The spec's [checked] plug-in reference: mean (min–max over features and 5 data sets), n = 2000.
PLUGIN_REFERENCE = {
    5: "0.38 (0.20–0.62)",
    10: "0.44 (0.26–0.66)",
    20: "0.53 (0.35–0.69)",
    50: "0.67 (0.51–0.80)",
    80: "0.77 (0.68–0.86)",
}
SEPSIS_RANGE = (0.2, 0.4)

GRIDS = {
    "smoke": {
        "adult_rows": 5000,
        "adult_bins": (10,),
        "credit_bins": (20,),
        "sepsis_bins": (None, 20),
        "data_seeds": (0,),
    },
    "quick": {
        "adult_rows": None,
        "adult_bins": (5, 10, 20),
        "credit_bins": (10, 20, 30),
        "sepsis_bins": (None, 5, 10, 20, 50),
        "data_seeds": (0, 1, 2, 3, 4),
    },
}
GRIDS["paper"] = GRIDS["quick"]


def _bins_label(bins) -> str:
    return "ceil(n_min^(1/3))" if bins is None else str(bins)


# --- units of work --------------------------------------------------------------------------------


def synthetic_unit(m_s: int, seeds) -> dict:
    truth = synthetic_truth(m_s, 0)
    population = tv.synthetic_tv_factors(
        truth.mean, truth.cov, truth.sensitive, truth.insensitive, delta=DELTA
    )
    plug = np.concatenate(
        [
            tv.plugin_tv_factors(
                synthetic_truth(m_s, s).dataset.x_train,
                truth.sensitive,
                truth.insensitive,
                delta=DELTA,
            )
            for s in seeds
        ]
    )
    return {
        "population_min": float(population.min()),
        "population_max": float(population.max()),
        "plugin_mean": float(plug.mean()),
        "plugin_min": float(plug.min()),
        "plugin_max": float(plug.max()),
        "plugin_seed0": [float(v) for v in plug[: len(truth.insensitive)]],
    }


def adult_unit(data_dir, rows: int | None, bins_list) -> dict:
    data = load_corrdp("adult", data_dir)
    if rows is not None:  # smoke: a subsample (numbers are then not the table's)
        keep = np.random.default_rng(0).choice(data.n, size=rows, replace=False)
        data = _subsample(data, keep)
    x = np.asarray(data.x, np.float64)
    s_cont = x[:, [c for g in tv.ADULT_CONTINUOUS_S for c in data.sensitive_groups[g]]]
    out = {}
    base = tv.adult_tv(data, bins=bins_list[0])  # the LR parts do not depend on the bins
    for feature, result in base.items():
        entry = {
            "kind": result.kind,
            "discrete": result.discrete_part,
            "continuous": {},
            "total": {},
        }
        for bins in bins_list:
            if result.kind == "continuous":  # Gaussian model: no bins
                cont = result.continuous_part
            else:
                codes = np.unique(
                    x[:, list(data.insensitive_groups[feature])], axis=0, return_inverse=True
                )[1]
                cont = tv.histogram_tv(s_cont, codes.reshape(-1), bins=bins)
            entry["continuous"][str(bins)] = float(cont)
            entry["total"][str(bins)] = float(min(result.discrete_part + cont, 1.0))
        out[feature] = entry
    return out


def _subsample(data, rows):
    import dataclasses

    return dataclasses.replace(data, x=np.asarray(data.x)[rows], y=np.asarray(data.y)[rows])


def credit_unit(data_dir, bins_list) -> dict:
    ds = load("credit_default", data_dir)
    x, names = np.asarray(ds.x_train, np.float64), list(ds.feature_names)
    sensitive = [n for n in names if n not in CREDIT_FACTORS]
    out = {}
    for feature in CREDIT_FACTORS:
        u = x[:, names.index(feature)]
        out[feature] = {}
        for bins in bins_list:
            values = {s: tv.histogram_tv(x[:, names.index(s)], u, bins=bins) for s in sensitive}
            best = max(values, key=values.get)
            out[feature][str(bins)] = {"tv": float(values[best]), "argmax": best}
    return out


def sepsis_unit(data_dir, bins_list) -> dict:
    original = np.asarray(load("sepsis", data_dir).x_train)
    rebalanced, labels = sepsis_rebalanced(data_dir)
    sample = np.asarray(load_corrdp("sepsis", data_dir).x)
    out = {"rebalanced_rows": int(rebalanced.shape[0]), "rebalanced_alive": float(np.mean(labels))}
    for label, x in (("original", original), ("rebalanced", rebalanced), ("sample", sample)):
        out[label] = {_bins_label(b): float(tv.sepsis_tv(x, bins=b)) for b in bins_list}
    return out


MEDICAL_PROCEDURE = {  # variant -> (continuous S, discrete S, continuous U)
    "default": (("bmi", "children"), ("smoker",), {"age": "continuous"}),
    "section5": (("age", "bmi", "children"), (), {}),
}


def medical_unit(data_dir) -> dict:
    out = {}
    for variant, (cont, disc, kinds) in MEDICAL_PROCEDURE.items():
        result = tv.mixed_tv_factors(
            load_corrdp("medical", data_dir, variant=variant), cont, disc, kinds
        )
        out[variant] = {
            f: {
                "kind": r.kind,
                "discrete": r.discrete_part,
                "continuous": r.continuous_part,
                "total": r.total,
            }
            for f, r in result.items()
        }
    return out


# --- the experiment -------------------------------------------------------------------------------


def run(ctx: RunContext) -> list[Comparison]:
    grid = GRIDS[ctx.profile]
    rows: list[dict] = []
    comparisons: list[Comparison] = []

    def add(key, dataset, feature, estimator, setting, paper, ours, **extra):
        rows.append(
            {
                "dataset": dataset,
                "feature": feature,
                "estimator": estimator,
                "setting": setting,
                "paper_factor": paper,
                "ours": ours,
                **extra,
                "versions": provenance_json(ctx.store.provenance(key)),
            }
        )

    # 13: synthetic
    seeds = grid["data_seeds"]
    for m_s in ctx.progress.track(M_S, "synthetic m_s"):
        key = f"synthetic/m_s={m_s}/seeds={','.join(map(str, seeds))}"
        rec = ctx.store.run(key, lambda m_s=m_s: synthetic_unit(m_s, seeds))
        add(
            key,
            "synthetic",
            "every i in U",
            "Eq. 22 population (App. E.1)",
            f"m_s={m_s}",
            np.nan,
            rec["population_max"],
        )
        add(
            key,
            "synthetic",
            "every i in U",
            "Eq. 22 empirical plug-in, mean",
            f"m_s={m_s}, data seeds {seeds}",
            np.nan,
            rec["plugin_mean"],
            low=rec["plugin_min"],
            high=rec["plugin_max"],
        )
        comparisons.append(
            Comparison.numeric(
                f"13 synthetic population TV(i), m_s={m_s}",
                POPULATION_TV[m_s],
                rec["population_max"],
                abs_tol=0.001,
                digits=4,
                note=(
                    "spec's derivation (the paper reports none); equal for every i in U "
                    f"(min {rec['population_min']:.6f}, max {rec['population_max']:.6f})"
                ),
            )
        )
        comparisons.append(
            Comparison.info(
                f"13 synthetic plug-in TV̂(i), m_s={m_s}",
                f"mean {rec['plugin_mean']:.3f} ({rec['plugin_min']:.2f}–{rec['plugin_max']:.2f})",
                note=(
                    "empirical mean + full covariance of X (A21), n=2000, data seeds"
                    f" {list(seeds)}; upward biased"
                ),
                paper=f"spec: {PLUGIN_REFERENCE[m_s]}",
            )
        )

    # 9: Adult
    ctx.progress("adult mixed procedure")
    key = f"adult/rows={grid['adult_rows']}/bins={grid['adult_bins']}"
    adult = ctx.store.run(
        key, lambda: adult_unit(ctx.data_dir, grid["adult_rows"], grid["adult_bins"])
    )
    subsample = (
        "" if grid["adult_rows"] is None else f" (smoke: {grid['adult_rows']}-row subsample)"
    )
    for feature, entry in adult.items():
        for bins in grid["adult_bins"]:
            cont, total = entry["continuous"][str(bins)], entry["total"][str(bins)]
            setting = "Gaussian (Eq. 22)" if entry["kind"] == "continuous" else f"{bins} bins/dim"
            add(
                key,
                "adult",
                feature,
                "§5.3 mixed: min{discrete + continuous, 1}",
                setting,
                ADULT_FACTORS[feature],
                total,
                discrete_part=entry["discrete"],
                continuous_part=cont,
            )
        totals = [entry["total"][str(b)] for b in grid["adult_bins"]]
        conts = [entry["continuous"][str(b)] for b in grid["adult_bins"]]
        comparisons.append(
            Comparison.info(
                f"9 Adult TV factor {feature}",
                f"{_span(totals)} = discrete {entry['discrete']:.3f} + continuous {_span(conts)}"
                + (
                    ""
                    if entry["kind"] == "continuous"
                    else f" ({'/'.join(map(str, grid['adult_bins']))} bins/dim)"
                )
                + subsample,
                paper=f"{ADULT_FACTORS[feature]:g} (Table 2; hard-coded in the runs)",
                note=ADULT_NOTES[feature],
            )
        )

    # 10: Credit
    ctx.progress("credit conditional histograms")
    key = f"credit/bins={grid['credit_bins']}"
    credit = ctx.store.run(key, lambda: credit_unit(ctx.data_dir, grid["credit_bins"]))
    for feature, per_bins in credit.items():
        for bins, entry in per_bins.items():
            add(
                key,
                "credit",
                feature,
                "1-D conditional histogram, max over the 19 sensitive features",
                f"{bins} bins",
                CREDIT_FACTORS[feature],
                entry["tv"],
                argmax=entry["argmax"],
            )
        values = [per_bins[str(b)]["tv"] for b in grid["credit_bins"]]
        argmax = sorted({per_bins[str(b)]["argmax"] for b in grid["credit_bins"]})
        comparisons.append(
            Comparison.info(
                f"10 Credit TV factor {feature}",
                f"{_span(values)} ({'/'.join(map(str, grid['credit_bins']))} bins; max at"
                f" {', '.join(argmax)})",
                paper=f"{CREDIT_FACTORS[feature]:g} (App. E.4; hard-coded in the runs)",
                note="conditioning on every raw value; the paper's histogram procedure is unstated",
            )
        )

    # 11: Sepsis
    ctx.progress("sepsis joint-cell histograms")
    key = f"sepsis/bins={grid['sepsis_bins']}"
    sepsis = ctx.store.run(key, lambda: sepsis_unit(ctx.data_dir, grid["sepsis_bins"]))
    paper_tv = SEPSIS_FACTORS["episode_number"]
    for label in ("original", "rebalanced", "sample"):
        for bins, value in sepsis[label].items():
            add(
                key,
                "sepsis",
                "(sex, episode) jointly",
                f"§5.4 joint-cell histogram of age, {label} data",
                f"{bins} bins",
                paper_tv,
                value,
            )
    labels = "/".join(sepsis["rebalanced"])
    rebalanced = list(sepsis["rebalanced"].values())
    lo, hi = SEPSIS_RANGE
    comparisons.append(
        Comparison.claim(
            "11 Sepsis TV_max on the rebalanced data",
            f"{paper_tv:g} (App. E.3); spec: estimator in [{lo}, {hi}]",
            f"{', '.join(f'{v:.3f}' for v in rebalanced)} ({labels} bins)",
            all(lo <= v <= hi for v in rebalanced),
            note=(
                f"SMOTENC + ENN on the majority class: {sepsis['rebalanced_rows']} rows, "
                f"{sepsis['rebalanced_alive']:.1%} alive (spec 179,971 / 43.3%)"
            ),
        )
    )
    for label, note in (
        ("original", "spec: 0.21–0.24 (5–50 bins)"),
        ("sample", "spec: 0.36–0.57; small cells (≈35 rows) inflate the plug-in"),
    ):
        comparisons.append(
            Comparison.info(
                f"11 Sepsis TV_max on the {label} data",
                f"{_span(sepsis[label].values())} ({labels} bins)",
                paper=f"{paper_tv:g}",
                note=note,
            )
        )

    # 12: Medical
    ctx.progress("medical mixed procedure")
    key = "medical"
    medical = ctx.store.run(key, lambda: medical_unit(ctx.data_dir))
    for variant, per_feature in medical.items():
        for feature, entry in per_feature.items():
            add(
                key,
                "medical",
                feature,
                f"§5.3 mixed procedure ({variant} split)",
                "default bins",
                MEDICAL_TV_MAX,
                entry["total"],
                discrete_part=entry["discrete"],
                continuous_part=entry["continuous"],
            )
        cont, disc, _ = MEDICAL_PROCEDURE[variant]
        comparisons.append(
            Comparison.info(
                f"12 Medical TV per insensitive feature ({variant} split)",
                ", ".join(f"{f} {e['total']:.3f}" for f, e in per_feature.items())
                + f"; max {max(e['total'] for e in per_feature.values()):.3f}",
                paper=f"{MEDICAL_TV_MAX:g} for every insensitive column (App. E.5; hard-coded)",
                note=f"method not described by the paper; ours: S^c = {', '.join(cont)}"
                + (f", S^d = {', '.join(disc)}" if disc else ", no discrete S"),
            )
        )

    frame = pd.DataFrame(rows)
    frame.insert(0, "profile", ctx.profile)
    frame["config"] = config_json({"delta": DELTA, **{k: str(v) for k, v in grid.items()}})
    write_csv(frame, ctx.out_dir / "table2.csv")
    return comparisons


def _span(values) -> str:
    values = [float(v) for v in values]
    lo, hi = min(values), max(values)
    return f"{lo:.3f}" if abs(hi - lo) < 5e-4 else f"{lo:.3f}–{hi:.3f}"


ADULT_NOTES = {
    "race": "spec: discrete part ≈ 0.245 alone ≈ Table 2; continuous part 0.39–0.63 (5–20 bins)",
    "gender": "spec: 0.83–0.90, reproduces Table 2",
    "workclass": "spec: capped at 1, reproduces Table 2 (small levels such as Without-pay)",
    "fnlwgt": "spec: ≈ 0.78 (0.33 + 0.45); Table 2's 0.22 is not reproduced",
}
