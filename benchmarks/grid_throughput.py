"""DPSGD-F grid throughput: one (B = 4096, E = 1) group of 240 MNIST-shaped models on the
shared-batch engine vs the same models one by one through ``train``, side by side in one run.

The group is spec §7.3's: 4 C_F × 10 η × 6 (DPSGD, and DPSGD-F at ε_F ∈ {0.02 … 0.2}) at ε = 1,
δ = 1e-5, one seed, on MNIST-shaped data (60,000 × 784 unit-normalised random rows, 10 classes),
15 steps. The batched engine is :func:`dpprep.sweeps.sweep_points` on
:func:`dpprep.dpsgdf.grid_group` (one gathered batch and one matrix product per step for all 240
models, chunked to the default memory budget); the baseline calls :func:`dpprep.algorithms.train`
once per model with the same key and the same transform (``C_F``, ``μ̂``), on the model's own
:class:`dpprep.plan.DPPlan` (:func:`dpprep.dpsgdf.plan` at the point's noise multiplier: the
group's layout, so every per-model run shares one compilation). Compile time is excluded
from both (one warm-up call each); both give the same parameters (checked).

Also measured in the same run: this machine's float32 matrix-product rate (three square 2048³
products at full precision) timed alternately with the batched grid in the same five rounds, and
the batched engine's achieved FLOP/s (spec §7.2 count: 4·d·K FLOPs per expected example per step)
as a fraction of it: the median of the rounds' paired ratios, both sides under one load (a rate
measured before the rounds, on a quieter moment, once made the fraction 0.92 where it was 0.49).
From that fraction, the *projected* time of the full paper grid (§7.2: 50,400
configurations × 10 seeds, plus non-private SGD) on an H100 at the same fraction of an assumed
fp32 peak — a projection, not a measured GPU time.

Run: ``python benchmarks/grid_throughput.py [--models-alone N]`` (N: time only the first N models
one by one and scale up, default all 240). Last line:
``grid speedup batched/per-model: X.X; roofline fraction: Y.YY``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

import machine  # benchmarks/machine.py: the script's own directory is on sys.path
from dpprep import dpsgdf, sweeps
from dpprep.algorithms import Hyper, engine_fn, traced, train

N, D, K = 60_000, 784, 10
B, E, EPS = 4096, 1, 1.0
FEATURE_NORMS = (1.0, 10.0, 100.0, 1000.0)
LRS = (0.03125, 0.0625, 0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
EPS_FS = (0.02, 0.05, 0.1, 0.15, 0.2)
#: Assumed H100 SXM fp32 (non-tensor-core) peak, FLOP/s. TF32 tensor cores are ~7x that (dense).
H100_FP32_PEAK = 67e12


def paper_grid_flops() -> dict[str, float]:
    """Spec §7.2: 4·d·K FLOPs per example; every configuration of §6.4 with 10 seeds."""
    epochs = 20 + 40 + 80 + 160 + 320
    batch_sizes, seeds, eps = 7, 10, 2
    out = {}
    for name, (n, d, k) in {
        "mnist": (60_000, 784, 10),
        "fashion_mnist": (60_000, 784, 10),
        "cifar100": (50_000, 640, 100),
    }.items():
        per_epoch = n * 4 * d * k
        private = 240 * batch_sizes * epochs * per_epoch * seeds * eps
        nonprivate = 40 * batch_sizes * epochs * per_epoch * seeds
        out[name] = private + nonprivate
    out["total"] = sum(out.values())
    return out


#: The machine's reference product (float32, full precision), timed in the same rounds as the grid.
MATMUL = (2048, 2048, 2048)
MATMUL_REPS = 3
ROUNDS = 5


def matmul_timer() -> tuple[Callable[[], float], float]:
    """A timer of :data:`MATMUL_REPS` float32 products of :data:`MATMUL` (compiled, warm) and the
    FLOPs it times."""
    m, k, n = MATMUL
    rng = np.random.default_rng(0)
    a = jnp.asarray(rng.random((m, k), dtype=np.float32))
    b = jnp.asarray(rng.random((k, n), dtype=np.float32))
    f = jax.jit(lambda a, b: jnp.dot(a, b, precision="highest"))
    jax.block_until_ready(f(a, b))

    def seconds() -> float:
        start = time.perf_counter()
        for _ in range(MATMUL_REPS):
            out = f(a, b)
        jax.block_until_ready(out)
        return time.perf_counter() - start

    return seconds, 2.0 * m * k * n * MATMUL_REPS


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models-alone", type=int, default=None)
    parser.add_argument("--out", type=Path, default=Path("results/benchmarks/grid_throughput.json"))
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    unit = dpsgdf.unit_normalize(rng.random((N, D), dtype=np.float32))
    y = rng.integers(0, K, size=N)
    keys = jax.random.split(jax.random.key(0), 1)
    models = dpsgdf.grid_models(["dpsgdf", "dpsgd"], FEATURE_NORMS, LRS, EPS_FS, EPS)
    start_line = machine.start_line()
    print(start_line)
    print(f"{len(models)} models, B={B}, E={E}")
    start = time.perf_counter()
    group = dpsgdf.grid_group("bench", models, B, E, N, unit.astype(np.float64).mean(0), keys)
    plan = group.config.plan
    print(
        f"calibration of {len({(m.method, m.eps_F) for m in models})} noise multipliers: "
        f"{time.perf_counter() - start:.1f} s; {plan.steps} steps, padded batch {plan.pad}"
    )
    params0 = group.config.model.init(None)

    def batched():
        return sweeps.sweep_points(
            group.config, params0, (unit, y), keys, group.points, per_seed=group.per_seed
        )

    res = batched()  # compile (and warm up)

    def batched_seconds() -> float:
        nonlocal res
        start = time.perf_counter()
        res = batched()
        jax.block_until_ready(res.params)
        return time.perf_counter() - start

    # The grid and the machine's reference product, timed alternately in the same rounds: the
    # roofline fraction is the median of the rounds' paired ratios, both sides under one load.
    matmul_seconds, matmul_flops = matmul_timer()
    t_batched, t_matmul, paired = machine.paired_median(batched_seconds, matmul_seconds, ROUNDS)

    alone = models if args.models_alone is None else models[: args.models_alone]
    configs = []
    for p, m in enumerate(alone):
        shift = group.points["feature_shift"][0, p] if m.method == "dpsgdf" else None
        hyper = Hyper(
            m.learning_rate, extra={"feature_scale": m.feature_norm, "feature_shift": shift}
        )
        # The point's own plan: its noise multiplier (as the sweep runs it) and, for DPSGD-F, its
        # private mean's event; the same layout as the group's, so one compilation serves them all.
        own = dpsgdf.plan(
            m.config(B, E), N, noise_multiplier=float(group.points["noise_multiplier"][p])
        )
        configs.append(dataclasses.replace(group.config, hyper=hyper, plan=own))
    jax.block_until_ready(train(configs[0], params0, (unit, y), keys[0]))  # compile
    start = time.perf_counter()
    outs = [train(c, params0, (unit, y), keys[0])[0] for c in configs]
    jax.block_until_ready(outs)
    t_alone = (time.perf_counter() - start) * len(models) / len(alone)
    # The same calls given the data as JAX arrays: checked once (a JAX array cannot change) and
    # not copied to the device at every call, as a numpy array is.
    unit_j, y_j = jnp.asarray(unit), jnp.asarray(y)
    start = time.perf_counter()
    outs_j = [train(c, params0, (unit_j, y_j), keys[0])[0] for c in configs]
    jax.block_until_ready(outs_j)
    t_alone_j = (time.perf_counter() - start) * len(models) / len(alone)
    for a, b in zip(jax.tree_util.tree_leaves(outs), jax.tree_util.tree_leaves(outs_j)):
        if not np.array_equal(np.asarray(a), np.asarray(b)):
            raise SystemExit("train on JAX arrays differs from train on the same numpy data")

    # The same per-model runs without train's host-side input checks (the jitted single-run
    # function): how much of the per-model cost is checking and moving the data each call.
    single = jax.jit(engine_fn(group.config))
    xj, yj = jnp.asarray(unit), jnp.asarray(y, jnp.int32)
    jax.block_until_ready(single(traced(configs[0]), params0, xj, yj, keys[0]))
    sample = [traced(c) for c in configs[:: max(1, len(configs) // 60)]]
    start = time.perf_counter()
    jax.block_until_ready([single(values, params0, xj, yj, keys[0]) for values in sample])
    t_jit = (time.perf_counter() - start) * len(models) / len(sample)

    # Agreement. At large C_F·η the softmax saturates and which examples are clipped flips on
    # float32 rounding (batched and single products round differently), so differences can grow
    # there; the exact per-model equality is a unit test (tests/test_dpsgdf.py) on tame settings.
    # Here: the median over models must be at rounding level (a systematic mismatch fails), and
    # the worst model per C_F·η is reported.
    worst, worst_tame, diffs = 0.0, 0.0, []
    for p, out in enumerate(outs):
        diff = 0.0
        for which in ("last", "average"):
            for name in ("w", "b"):
                a, b = np.asarray(out[which][name]), np.asarray(res.params[which][name][0, p])
                diff = max(diff, float(np.max(np.abs(a - b)) / max(1e-6, float(np.max(np.abs(a))))))
        worst = max(worst, diff)
        diffs.append(diff)
        if alone[p].feature_norm * alone[p].learning_rate <= 10:
            worst_tame = max(worst_tame, diff)
    median = float(np.median(diffs))
    print(
        f"relative |params_batched - params_alone| over {len(outs)} models: median {median:.1e}, "
        f"max {worst_tame:.1e} where C_F*lr <= 10, max {worst:.1e} over all"
    )
    if not median < 1e-4:
        raise SystemExit(f"batched and per-model runs disagree systematically: median {median:.1e}")

    flops = len(models) * plan.steps * B * 4 * D * K
    achieved = flops / t_batched
    peak = matmul_flops / t_matmul
    fraction = (flops / matmul_flops) / paired  # median over rounds of achieved / reference
    grid = paper_grid_flops()
    projected = grid["total"] / (fraction * H100_FP32_PEAK)
    speedup = t_alone / t_batched
    print(
        f"batched: {t_batched:.2f} s for {len(models)} models ({achieved / 1e9:.1f} GFLOP/s by the"
        " §7.2 count)"
    )
    scaled = "" if len(alone) == len(models) else f" (first {len(alone)} timed, scaled)"
    print(
        f"per-model: {t_alone:.2f} s through train on numpy data{scaled} (checked and copied at"
        f" every call); {t_alone_j:.2f} s through train on the same data as JAX arrays (checked"
        f" once; speedup {t_alone_j / t_batched:.1f}); {t_jit:.2f} s through the jitted"
        f" single-run function without input checks (speedup {t_jit / t_batched:.1f})"
    )
    print(
        f"machine float32 matmul rate ({MATMUL[0]}x{MATMUL[1]} @ {MATMUL[1]}x{MATMUL[2]}, timed in"
        f" the grid's {ROUNDS} rounds): {peak / 1e9:.1f} GFLOP/s"
    )
    print(f"paper grid FLOPs (§7.2, 10 seeds, with non-private): {grid['total']:.3g}")
    print(
        f"PROJECTION (not a measurement): the paper grid on one H100 at {fraction:.2f} of an"
        f" assumed {H100_FP32_PEAK / 1e12:.0f} TFLOP/s fp32 peak: {projected / 3600:.2f} h"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "backend": jax.default_backend(),
                "device": jax.devices()[0].device_kind,
                "models": len(models),
                "steps": plan.steps,
                "pad": plan.pad,
                "seconds_batched": t_batched,
                "seconds_per_model_total": t_alone,
                "models_timed_alone": len(alone),
                "seconds_per_model_jax_arrays_total": t_alone_j,
                "speedup": speedup,
                "seconds_per_model_jit_total": t_jit,
                "speedup_vs_jit_single": t_jit / t_batched,
                "achieved_flops": achieved,
                "matmul_rate": peak,
                "roofline_fraction": fraction,
                "rounds": ROUNDS,
                "machine": start_line,
                "load_at_end": machine.end_line(),
                "paper_grid_flops": grid,
                "assumed_h100_fp32_peak": H100_FP32_PEAK,
                "projected_h100_hours": projected / 3600,
                "max_relative_param_difference": worst,
                "max_relative_param_difference_tame": worst_tame,
                "median_relative_param_difference": median,
            },
            indent=2,
        )
    )
    print(f"grid speedup batched/per-model: {speedup:.1f}; roofline fraction: {fraction:.2f}")
    print(machine.end_line())


if __name__ == "__main__":
    main()
