"""One device vs the flat point axis sharded over 4 host CPU devices (``sweep_points(devices=4)``).

The process asks XLA for 4 host platform devices (``--xla_force_host_platform_device_count=4``,
set here before jax is imported) and runs the same sweep twice: on one device and with each
chunk's points sharded over the 4 devices (a 1-D ``jax.sharding`` mesh with Auto axes; data,
keys and initial parameters replicated). Workload: MNIST-shaped random data (20,000 x 784
float32 in [0, 1], 10 classes), softmax regression, DP-SGD with Poisson sampling at expected
batch size 512 for 1 epoch, clip norm 1, noise multiplier 1, 2 seeds x 16 learning rates (one flat
axis of 16 points, 4 per device), evaluated on 2,000 test rows inside the call.

Host devices share this machine's cores, so on a small CPU the sharded sweep is not faster (XLA
then runs 4 per-device programs on the same cores instead of one intra-op-parallel program): the
script demonstrates the mechanism and that both give the same parameters (max abs difference
printed; the run fails above ``TOLERANCE``). On several accelerators, or hosts with
``jax.distributed``, the same call divides the points' work between devices.
Compile time is excluded (one warm-up call each); best of ``REPEATS``, interleaved.
Run: ``python benchmarks/multi_device.py > results/benchmarks/multi_device.txt``.
"""

from __future__ import annotations

import os

DEVICES = 4
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={DEVICES}"
).strip()

import time  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402

import machine  # noqa: E402  (benchmarks/machine.py: the script's own directory is on sys.path)
from dpprep import models  # noqa: E402
from dpprep.algorithms import Hyper, TrainConfig, check_data  # noqa: E402
from dpprep.plan import DPPlan  # noqa: E402
from dpprep.sweeps import sweep_points  # noqa: E402

N, N_TEST, D, K = 20_000, 2_000, 784, 10
SEEDS, LRS = 2, np.geomspace(0.01, 0.5, 16).astype(np.float32)
REPEATS = 3
# Largest allowed difference (parameters; test loss relative to its size): float32 rounding of
# matrix products of different local shapes (one device: 16 points per product; sharded: 4). A
# point trained with another point's rate would differ by ~1e-3.
TOLERANCE = 1e-6


def main() -> None:
    rng = np.random.default_rng(0)
    model = models.softmax_regression(D, K)
    params0 = model.init(None)
    x, y = check_data((rng.random((N, D), dtype=np.float32), rng.integers(0, K, size=N)), params0)
    eval_data = (rng.random((N_TEST, D), dtype=np.float32), rng.integers(0, K, size=N_TEST))
    plan = DPPlan.create(
        "poisson", N, batch_size=512, epochs=1, l2_clip_norm=1.0, noise_multiplier=1.0, delta=1e-5
    )
    config = TrainConfig(model, Hyper(1.0), plan)
    keys = jax.random.split(jax.random.PRNGKey(0), SEEDS)
    points = {"learning_rate": LRS}
    print(machine.start_line())
    print(f"devices {jax.devices()}")
    print(
        f"{SEEDS} seeds x {len(LRS)} points, {plan.steps} steps each (Poisson B=512 padded to"
        f" {plan.pad}, 1 epoch of {N}x{D}), evaluated on {N_TEST} test rows"
    )

    def run(devices):
        return sweep_points(
            config, params0, (x, y), keys, points, eval_data=eval_data, devices=devices
        )

    variants = {"1 device": None, f"{DEVICES} devices": DEVICES}
    results = {name: run(devices) for name, devices in variants.items()}  # compile
    best = dict.fromkeys(variants, float("inf"))
    for _ in range(REPEATS):
        for name, devices in variants.items():
            start = time.perf_counter()
            results[name] = run(devices)  # returns host arrays: synchronous
            best[name] = min(best[name], time.perf_counter() - start)
    one, sharded = results.values()
    params_diff = max(float(np.max(np.abs(one.params[k] - sharded.params[k]))) for k in one.params)
    loss_diff = float(np.max(np.abs(one.evaluation["loss"] - sharded.evaluation["loss"])))
    acc_diff = float(np.max(np.abs(one.evaluation["accuracy"] - sharded.evaluation["accuracy"])))
    for name, seconds in best.items():
        print(f"{name:>9}: {seconds:.2f} s ({SEEDS * len(LRS) / seconds:.1f} runs/s)")
    print(
        f"time {DEVICES} devices / 1 device: {best[f'{DEVICES} devices'] / best['1 device']:.2f} "
        f"(host devices share the same {os.cpu_count()} CPU cores)"
    )
    print(
        f"max abs difference 1 vs {DEVICES} devices: params {params_diff:.2e}, test loss"
        f" {loss_diff:.2e}, test accuracy {acc_diff:.2e} (tolerance {TOLERANCE:.0e}, relative for"
        " the loss)"
    )
    loss_scale = max(1.0, float(np.max(np.abs(one.evaluation["loss"]))))
    if not (params_diff < TOLERANCE and loss_diff < TOLERANCE * loss_scale):
        raise SystemExit(
            f"sharded and one-device sweeps disagree: {params_diff:.2e}, {loss_diff:.2e}"
        )

    print(machine.end_line())


if __name__ == "__main__":
    main()
