"""Runs per second of a 100-run sweep as one vmapped call vs a Python loop over the same runs.

10 seeds x 10 learning rates, softmax regression, DP-SGD (Poisson sampling at expected batch
size 1024, clip norm 1, noise multiplier 1, fast clipping path) for 2 epochs of MNIST-shaped
random data (60,000 x 784 float32 in [0, 1], 10 classes): 118 steps per run. The vmapped sweep
is :func:`dpprep.sweeps.make_sweep_fn` (what :func:`dpprep.sweeps.sweep` calls); the loop calls
the jitted single-run function 100 times. Compile time is excluded from both (one warm-up call
each), and both are timed with ``block_until_ready``; the two must give the same parameters: the
run fails unless their largest difference is below ``TOLERANCE``.
Run: ``python benchmarks/sweep_throughput.py``.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from dpprep import models
from dpprep.algorithms import Hyper, TrainConfig, check_data, make_train_fn, num_steps
from dpprep.sweeps import make_sweep_fn

N, D, K = 60_000, 784, 10
# Small enough rates that the runs are not chaotic on random labels (at large rates float
# rounding differences between batched and single GEMMs grow exponentially); speed is unaffected.
SEEDS, LRS = 10, np.geomspace(0.01, 0.5, 10).astype(np.float32)
# Largest allowed |params_vmapped - params_loop|: float32 rounding of batched vs single GEMMs over 118 steps
# (7e-9 measured on a 2-core CPU) with a 100x margin, yet far below what a mismatched run would
# give (one step's noise alone is lr·z·C/B ≈ 1e-5 at the smallest rate).
TOLERANCE = 1e-6


def main() -> None:
    rng = np.random.default_rng(0)
    model = models.softmax_regression(D, K)
    params0 = model.init(None)
    x, y = check_data((rng.random((N, D), dtype=np.float32), rng.integers(0, K, size=N)), params0)
    config = TrainConfig(model, Hyper(1.0, noise_multiplier=1.0, clip_norm=1.0), sampling="poisson",
                         batch_size=1024, epochs=2)
    keys = jax.random.split(jax.random.PRNGKey(0), SEEDS)
    lrs = jnp.asarray(LRS)
    runs = SEEDS * len(LRS)
    print(f"jax {jax.__version__}, backend {jax.default_backend()}; {runs} runs = {SEEDS} seeds x "
          f"{len(LRS)} learning rates, {num_steps(config, N)} steps each (B=1024, 2 epochs)")

    swept = make_sweep_fn(config, N, ["learning_rate"])
    jax.block_until_ready(swept(params0, x, y, keys, lrs))  # compile
    start = time.perf_counter()
    params_v, _ = jax.block_until_ready(swept(params0, x, y, keys, lrs))
    t_vmap = time.perf_counter() - start

    single = jax.jit(make_train_fn(config, N))
    hypers = [Hyper(lr, noise_multiplier=1.0, clip_norm=1.0) for lr in lrs]
    jax.block_until_ready(single(hypers[0], params0, x, y, keys[0]))  # compile
    start = time.perf_counter()
    results = [single(h, params0, x, y, k) for k in keys for h in hypers]
    jax.block_until_ready(results)
    t_loop = time.perf_counter() - start

    diff = max(  # over every parameter leaf (w and b) of every run
        float(np.max(np.abs(np.stack([np.asarray(p[name]) for p, _ in results]).reshape(v.shape)
                            - np.asarray(v))))
        for name, v in params_v.items())
    print(f"max |params_vmapped - params_loop| = {diff:.2e} (tolerance {TOLERANCE:.0e})")
    if not diff < TOLERANCE:
        raise SystemExit(f"vmapped sweep and loop disagree: {diff:.2e} >= {TOLERANCE:.0e}")
    print(f"vmapped: {t_vmap:.2f} s, {runs / t_vmap:.2f} runs/s")
    print(f"loop:    {t_loop:.2f} s, {runs / t_loop:.2f} runs/s")
    print(f"sweep speedup vmapped/loop: {t_loop / t_vmap:.1f}")


if __name__ == "__main__":
    main()
