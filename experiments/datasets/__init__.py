"""Every dataset at a glance: rows, columns, class balance (or target moments) and row-norm
statistics.

Writes ``datasets.csv`` and ``datasets.md`` into ``ctx.out_dir`` and compares the counts stated by
the issue and the CorrDP spec (sections 5.3-5.6) and the Sun et al. spec (section 6.1) with ours
(``targets.csv``). Every profile does the same work: loading and summarising all datasets takes a
few seconds.
"""

from __future__ import annotations

import pandas as pd

from dpprep.data import DATASETS, DataNotFoundError, load, search_dirs
from dpprep.data.registry import CIFAR100_FEATURES_RELPATH
from dpprep.data.synthetic import corrdp_synthetic
from experiments import RunContext
from experiments.results import (
    Comparison,
    atomic_write_text,
    config_json,
    provenance_json,
    write_csv,
)

from .compute import summarise
from .config import SYNTHETIC_CONFIG
from .report import comparisons, markdown

__all__ = ["SYNTHETIC_CONFIG", "run", "summarise"]


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
    atomic_write_text(ctx.out_dir / "datasets.md", markdown(frame))
    return comparisons({r["dataset"]: r for r in rows})
