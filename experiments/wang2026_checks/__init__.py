"""Wang, Zhang & Cummings (2026): the exact and Monte Carlo checks of spec §6.

* 1 Ex. 2.6: the Eq. 1 distance is 1 and 1/3 (exact, 1e-12).
* 2–6 data: Adult 45,175 rows / 31 one-hot dims; Sepsis 110,204 rows, 92.6 % alive (±0.1 pp);
  Medical 1,337 rows (1,000-row sample), 8 encoded dims; Credit 30,000 rows, 19 S / 4 U raw
  features. Also the Sepsis rebalancing against the spec's [checked] 179,971 rows / 43.3 % alive.
* 24 the lower/upper-bound chain ``(TV^(1))² ≤ max_k k(TV^(k))² ≤ Σ TV`` on random TV vectors.
* 25 the CorrDP Laplace tail bound (Thm 2.10) by Monte Carlo: 10⁴ draws, β = 0.1, coverage ≥ 0.89.

* 7, 8 the non-private references of Fig. 1b/1c (in-sample accuracy: Adult GD α = 0.05,
  T = 5000, 81.5–84.0 %; Sepsis NN with Adam, T = 200, 66–72 %) and 14 the synthetic Standard gap
  against (α/4)Σσ_i² (ε ≤ 1, C = 1, within 15 %): run by Fig. 1's code
  (:mod:`experiments.wang2026_fig1`), not a copy.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import numpy as np
import pandas as pd

from dpprep.corrdp import defs
from dpprep.corrdp.data import load_corrdp, sepsis_rebalanced
from dpprep.data import load
from experiments.results import Comparison, config_json, write_csv
from experiments import RunContext

COUNT = {"abs_tol": 0.5, "digits": 8}  # integers: exact
GRIDS = {
    "smoke": {"chain_vectors": 2_000, "laplace_draws": 10_000},
    "quick": {"chain_vectors": 20_000, "laplace_draws": 10_000},
    "paper": {"chain_vectors": 100_000, "laplace_draws": 100_000},
}


def example_2_6_joint(p_x2: tuple[float, float] = (0.5, 0.5)) -> np.ndarray:
    """Ex. 2.6: X1 | X2 = k ~ Bernoulli(k/3), k ∈ {1, 2}; ``joint[x1, k − 1]`` (P(X2) is free)."""
    joint = np.zeros((2, 2))
    for j, k in enumerate((1, 2)):
        joint[1, j], joint[0, j] = p_x2[j] * k / 3, p_x2[j] * (1 - k / 3)
    return joint


def check_example_2_6(ctx: RunContext) -> list[Comparison]:
    joint = example_2_6_joint()
    sens = defs.corrdp_distance(joint, [0], (1, 1), (0, 0))  # e = (1, 2), e' = (0, 1)
    insens = defs.corrdp_distance(joint, [0], (1, 1), (1, 0))  # e = (1, 2), e' = (1, 1)
    note = "Eq. 1 evaluated over every I ⊆ [m] on the joint law (P(X2) uniform)"
    return [
        Comparison.numeric(
            "1 Ex. 2.6 d(e=(1,2), e'=(0,1))", 1.0, sens, abs_tol=1e-12, digits=12, note=note
        ),
        Comparison.numeric(
            "1 Ex. 2.6 d(e=(1,2), e'=(1,1))", 1 / 3, insens, abs_tol=1e-12, digits=12, note=note
        ),
    ]


def check_data(ctx: RunContext) -> list[Comparison]:
    adult = load_corrdp("adult", ctx.data_dir)
    sepsis = load("sepsis", ctx.data_dir)
    medical_raw = load("insurance", ctx.data_dir)
    medical = load_corrdp("medical", ctx.data_dir)
    credit = load_corrdp("credit", ctx.data_dir)
    alive = 100 * float(np.mean(sepsis.y_train))
    non_intercept = adult.m - (adult.intercept is not None)
    out = [
        Comparison.numeric("2 Adult rows after filtering", 45175, adult.n, **COUNT),
        Comparison.numeric(
            "3 Adult dims after one-hot",
            31,
            non_intercept,
            **COUNT,
            note="plus our intercept column (A20)",
        ),
        Comparison.numeric("4 Sepsis rows (primary cohort)", 110204, sepsis.n_train, **COUNT),
        Comparison.numeric("4 Sepsis majority (alive), %", 92.6, alive, abs_tol=0.1, digits=4),
        Comparison.numeric("5 Medical rows after dedup", 1337, medical_raw.n_train, **COUNT),
        Comparison.numeric("5 Medical sample rows", 1000, medical.n, **COUNT),
        Comparison.numeric("5 Medical encoded dims (drop_first)", 8, medical.m - 1, **COUNT),
        Comparison.numeric("6 Credit rows", 30000, credit.n, **COUNT),
        Comparison.numeric(
            "6 Credit sensitive raw features", 19, len(credit.sensitive_groups), **COUNT
        ),
        Comparison.numeric(
            "6 Credit insensitive raw features",
            4,
            len(credit.insensitive_groups),
            **COUNT,
            note=(
                f"U = {', '.join(credit.insensitive_groups)}; {credit.m - 1} encoded columns (A15)"
            ),
        ),
    ]
    x, y = sepsis_rebalanced(ctx.data_dir)
    out += [
        Comparison.numeric(
            "4 Sepsis rebalanced rows (spec 5.4, SMOTENC + ENN on the majority)",
            179971,
            x.shape[0],
            **COUNT,
            note="spec's [checked] value, not the paper's",
        ),
        Comparison.numeric(
            "4 Sepsis rebalanced alive, % (spec 5.4)",
            43.3,
            100 * float(np.mean(y)),
            abs_tol=0.05,
            digits=4,
            note="the literal SMOTEENN (variant 'smoteenn') collapses to ≈ 99.8 % alive (A12)",
        ),
    ]
    return out


def random_tv_vectors(count: int, seed: int = 0):
    """Random TV vectors of 1–100 entries, from three families (uniform, sparse, near-constant),
    plus the edge cases (all 0, all 1, one entry)."""
    rng = np.random.default_rng(seed)
    yield from (np.zeros(5), np.ones(5), np.array([0.3]), np.array([1.0]))
    for i in range(count):
        k = int(rng.integers(1, 101))
        family = i % 3
        if family == 0:
            v = rng.random(k)
        elif family == 1:
            v = rng.random(k) * (rng.random(k) < 0.1)
        else:
            v = np.clip(rng.uniform(0, 1) + 1e-3 * rng.standard_normal(k), 0, 1)
        yield v


def check_inequality_chain(ctx: RunContext) -> list[Comparison]:
    count = GRIDS[ctx.profile]["chain_vectors"]
    checked = violations = 0
    for v in random_tv_vectors(count):
        middle = defs.lower_bound_dimension_term(v)
        checked += 1
        violations += not (v.max() ** 2 <= middle + 1e-12 and middle <= v.sum() + 1e-12)
    return [
        Comparison.claim(
            "24 (TV^(1))² ≤ max_k k(TV^(k))² ≤ Σ TV",
            "holds (Section 3.3)",
            f"{violations} violations in {checked} random TV vectors",
            violations == 0,
            note="vectors of 1–100 entries: uniform, sparse, near-constant, and edge cases",
        )
    ]


LAPLACE_SETUP = {
    "m": 100,
    "m_s": 10,
    "tv": 0.364,
    "coord_sens": 1.0,
    "epsilon": 1.0,
    "beta": 0.1,
    "seed": 0,
}


def check_laplace_tail(ctx: RunContext) -> list[Comparison]:
    draws = GRIDS[ctx.profile]["laplace_draws"]
    c = LAPLACE_SETUP
    s, u = list(range(c["m_s"])), list(range(c["m_s"], c["m"]))
    coord = np.full(c["m"], c["coord_sens"])
    tv = np.full(len(u), c["tv"])
    delta_c = defs.correlated_sensitivity(coord, tv, s, u)
    radius = defs.laplace_tail_bound(delta_c, c["epsilon"], c["m"], c["beta"])
    values = np.zeros(c["m"])
    keys = jax.random.split(jax.random.key(c["seed"]), draws)
    noisy = jax.jit(
        jax.vmap(lambda k: defs.corrdp_laplace(k, values, coord, tv, s, u, c["epsilon"]))
    )(keys)
    errors = np.max(np.abs(np.asarray(noisy, np.float64) - values), axis=1)
    coverage = float(np.mean(errors <= radius))
    # Exact coverage of K iid Laplace(b) coordinates: (1 − β/K)^K for radius b·log(K/β).
    exact = (1 - c["beta"] / c["m"]) ** c["m"]
    write_csv(
        pd.DataFrame(
            [
                {
                    **c,
                    "draws": draws,
                    "delta_c": delta_c,
                    "radius": radius,
                    "coverage": coverage,
                    "exact_coverage": exact,
                    "config": config_json(c),
                }
            ]
        ),
        ctx.out_dir / "laplace_tail.csv",
    )
    return [
        Comparison.claim(
            "25 Laplace tail bound P(‖err‖∞ ≤ Δ_C log(K/β)/ε) ≥ 1 − β, β = 0.1",
            "≥ 0.9 (Thm 2.10); test ≥ 0.89",
            f"{coverage:.4f} over {draws} draws (exact {exact:.4f})",
            coverage >= 0.89,
            note=(
                f"K = m = {c['m']}, m_s = {c['m_s']}, TV = {c['tv']}, Δf_j = 1, ε = {c['epsilon']}:"
                f" Δ_C = {delta_c:.2f} (vs Δf = {coord.sum():.0f})"
            ),
        )
    ]


#: Seeds of the training checks in every profile (spec §5.1: seeds 0..9). Item 7 is full-batch GD
#: (deterministic: one run); the Sepsis seeds differ a lot (2 of seeds 0..9 stall near 58 %), so a
#: mean over fewer seeds would be biased.
TRAINING_SEEDS = 10


def check_nonprivate_accuracy(ctx: RunContext) -> list[Comparison]:
    from experiments import wang2026_fig1 as fig1

    seeds = TRAINING_SEEDS
    # Units of work (resumable, cached with the code digest), keyed on the panels' protocols.
    adult = np.asarray(
        ctx.store.run(
            f"item7/{config_json(fig1.PANELS['b'])}",
            lambda: {"accuracy": fig1.nonprivate_accuracy("b", ctx.data_dir, seeds=1).tolist()},
        )["accuracy"]
    )
    sepsis = np.asarray(
        ctx.store.run(
            f"item8/{seeds}/{config_json(fig1.PANELS['c'])}",
            lambda: {"accuracy": fig1.nonprivate_accuracy("c", ctx.data_dir, seeds=seeds).tolist()},
        )["accuracy"]
    )
    return [
        Comparison.claim(
            "7 Adult non-private accuracy (in-sample, GD α = 0.05, T = 5000)",
            "83 % (test: 81.5–84.0 %)",
            f"{adult[0]:.2f} %",
            bool(81.5 <= adult[0] <= 84.0),
            note=(
                "full-batch GD from θ = 0, intercept column; deterministic (spec [checked]: 82.0 %)"
            ),
        ),
        Comparison.claim(
            "8 Sepsis non-private accuracy (in-sample, NN 3-5-2, Adam lr 0.005, T = 200, batch"
            " 1024)",
            "69 % (test: 66–72 %)",
            f"{sepsis.mean():.2f} % (median {np.median(sepsis):.1f}; "
            f"seeds: {', '.join(f'{a:.1f}' for a in sepsis)})",
            bool(66.0 <= sepsis.mean() <= 72.0),
            note=(
                f"mean of {seeds} seeds (init, batches); clip of the mean gradient at 5; 10k-row"
                " rebalanced sample"
            ),
        ),
    ]


def check_standard_gap(ctx: RunContext) -> list[Comparison]:
    from experiments import wang2026_fig1 as fig1

    record = ctx.store.run(
        f"item14/{TRAINING_SEEDS}/{config_json(fig1.PANELS['a'])}",
        lambda: dataclasses.asdict(fig1.item14_check(ctx.data_dir, seeds=TRAINING_SEEDS)),
    )
    return [Comparison(**record)]


#: The checks, in REPORT.md order. Each takes the RunContext and returns Comparison rows.
CHECKS: list[Callable[[RunContext], list[Comparison]]] = [
    check_example_2_6,
    check_data,
    check_nonprivate_accuracy,
    check_standard_gap,
    check_inequality_chain,
    check_laplace_tail,
]


def run(ctx: RunContext) -> list[Comparison]:
    comparisons = []
    for check in CHECKS:
        ctx.progress(check.__name__)
        comparisons += check(ctx)
    return comparisons
