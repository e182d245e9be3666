"""The compiled sweeps of one Hu et al. (2024) Figure 3 case: every (method × ε × seed × step size)
of one trainer but PTR, in three compiled functions (d-dim points, d-dim DP-PCA datasets, k-dim
datasets)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from dpprep.sweeps import sweep_datasets, sweep_points

from .config import DATASET_BYTES, METHODS


def train_methods(
    cfg_d,
    cfg_k,
    field: str,
    noise: dict,
    x,
    y,
    rank_data,
    dim_data,
    releases,
    train_keys,
    eps_list,
    lrs,
    n: int,
    d: int,
    progress,
    **limits,
) -> tuple[dict, int]:
    """Every (method × ε × seed × step size) of one trainer but PTR (``cfg_d``/``cfg_k``: its d- and
    k-dim configs; ``field``: the swept noise field; ``noise[(method, variant)]``: values per ε) in
    three compiled functions. Returns the original-data losses ``{(method, variant): (E, S, P)}``
    and the number of compiled calls executed. ``limits`` (``max_steps``, ``first_chunk_only``:
    ``run_all --validate``) go to every sweep; with ``first_chunk_only`` the DP-PCA datasets'
    loop builds and runs its first chunk only (the others repeat it)."""
    E, P, S = len(eps_list), len(lrs), train_keys.shape[0]
    progress(f"n={n}, d={d}: d-dim sweeps (none, pca-rank)")
    loss = {}  # (method, variant) -> (E, S, P) original-data losses
    calls = 1  # the none sweep is one chunk
    grid = lambda m: np.repeat(noise[m].loc[eps_list].to_numpy(), P)  # noqa: E731  (ε-major points)
    lr_grid = np.tile(lrs, E)
    p0 = cfg_d.model.init(train_keys[0])
    # d-dim, shared data: none on S; pca-rank and ptr on A_kA_kᵀS (same compiled function, chunks of
    # E·P points).
    res = sweep_points(
        cfg_d,
        p0,
        (x, y),
        train_keys,
        {field: grid(METHODS[0]), "learning_rate": lr_grid},
        eval_data=(x, y),
        chunk_size=E * P,
        return_params=False,
        **limits,
    )
    loss[METHODS[0]] = np.asarray(res.evaluation["loss"]).reshape(S, E, P).transpose(1, 0, 2)
    res = sweep_points(
        cfg_d,
        p0,
        (rank_data, y),
        train_keys,
        {field: grid(METHODS[1]), "learning_rate": lr_grid},
        eval_data=(x, y),
        chunk_size=E * P,
        return_params=False,
        **limits,
    )
    calls += 1
    loss[METHODS[1]] = np.asarray(res.evaluation["loss"]).reshape(S, E, P).transpose(1, 0, 2)

    progress(f"n={n}, d={d}: d-dim DP-PCA datasets")
    # d-dim, one dataset per (ε, seed): DP-PCA rank projections, fixed-size chunks of units.
    units = [(i, s) for i in range(E) for s in range(S)]
    x32 = np.asarray(x, np.float32)
    per_call = max(1, min(len(units), DATASET_BYTES // (4 * n * d)))
    b_rank = np.empty((E, S, P))
    first = None
    for start in range(0, len(units), per_call):
        chunk = units[start : start + per_call]
        if first is not None:  # first_chunk_only: the first chunk's losses stand for the others'
            for i, s in chunk:
                b_rank[i, s] = first
            continue
        chunk = chunk + [chunk[-1]] * (per_call - len(chunk))
        xs = np.empty((per_call, n, d), np.float32)  # filled in place: the chunk's only copy
        for u, (i, s) in enumerate(chunk):
            comps = releases[i][s].components.astype(np.float32)
            np.matmul(x32 @ comps, comps.T, out=xs[u])
        r = sweep_datasets(
            cfg_d,
            p0,
            xs,
            y,
            jnp.stack([train_keys[s] for _, s in chunk]),
            {field: [noise[METHODS[3]].loc[eps_list[i]] for i, _ in chunk]},
            {"learning_rate": lrs},
            eval_data=(x, y),
            chunk_size=per_call,
            **limits,
        )
        for (i, s), row in zip(chunk, r["loss"]):
            b_rank[i, s] = row
        if limits.get("first_chunk_only"):
            first = np.asarray(r["loss"])[0]
    loss[METHODS[3]] = b_rank
    calls += -(-len(units) // per_call)

    progress(f"n={n}, d={d}: k-dim sweep (pca-dim, dp_pca-dim)")
    # k-dim: pca-dim (A_kᵀS) and dp_pca-dim (Â_kᵀS per (ε, seed)) in one call; evaluating z on its
    # own features A_kᵀx is evaluating θ = A_k z on the original x.
    xs = np.stack([dim_data] * len(units) + [releases[i][s].data for i, s in units]).astype(
        np.float32
    )
    unit_keys = jnp.stack([train_keys[s] for _, s in units] * 2)
    vals = [noise[METHODS[2]].loc[eps_list[i]] for i, _ in units] + [
        noise[METHODS[4]].loc[eps_list[i]] for i, _ in units
    ]
    r = sweep_datasets(
        cfg_k,
        cfg_k.model.init(train_keys[0]),
        xs,
        y,
        unit_keys,
        {field: vals},
        {"learning_rate": lrs},
        chunk_size=len(vals),
        **limits,
    )
    calls += 1
    kd = np.asarray(r["loss"]).reshape(2, E, S, P)
    loss[METHODS[2]], loss[METHODS[4]] = kd[0], kd[1]
    return loss, calls
