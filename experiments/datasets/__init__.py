"""Every dataset at a glance: rows, columns, class balance (or target moments) and row-norm
statistics.

Writes ``datasets.csv`` and ``datasets.md`` into ``ctx.out_dir`` and compares the counts stated by
the issue and the CorrDP spec (sections 5.3-5.6) and the Sun et al. spec (section 6.1) with ours.
Every profile does the same work: loading and summarising all datasets takes a few seconds.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpprep.data import DATASETS, DataNotFoundError, Dataset, load, search_dirs
from dpprep.data.registry import CIFAR100_FEATURES_RELPATH
from dpprep.data.synthetic import corrdp_synthetic
from experiments.results import (
    Comparison,
    atomic_write_text,
    config_json,
    provenance_json,
    write_csv,
)
from experiments import RunContext

SYNTHETIC_CONFIG = {"n": 2000, "m": 100, "m_s": 10, "noise_std": 5.0, "seed": 0}


def summarise(dataset: Dataset) -> dict:
    """One table row: sizes, label balance and L2 norms of all rows (train and test together)."""
    x = np.concatenate([dataset.x_train, dataset.x_test]).astype(np.float64)
    y = np.concatenate([dataset.y_train, dataset.y_test])
    norms = np.linalg.norm(x, axis=1)
    row = {
        "dataset": dataset.name,
        "task": dataset.task,
        "n_train": dataset.n_train,
        "n_test": dataset.n_test,
        "n_columns": dataset.n_features,
        "n_raw_features": len(dataset.feature_groups),
        "num_classes": dataset.num_classes,
        "class_balance": "",
        "positive_rate": np.nan,
        "target_mean": np.nan,
        "target_std": np.nan,
        "x_min": float(x.min()),
        "x_max": float(x.max()),
        "norm_mean": float(norms.mean()),
        "norm_median": float(np.median(norms)),
        "norm_max": float(norms.max()),
    }
    if dataset.task == "classification":
        fractions = np.bincount(y, minlength=dataset.num_classes) / y.size
        row["class_balance"] = " ".join(f"{k}:{f:.4f}" for k, f in enumerate(fractions))
        if dataset.num_classes == 2:
            row["positive_rate"] = float(fractions[1])
    else:
        row["target_mean"] = float(y.astype(np.float64).mean())
        row["target_std"] = float(y.astype(np.float64).std(ddof=1))
    return row


def _markdown(frame: pd.DataFrame) -> str:
    def fmt(value) -> str:
        if isinstance(value, float):
            if np.isnan(value):
                return ""
            return f"{value:.0f}" if value.is_integer() and abs(value) < 1e7 else f"{value:.4g}"
        return "" if value is None or value is pd.NA else str(value)

    columns = [c for c in frame.columns if c not in ("config", "versions")]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(row[c]) for c in columns) + " |" for _, row in frame.iterrows()]
    versions = frame["versions"].iloc[0] if len(frame) else ""
    return (
        "# Datasets\n\n"
        + "\n".join(lines)
        + f"\n\nNorms are L2 norms of all rows (train and test).\nVersions: `{versions}`\n"
    )


def run(ctx: RunContext) -> list[Comparison]:
    rows, loaded = [], {}
    for name in DATASETS:
        ctx.progress(f"loading {name}")
        config = config_json({"dataset": name, "loader": "dpprep.data.load", "verify": True})
        try:
            loaded[name] = load(name, ctx.data_dir)
        except DataNotFoundError:
            if name != "cifar100_features":  # the only dataset allowed to be absent
                raise
            note = (
                f"user-provided {CIFAR100_FEATURES_RELPATH} not found; format in the dpprep.data"
                " docstring"
            )
            ctx.progress(
                f"{name} absent (user-provided; not in"
                f" {[str(d) for d, _ in search_dirs(ctx.data_dir)]})"
            )
            rows.append(
                {"dataset": name, "status": "absent", "note": note, "seed": "", "config": config}
            )
            continue
        rows.append(
            {
                **summarise(loaded[name]),
                "status": "loaded",
                "note": "",
                "seed": "",
                "config": config,
            }
        )
    ctx.progress("generating corrdp_synthetic")
    synthetic = corrdp_synthetic(**SYNTHETIC_CONFIG).dataset
    rows.append(
        {
            **summarise(synthetic),
            "status": "generated",
            "note": "",
            "seed": SYNTHETIC_CONFIG["seed"],
            "config": config_json(SYNTHETIC_CONFIG),
        }
    )
    frame = pd.DataFrame(rows)
    for column in ("n_train", "n_test", "n_columns", "n_raw_features", "num_classes"):
        frame[column] = frame[column].astype("Int64")  # integers, with <NA> for the absent rows
    frame["versions"] = provenance_json()
    write_csv(frame, ctx.out_dir / "datasets.csv")
    atomic_write_text(ctx.out_dir / "datasets.md", _markdown(frame))

    stats = {r["dataset"]: r for r in rows}
    count = {"abs_tol": 0.5, "digits": 8}  # integers: exact
    rate = {"abs_tol": 5e-5}  # a rate stated to 4 digits: exact after rounding
    comparisons = [
        Comparison.numeric("adult rows (spec 5.3)", 45175, stats["adult"]["n_train"], **count),
        Comparison.numeric(
            "adult columns after one-hot (spec 5.3)", 31, stats["adult"]["n_columns"], **count
        ),
        Comparison.numeric(
            "adult positive rate >50K (spec 5.3)", 0.2480, stats["adult"]["positive_rate"], **rate
        ),
        Comparison.numeric(
            "adult max row norm (spec 5.3)", 2.79, stats["adult"]["norm_max"], rel_tol=0.01
        ),
        Comparison.numeric("sepsis rows (spec 5.4)", 110204, stats["sepsis"]["n_train"], **count),
        Comparison.numeric(
            "sepsis fraction alive (spec 5.4)", 0.9265, stats["sepsis"]["positive_rate"], **rate
        ),
        Comparison.numeric(
            "credit_default rows (spec 5.5)", 30000, stats["credit_default"]["n_train"], **count
        ),
        Comparison.numeric(
            "credit_default raw features (spec 5.5)",
            23,
            stats["credit_default"]["n_columns"],
            **count,
        ),
        Comparison.numeric(
            "credit_default positive rate (spec 5.5)",
            0.2212,
            stats["credit_default"]["positive_rate"],
            **rate,
        ),
        Comparison.numeric(
            "insurance rows after dedup (spec 5.6)", 1337, stats["insurance"]["n_train"], **count
        ),
        Comparison.numeric(
            "insurance encoded columns (spec 5.6)", 8, stats["insurance"]["n_columns"], **count
        ),
    ]
    for name in ("mnist", "fashion_mnist"):
        comparisons += [
            Comparison.numeric(
                f"{name} train rows (Sun et al. 6.1)", 60000, stats[name]["n_train"], **count
            ),
            Comparison.numeric(
                f"{name} test rows (Sun et al. 6.1)", 10000, stats[name]["n_test"], **count
            ),
            Comparison.numeric(
                f"{name} features (Sun et al. 6.1)", 784, stats[name]["n_columns"], **count
            ),
        ]
    cifar = stats["cifar100_features"]
    if cifar["status"] == "absent":
        comparisons.append(
            Comparison.info("cifar100_features", "absent (user-provided file)", note=cifar["note"])
        )
    else:
        comparisons.append(
            Comparison.info(
                "cifar100_features rows/columns",
                f"{cifar['n_train']}/{cifar['n_test']} x {cifar['n_columns']}",
            )
        )
    return comparisons
