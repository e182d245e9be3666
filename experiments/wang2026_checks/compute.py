"""What Wang, Zhang & Cummings (2026)'s checks measure (spec §6): Ex. 2.6's distances, the data
sets' sizes, the inequality chain on random TV vectors, the Laplace mechanism's tail by Monte
Carlo, and the training units (items 7, 8 and 14) that :mod:`experiments.wang2026_fig1`'s code
runs."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from dpprep.corrdp import defs
from dpprep.corrdp.data import load_corrdp, sepsis_rebalanced
from dpprep.data import load
from experiments.results import config_json

from .config import LAPLACE_SETUP


def example_2_6_joint(p_x2: tuple[float, float] = (0.5, 0.5)) -> np.ndarray:
    """Ex. 2.6: X1 | X2 = k ~ Bernoulli(k/3), k ∈ {1, 2}; ``joint[x1, k − 1]`` (P(X2) is free)."""
    joint = np.zeros((2, 2))
    for j, k in enumerate((1, 2)):
        joint[1, j], joint[0, j] = p_x2[j] * k / 3, p_x2[j] * (1 - k / 3)
    return joint


def example_2_6_distances() -> dict[str, float]:
    """Item 1: the Eq. 1 distance from e = (1, 2) to a neighbour differing in the sensitive X1
    (e' = (0, 1)) and in the insensitive X2 only (e' = (1, 1))."""
    joint = example_2_6_joint()
    return {
        "ex26_sensitive": defs.corrdp_distance(joint, [0], (1, 1), (0, 0)),
        "ex26_insensitive": defs.corrdp_distance(joint, [0], (1, 1), (1, 0)),
    }


def data_facts(data_dir) -> dict:
    """Items 2–6: the sizes of the data sets as the CorrDP runs load them, keyed like the targets,
    and (``credit_u``, ``credit_encoded``) Credit's insensitive features and encoded columns."""
    adult = load_corrdp("adult", data_dir)
    sepsis = load("sepsis", data_dir)
    medical_raw = load("insurance", data_dir)
    medical = load_corrdp("medical", data_dir)
    credit = load_corrdp("credit", data_dir)
    x, y = sepsis_rebalanced(data_dir)
    return {
        "adult_rows": adult.n,
        "adult_dims": adult.m - (adult.intercept is not None),
        "sepsis_rows": sepsis.n_train,
        "sepsis_alive": 100 * float(np.mean(sepsis.y_train)),
        "medical_rows": medical_raw.n_train,
        "medical_sample_rows": medical.n,
        "medical_dims": medical.m - 1,
        "credit_rows": credit.n,
        "credit_sensitive": len(credit.sensitive_groups),
        "credit_insensitive": len(credit.insensitive_groups),
        "sepsis_rebalanced_rows": x.shape[0],
        "sepsis_rebalanced_alive": 100 * float(np.mean(y)),
        "credit_u": list(credit.insensitive_groups),
        "credit_encoded": credit.m - 1,
    }


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


def inequality_chain(count: int) -> tuple[int, int]:
    """Item 24: ``(checked, violations)`` of ``(TV^(1))² ≤ max_k k(TV^(k))² ≤ Σ TV`` over the
    vectors of :func:`random_tv_vectors`."""
    checked = violations = 0
    for v in random_tv_vectors(count):
        middle = defs.lower_bound_dimension_term(v)
        checked += 1
        violations += not (v.max() ** 2 <= middle + 1e-12 and middle <= v.sum() + 1e-12)
    return checked, violations


def laplace_tail(draws: int) -> tuple[dict, float]:
    """Item 25: the CorrDP Laplace mechanism's error over ``draws`` draws against the Thm 2.10
    radius; ``(row of laplace_tail.csv, the plain sensitivity Δf = Σ_j Δf_j)``."""
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
    row = {
        **c,
        "draws": draws,
        "delta_c": delta_c,
        "radius": radius,
        "coverage": coverage,
        "exact_coverage": exact,
        "config": config_json(c),
    }
    return row, coord.sum()


def adult_accuracy(data_dir) -> dict:
    """Item 7's unit: Fig. 1b's non-private reference, one run (full-batch GD is deterministic)."""
    from experiments import wang2026_fig1 as fig1

    return {"accuracy": fig1.nonprivate_accuracy("b", data_dir, seeds=1).tolist()}


def sepsis_accuracy(data_dir, seeds: int) -> dict:
    """Item 8's unit: Fig. 1c's non-private reference, per seed."""
    from experiments import wang2026_fig1 as fig1

    return {"accuracy": fig1.nonprivate_accuracy("c", data_dir, seeds=seeds).tolist()}


def standard_gap(data_dir, seeds: int) -> dict:
    """Item 14's unit: Fig. 1a's Standard gap against (α/4)Σσ_i², as a Comparison's fields."""
    from experiments import wang2026_fig1 as fig1

    return dataclasses.asdict(fig1.item14_check(data_dir, seeds=seeds))
