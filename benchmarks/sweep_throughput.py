"""Roofline of the flat-axis sweep: its achieved FLOP/s against this machine's float32 matmul rate.

**Workload.** The 100-run sweep of the issue: 10 seeds x 10 learning rates (the learning rates
are one flat axis of P = 10 points of :func:`dpprep.sweeps.sweep_points`, vmapped under the 10
seeds), softmax regression, DP-SGD with Poisson sampling at expected batch size B = 1024 (padded
to ``pad`` rows, :func:`dpprep.sampling.poisson_pad_size`), clip norm C = 1, noise multiplier
z = 1, fast clipping path, 2 epochs of MNIST-shaped random data (n = 60,000 x d = 784 float32 in
[0, 1], K = 10 classes): ``T = ⌈2n/B⌉ = 118`` steps per run.

**FLOPs, counted analytically** (a multiply-add is 2 FLOPs). Runs of one seed share the seed's
Poisson batch (common random numbers), so per step the sweep does, for each seed:

* the batch gather and the per-row feature norms ``||x_i||²`` of the ``pad`` gathered rows: once
  per seed, shared by its P points: ``2·pad·d``;
* per point, the forward logits ``X·W_p`` and the clipped-sum transpose product
  ``Xᵀ(s ⊙ R_p)``: ``2·pad·d·K`` each. With the points stacked these are the two products
  ``(pad × d) @ (d × P·K)`` and ``(d × pad) @ (pad × P·K)``.

so ``FLOPs = T · S · (4·pad·d·P·K + 2·pad·d)`` with S seeds. Everything else (softmax residuals
``O(pad·P·K)``, the seed's noise draw and the update ``O(P·d·K)``, the Poisson draw ``O(n)``) is
lower order and not counted, so the achieved rate is a lower bound on the work done per second.

**Roofline.** The sweep's work is (almost all) those two matrix products, at those shapes: a thin
``P·K = 100``-column product over ``pad ≈ 1,250`` rows, which no CPU runs at the rate of a large
square product (less reuse per byte loaded). So the roofline of this workload is the machine's
float32 rate *on the same shapes*, measured in the same run by jitted functions doing exactly the
sweep's dominant products and nothing else: each step's ``(pad × d) @ (d × P·K)`` and
``(d × pad) @ (pad × P·K)`` for all S seeds, either batched over the seeds (as the sweep's vmap
runs them) or one seed after the other, whichever is faster, for the sweep's T steps in a
``lax.scan`` (each step's operands depend on the previous step, so nothing is hoisted). Each is
timed with ``block_until_ready`` in each of ``REPEATS`` rounds, interleaved with the timed sweep
and loop: on a machine shared with other processes (the 2-core CPU these numbers come from), a
measurement as long as the sweep's own products sees the same load as the sweep, where a short one
catches the quiet moments. The headline ``sweep roofline fraction`` is the median over the rounds
of the round's sweep FLOP/s over that round's rate (and the speed-up, of the round's loop time
over its sweep time).
For reference the script also times the single-step product pair (best of ``MATMUL_REPEATS``
calls) and a 2048³ square product (the machine's near-peak rate), and prints the sweep's
fraction of each: on a loaded machine those short best-of timings overstate what the machine
gives a long computation, so their fractions are lower bounds.

**Loop.** The same 100 runs as a Python loop over the jitted single-run function
(:func:`dpprep.algorithms.engine_fn`), timed in the same rounds; compile time is excluded from
both (warm-up call),
and the run fails unless the vmapped and looped parameters agree to ``TOLERANCE``.

Run: ``python benchmarks/sweep_throughput.py > results/benchmarks/sweep_throughput.txt``.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

import machine  # benchmarks/machine.py: the script's own directory is on sys.path
from dpprep import models
from dpprep.algorithms import Hyper, TrainConfig, check_data, engine_fn, traced, with_values
from dpprep.plan import DPPlan
from dpprep.sweeps import sweep_points

N, D, K = 60_000, 784, 10
# Small enough rates that the runs are not chaotic on random labels (at large rates float
# rounding differences between batched and single GEMMs grow exponentially); speed is unaffected.
SEEDS, LRS = 10, np.geomspace(0.01, 0.5, 10).astype(np.float32)
# Largest allowed |params_vmapped - params_loop|: float32 rounding of batched vs single GEMMs over
# 118 steps
# (7e-9 measured on a 2-core CPU) with a 100x margin, yet far below what a mismatched run would
# give (one step's noise alone is lr·z·C/B ≈ 1e-5 at the smallest rate).
TOLERANCE = 1e-6
REPEATS = 3  # interleaved rounds of the product loops, the sweep and the loop (medians)
MATMUL_REPEATS = 10  # short matmul timings per round (best of)
SQUARE = 2048


def timed(fn, *args) -> float:
    """Wall time of one call of ``fn(*args)``, waited for with ``block_until_ready``."""
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - start


def main() -> None:
    rng = np.random.default_rng(0)
    model = models.softmax_regression(D, K)
    params0 = model.init(None)
    x, y = check_data((rng.random((N, D), dtype=np.float32), rng.integers(0, K, size=N)), params0)
    plan = DPPlan.create(
        "poisson", N, batch_size=1024, epochs=2, l2_clip_norm=1.0, noise_multiplier=1.0, delta=1e-5
    )
    config = TrainConfig(model, Hyper(1.0), plan)
    steps, pad, points = plan.steps, plan.pad, len(LRS)
    keys = jax.random.split(jax.random.PRNGKey(0), SEEDS)
    runs = SEEDS * points
    pk = points * K
    flops = steps * SEEDS * (4 * pad * D * pk + 2 * pad * D)
    print(machine.start_line())
    print(
        f"{runs} runs = {SEEDS} seeds x {points} learning rates (one flat axis of {points} points),"
        f" {steps} steps each (Poisson B=1024 padded to {pad}, 2 epochs, C=1, z=1)"
    )
    print(
        f"FLOPs = T*S*(4*pad*d*P*K + 2*pad*d) = {steps}*{SEEDS}*(4*{pad}*{D}*{pk} + 2*{pad}*{D}) "
        f"= {flops:.4g}"
    )

    # The roofline: the sweep's two dominant products at its shapes, and a square product.
    xs = jnp.asarray(rng.random((SEEDS, pad, D), dtype=np.float32))
    ws = jnp.asarray(rng.random((SEEDS, D, pk), dtype=np.float32))
    rs = jnp.asarray(rng.random((SEEDS, pad, pk), dtype=np.float32))
    pair_batched = lambda a, w, r: (  # noqa: E731
        jnp.einsum("spd,sdk->spk", a, w),
        jnp.einsum("spd,spk->sdk", a, r),
    )
    pair_single = lambda a, w, r: (a @ w, a.T @ r)  # noqa: E731

    def steps_of(products):
        """T steps of one step's products for all seeds. Both products' right-hand operands
        depend on the sum of every entry of the previous step's results, so XLA can neither
        hoist a product out of the loop nor shrink it to a slice (the adds and sums are
        O(operand), ~1/1000 of the products' work)."""

        @jax.jit
        def run(a, w, r):
            def step(c, _):
                fwd, bwd = products(a, w + c, r + c)
                return c + 1e-30 * (jnp.sum(fwd) + jnp.sum(bwd)), None

            return jax.lax.scan(step, jnp.float32(0), None, length=steps)[0]

        return run

    per_seed = lambda a, w, r: jax.lax.map(lambda t: pair_single(*t), (a, w, r))  # noqa: E731
    loops = {"batched": steps_of(pair_batched), "one seed at a time": steps_of(per_seed)}
    one_step = jax.jit(pair_single)
    sq = jnp.asarray(rng.random((SQUARE, SQUARE), dtype=np.float32))
    square = jax.jit(lambda a: a @ a)
    pair_flops = 4 * pad * D * pk  # one seed, one step
    product_flops = steps * SEEDS * pair_flops

    def sweep_once():
        return sweep_points(config, params0, (x, y), keys, {"learning_rate": LRS})

    result = sweep_once()  # compile (each function below is compiled by its first call)
    for fn in loops.values():
        timed(fn, xs, ws, rs)
    timed(one_step, xs[0], ws[0], rs[0])
    timed(square, sq)
    loop_fn = jax.jit(engine_fn(config))
    hypers = [with_values(traced(config), {"learning_rate": lr}) for lr in jnp.asarray(LRS)]
    jax.block_until_ready(loop_fn(hypers[0], params0, x, y, keys[0]))  # compile

    def loop_once():
        out = [loop_fn(h, params0, x, y, k) for k in keys for h in hypers]
        jax.block_until_ready(out)
        return out

    t_one_step = t_square = float("inf")
    rounds: list[dict[str, float]] = []
    for _ in range(REPEATS):  # interleaved: product loops, short matmuls, the sweep, the loop
        this = {name: timed(fn, xs, ws, rs) for name, fn in loops.items()}
        for _ in range(MATMUL_REPEATS):
            t_one_step = min(t_one_step, timed(one_step, xs[0], ws[0], rs[0]))
        for _ in range(MATMUL_REPEATS // 2):
            t_square = min(t_square, timed(square, sq))
        start = time.perf_counter()
        result = sweep_once()  # returns host (numpy) arrays: synchronous
        this["sweep"] = time.perf_counter() - start
        start = time.perf_counter()
        results = loop_once()
        this["loop"] = time.perf_counter() - start
        rounds.append(this)
    median = lambda values: float(np.median(list(values)))  # noqa: E731
    rates = {name: product_flops / median(r[name] for r in rounds) for name in loops}
    rate_shape = max(rates.values())
    rate_one_step = pair_flops / t_one_step
    rate_square = 2 * SQUARE**3 / t_square
    t_sweep = median(r["sweep"] for r in rounds)
    t_loop = median(r["loop"] for r in rounds)
    rate_sweep = flops / t_sweep
    # Each round's ratios, then their median: both sides of a ratio saw the same load.
    fraction = median(
        (flops / r["sweep"]) / max(product_flops / r[name] for name in loops) for r in rounds
    )
    speedup = median(r["loop"] / r["sweep"] for r in rounds)

    diff = max(  # over every parameter leaf (w and b) of every run
        float(
            np.max(
                np.abs(
                    np.stack([np.asarray(p[name]) for p, _ in results]).reshape(v.shape)
                    - np.asarray(v)
                )
            )
        )
        for name, v in result.params.items()
    )
    print(f"max |params_vmapped - params_loop| = {diff:.2e} (tolerance {TOLERANCE:.0e})")
    if not diff < TOLERANCE:
        raise SystemExit(f"vmapped sweep and loop disagree: {diff:.2e} >= {TOLERANCE:.0e}")
    print(
        f"same-shape products ((pad x d) @ (d x {pk}) and (d x pad) @ (pad x {pk}), {SEEDS} seeds, "
        f"{steps} steps): "
        + ", ".join(f"{name} {rate / 1e9:.1f}" for name, rate in rates.items())
        + f" GFLOP/s; roofline {rate_shape / 1e9:.1f} GFLOP/s"
    )
    print(
        f"short best-of matmul rates: one step's pair for one seed {rate_one_step / 1e9:.1f}"
        f" GFLOP/s, {SQUARE}^3 square {rate_square / 1e9:.1f} GFLOP/s"
    )
    print(
        f"vmapped sweep: {t_sweep:.2f} s, {runs / t_sweep:.2f} runs/s, {rate_sweep / 1e9:.1f}"
        " GFLOP/s"
    )
    print(f"loop:          {t_loop:.2f} s, {runs / t_loop:.2f} runs/s")
    print(
        f"fraction of the short best-of rates: one-step pair {rate_sweep / rate_one_step:.2f}, "
        f"{SQUARE}^3 square {rate_sweep / rate_square:.2f}"
    )
    print(f"sweep speedup vmapped/loop: {speedup:.1f} (median of {REPEATS} rounds' ratios)")
    print(f"sweep roofline fraction: {fraction:.2f} (median of {REPEATS} rounds' ratios)")
    print(machine.end_line())


if __name__ == "__main__":
    main()
