"""Time per step of non-private SGD vs DP-SGD (fast GLM clipping path, layer taps, vmap path).

MNIST-shaped random data (60,000 x 784 float32 in [0, 1], 10 classes), softmax regression, at
batch sizes 256, 1024 and 4096, measured side by side (interleaved rounds; times are medians, and
each ratio is the median of the rounds' ratios to the non-private step timed in the same round):

* non-private: the textbook step, ``jax.grad`` of the mean loss on a shuffled fixed-size batch
  plus plain SGD;
* DP-SGD fast / taps / vmap: :mod:`dpprep.algorithms` with Poisson sampling at expected batch size B
  (a fresh O(n) Poisson draw per step, the batch padded to ``pad`` rows of the run's
  :class:`dpprep.plan.DPPlan`, mask), per-example clipping (C = 1) by the given path
  (``clip_method``: the GLM fast path with its overflow-safe row norms; the general layer taps of
  :mod:`dpprep.taps`, which any network's dense layers take; ``vmap(grad)``), Gaussian noise
  (z = 1).

Each timing is a jitted ``lax.scan`` of ``STEPS`` steps (compile excluded, ``block_until_ready``)
divided by ``STEPS``. The fixed per-step cost of the Poisson draw over all n records weighs most
at small B; the issue's bound is on B = 4096 (last line, at most 1.2).
Run: ``python benchmarks/step_overhead.py > results/benchmarks/step_overhead.txt``.
"""

from __future__ import annotations

import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import machine  # benchmarks/machine.py: the script's own directory is on sys.path
from dpprep import models
from dpprep.algorithms import Hyper, TrainConfig, check_data, engine_fn, traced
from dpprep.plan import DPPlan

N, D, K = 60_000, 784, 10
BATCHES = (256, 1024, 4096)
STEPS = 40
ROUNDS = 15


def nonprivate_fn(model, batch_size, steps):
    """Plain SGD on shuffled fixed-size batches (a fresh permutation per epoch)."""
    epochs = -(-steps * batch_size // N)

    @jax.jit
    def run(params, x, y, key):
        perms = [jax.random.permutation(jax.random.fold_in(key, e), N) for e in range(epochs)]
        idx = jnp.concatenate(perms)[: steps * batch_size].reshape(steps, batch_size)

        def step(p, i):
            g = jax.grad(model.loss)(p, x[i], y[i])
            return jax.tree_util.tree_map(lambda a, b: a - 0.1 * b, p, g), None

        return jax.lax.scan(step, params, idx)[0]

    return run


def dp_plan(batch_size, steps):
    """Poisson DP-SGD at expected batch size B for ``steps`` steps, C = 1, z = 1 (δ = 1e-5)."""
    return DPPlan.create(
        "poisson",
        N,
        batch_size=batch_size,
        steps=steps,
        l2_clip_norm=1.0,
        noise_multiplier=1.0,
        delta=1e-5,
    )


def dp_fn(model, batch_size, steps, method):
    config = TrainConfig(model, Hyper(0.1), dp_plan(batch_size, steps), clip_method=method)
    fn = jax.jit(engine_fn(config))
    values = traced(config)
    return lambda params, x, y, key: fn(values, params, x, y, key)[0]


def timed(fn, *args) -> float:
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - start


def main() -> None:
    rng = np.random.default_rng(0)
    x_np = rng.random((N, D), dtype=np.float32)
    y_np = rng.integers(0, K, size=N).astype(np.int32)
    model = models.softmax_regression(D, K)
    params = model.init(None)
    x, y = check_data((x_np, y_np), params)
    key = jax.random.PRNGKey(0)
    print(machine.start_line())
    print(
        f"data {N}x{D} float32, {K} classes; softmax regression; {STEPS} steps per timing, "
        f"medians of {ROUNDS} interleaved rounds (ratios: median of the rounds' ratios)"
    )
    print(
        f"{'B':>6} {'pad':>6} {'nonprivate ms':>14} {'dp fast ms':>11} {'dp taps ms':>11} "
        f"{'dp vmap ms':>11} {'fast/np':>8} {'taps/np':>8} {'vmap/np':>8}"
    )
    ratio_4096 = float("nan")
    for b in BATCHES:
        fns = {
            "np": nonprivate_fn(model, b, STEPS),
            "fast": dp_fn(model, b, STEPS, "fast"),
            "taps": dp_fn(model, b, STEPS, "taps"),
            "vmap": dp_fn(model, b, STEPS, "vmap"),
        }
        for fn in fns.values():  # compile
            timed(fn, params, x, y, key)
        times: dict[str, list[float]] = {name: [] for name in fns}
        for r in range(ROUNDS):
            for name, fn in fns.items():
                times[name].append(timed(fn, params, x, y, jax.random.PRNGKey(r + 1)) / STEPS)
        ms = {name: 1e3 * statistics.median(t) for name, t in times.items()}
        ratio = {
            name: statistics.median(a / b for a, b in zip(times[name], times["np"])) for name in fns
        }
        pad = dp_plan(b, STEPS).pad
        print(
            f"{b:>6} {pad:>6} {ms['np']:>14.3f} {ms['fast']:>11.3f} {ms['taps']:>11.3f} "
            f"{ms['vmap']:>11.3f} {ratio['fast']:>8.2f} {ratio['taps']:>8.2f}"
            f" {ratio['vmap']:>8.2f}",
            flush=True,
        )
        if b == 4096:
            ratio_4096 = ratio["fast"]
    print(f"overhead fast/nonprivate at B=4096: {ratio_4096:.2f}")
    print(machine.end_line())


if __name__ == "__main__":
    main()
