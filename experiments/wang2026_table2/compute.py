"""The units of Wang, Zhang & Cummings (2026) Table 2 / App. E: per data set, the TV factors that
the estimators of ``dpprep.corrdp.tv`` give (synthetic population and plug-in, Adult's and Medical's
§5.3 mixed procedure, Credit's conditional histograms, Sepsis' §5.4 joint-cell histograms)."""

from __future__ import annotations

import dataclasses

import numpy as np

from dpprep.corrdp import tv
from dpprep.corrdp.data import CREDIT_FACTORS, load_corrdp, sepsis_rebalanced, synthetic_truth
from dpprep.data import load

from .config import DELTA, MEDICAL_PROCEDURE


def _bins_label(bins) -> str:
    return "ceil(n_min^(1/3))" if bins is None else str(bins)


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
