"""Sun, Suresh & Menon (2024) Table 2's unit: the exact all-pairs diameter of a feature matrix
(blocked Gram matrices) and the distances of the unit-normalised rows to their mean."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from dpprep import dpsgdf

from .config import BLOCK


@jax.jit
def _block_min(
    a: jax.Array, b: jax.Array, na: jax.Array, nb: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Largest squared distance between rows of ``a`` and ``b`` and its flat index."""
    with jax.default_matmul_precision("float32"):
        sq = na[:, None] + nb[None, :] - 2.0 * (a @ b.T)
    flat = jnp.argmax(sq)
    return sq.reshape(-1)[flat], flat


def diameter(x: np.ndarray, block: int = BLOCK) -> tuple[float, tuple[int, int]]:
    """Exact ``max_{i,j} ‖x_i − x_j‖`` over all pairs via blocked Gram matrices; returns the
    diameter (float64 re-evaluation of the maximising pair) and the pair."""
    x = np.asarray(x, np.float32)
    n = x.shape[0]
    sq = np.sum(x.astype(np.float64) ** 2, axis=1).astype(np.float32)
    starts = list(range(0, n, block))
    best, pair = -1.0, (0, 0)

    def pad(arr, s):
        part = arr[s : s + block]
        return np.pad(part, [(0, block - len(part))] + [(0, 0)] * (arr.ndim - 1))

    for bi, i in enumerate(starts):
        a, na = pad(x, i), pad(sq, i)
        # padded rows never win
        na = np.where(np.arange(block) < n - i, na, -np.inf).astype(np.float32)
        for j in starts[bi:]:
            b, nb = pad(x, j), pad(sq, j)
            nb = np.where(np.arange(block) < n - j, nb, -np.inf).astype(np.float32)
            value, flat = _block_min(a, b, na, nb)
            if float(value) > best:
                best, pair = float(value), (i + int(flat) // block, j + int(flat) % block)
    d64 = float(np.linalg.norm(x[pair[0]].astype(np.float64) - x[pair[1]].astype(np.float64)))
    return d64, pair


def stats(x: np.ndarray, *, diam_rows: int | None = None) -> dict:
    unit = dpsgdf.unit_normalize(x)
    u64 = unit.astype(np.float64)
    mu = u64.mean(axis=0)
    dist = np.linalg.norm(u64 - mu, axis=1)
    start = time.perf_counter()
    sub = unit if diam_rows is None else unit[:diam_rows]
    diam, pair = diameter(sub)
    return {
        "n": int(x.shape[0]),
        "d": int(x.shape[1]),
        "diam": diam,
        "diam_pair": list(pair),
        "diam_rows": int(sub.shape[0]),
        "max_dist": float(dist.max()),
        "mean_dist": float(dist.mean()),
        "mean_norm": float(np.linalg.norm(mu)),
        "diam_seconds": time.perf_counter() - start,
    }
