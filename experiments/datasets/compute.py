"""What the datasets experiment measures on each loaded data set: sizes, label balance (or target
moments) and the L2 norms of all rows, as one row of ``datasets.csv``."""

from __future__ import annotations

import numpy as np

from dpprep.data import Dataset


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
