"""Hu, Sanyal, Schölkopf (2024) Table 3: L2 sensitivity of imputation models, symbolic and on Adult.

Writes

- ``table3.md`` / ``table3.tex``: Table 3 as printed (``table3.csv``), next to what
  ``dpprep.preprocess`` computes;
- ``table3_adult.csv`` / ``.md``: Adult (rows scaled into the unit ball by the public bound
  ``sqrt(#features) = 3``: five one-hot groups and four [0, 1] features), values removed completely
  at random (fixed seed) from ``age`` — and, as a second setting, from ``age`` and
  ``hours-per-week`` — at 1 %, 5 % and 10 %. For each imputation (mean, median, m-trimmed mean with
  m = 5 % of the rows, least squares on the other continuous features): Δ∞ = p, our Δ2, τ* = Δ2·Δ∞,
  Table 3's printed Δ2 on the same data, and the largest Hamming distance / L2 change of the common
  records measured over sampled replace-one neighbours (half copies of other Adult rows, half
  adversarial: ``±e_j`` on an imputed column, some with that column missing).

Comparisons: the §11.1 constants, the mean-imputation entries of Table 2 at the §11.2 point
(``targets.csv``), and for every setting the claim "measured ≤ bound" (a real check; the ratio is
reported).
"""

from __future__ import annotations

import pandas as pd

from experiments import RunContext
from experiments.results import (
    Comparison,
    atomic_write_text,
    config_json,
    provenance_json,
    write_csv,
)

from .compute import imputer, inject_mcar, load_adult_unit_ball, measure, run_setting
from .config import EXPERIMENT, METHODS, PROFILES, Table3Config
from .report import (
    adult_markdown,
    constants_comparisons,
    setting_comparisons,
    symbolic_latex,
    symbolic_markdown,
)

__all__ = [
    "EXPERIMENT",
    "METHODS",
    "PROFILES",
    "Table3Config",
    "constants_comparisons",
    "imputer",
    "inject_mcar",
    "load_adult_unit_ball",
    "measure",
    "run",
    "run_setting",
    "symbolic_latex",
    "symbolic_markdown",
]


def run(ctx: RunContext) -> list[Comparison]:
    cfg = PROFILES[ctx.profile]
    atomic_write_text(ctx.out_dir / "table3.md", symbolic_markdown())
    atomic_write_text(ctx.out_dir / "table3.tex", symbolic_latex())
    comparisons = constants_comparisons()

    x, _, groups = load_adult_unit_ball(ctx.data_dir, cfg.n_rows, cfg.seed)
    rows, versions = [], []
    for columns in cfg.settings:
        for rate in cfg.missing_rates:
            for method in METHODS:
                key = f"{'+'.join(columns)}|{rate}|{method}|n={x.shape[0]}|{config_json(cfg)}"
                ctx.progress(f"{key}")
                rows.append(
                    ctx.store.run(key, lambda: run_setting(x, groups, columns, rate, method, cfg))
                )
                # of the unit's computation
                versions.append(provenance_json(ctx.store.provenance(key)))
    frame = pd.DataFrame(rows)
    frame["seed"] = cfg.seed
    frame["config"] = config_json(cfg)
    frame["versions"] = versions
    write_csv(frame, ctx.out_dir / "table3_adult.csv")

    ok = frame[frame["error"].isna()] if "error" in frame else frame
    text = adult_markdown(frame, ok, cfg, x.shape[0], ctx.profile)
    atomic_write_text(ctx.out_dir / "table3_adult.md", text)
    return comparisons + setting_comparisons(ok, cfg)
