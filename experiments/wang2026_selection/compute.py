"""What a unit computes: one seed's private selections of C (a validation split, every (method,
nominal ε) search packed through :func:`dpprep.selection.search_many`), and a panel's paper-style
sweep of every (method, ε, C) × seed on the whole data with the non-private reference.

Private random search as in Liu & Talwar (STOC 2019) and Papernot & Steinke (ICLR 2022): ``K ~``
geometric, candidate ``i`` draws a C of the grid uniformly, trains CorrDP-SGD / Standard (Wang,
Zhang & Cummings 2026) on the training part and releases a noisy count of correct validation
predictions; the best noisy score wins.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from dpprep.corrdp import sgd, utility
from dpprep.selection import PrivateSelection, Search, search_many, split

from .accounting import selection_of
from .config import CHUNK, METHODS, SEED, Profile
from .panel import Setup


@dataclasses.dataclass(frozen=True)
class Request:
    """One selection: ``method`` at nominal ``epsilon``, its PRNG ``key``."""

    method: str
    epsilon: float
    key: Any


def selection_key(seed_key, method: str, epsilon: float):
    return jax.random.fold_in(
        jax.random.fold_in(seed_key, METHODS.index(method)), int(round(epsilon * 1000))
    )


def select_many(
    setup: Setup,
    train: tuple[np.ndarray, np.ndarray],
    validation: tuple[np.ndarray, np.ndarray],
    requests: Sequence[Request],
    selection: PrivateSelection,
    chunk: int = CHUNK,
) -> list[dict]:
    """Every request's private random search over ``setup.grid`` (each C its own noise level), all
    candidates packed through :func:`dpprep.selection.search_many`. Returns per request: the chosen
    C and weights (the private output), and diagnostics (K, the drawn indices, noisy scores; not
    private).
    """
    n_train = int(train[0].shape[0])
    searches = [
        Search(
            r.key,
            sgd.point_values(
                setup.cfg,
                setup.params0,
                n_train,
                [sgd.Point(r.method, r.epsilon, c, setup.factors[r.method]) for c in setup.grid],
            ),
        )
        for r in requests
    ]
    found = search_many(
        setup.cfg.train_config(n_train),
        setup.params0,
        train,
        validation,
        searches,
        selection=selection,
        chunk_size=chunk,
    )
    out = []
    for r, res in zip(requests, found):
        d = res.diagnostics
        num = d["num_candidates"]
        out.append(
            {
                "method": r.method,
                "epsilon": r.epsilon,
                "num_candidates": num,
                "grid_indices": d["grid_indices"].tolist(),
                "noisy_scores": d["noisy_scores"].tolist() if num else [],
                "validation_accuracy": d["accuracies"].tolist() if num else [],
                "best": d["best"] if num else -1,
                "C": setup.grid[res.index] if res.index is not None else math.nan,
                "w": (
                    np.asarray(res.params["w"], np.float64)[:, 0].tolist()
                    if res.params is not None
                    else None
                ),
            }
        )
    return out


def selection_unit(setup: Setup, profile: Profile, seed: int) -> dict:
    """Every (method, ε) selection of one seed (one split of the data, shared by them)."""
    seed_key = jax.random.fold_in(jax.random.key(SEED), seed)
    selection = selection_of(setup, profile)
    train, validation = split((setup.x, setup.y), selection.validation_size, seed_key)
    requests = [
        Request(m, e, selection_key(seed_key, m, e)) for m in METHODS for e in profile.epsilons
    ]
    results = select_many(
        setup,
        (np.asarray(train[0]), np.asarray(train[1])),
        (np.asarray(validation[0]), np.asarray(validation[1])),
        requests,
        selection,
    )
    for res in results:
        w = res.pop("w")
        res["accuracy"] = (
            math.nan if w is None else float(utility.accuracy_pp(setup.x, setup.y, np.asarray(w)))
        )
        res["seed"] = seed
    return {"rows": results, "n_train": int(train[0].shape[0])}


def training_unit(setup: Setup, profile: Profile) -> dict:
    """Paper-style: every (method, ε, C) × seed on the whole data (one call), and the non-private
    reference (the paper's config, unclipped, b = 0)."""
    keys = jnp.stack([jax.random.key(s) for s in range(profile.seeds)])  # seeds 0..S−1, as Figure 1
    points = [
        sgd.Point(m, e, c, setup.factors[m])
        for m in METHODS
        for e in profile.epsilons
        for c in setup.grid
    ]
    w = np.asarray(
        sgd.sweep_points(setup.cfg, setup.params0, (setup.x, setup.y), keys, points).params["w"],
        np.float64,
    )[..., 0]
    acc = utility.accuracy_pp(setup.x, setup.y, w)  # (S, P)
    paper_cfg = dataclasses.replace(setup.cfg, clip_mode=None, l2_clip_norm=math.inf)
    ref = sgd.sweep_points(
        paper_cfg, setup.params0, (setup.x, setup.y), keys[:1], [sgd.Point("nonprivate", None, 0.0)]
    )
    ref_acc = float(
        utility.accuracy_pp(setup.x, setup.y, np.asarray(ref.params["w"], np.float64)[0, 0, :, 0])
    )
    rows = [
        {
            "method": p.method,
            "epsilon": p.epsilon,
            "C": p.c,
            "seed": s,
            "accuracy": float(acc[s, i]),
        }
        for i, p in enumerate(points)
        for s in range(profile.seeds)
    ]
    return {"rows": rows, "nonprivate_accuracy": ref_acc}
