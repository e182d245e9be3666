"""A small CNN on MNIST (N × 28 × 28 × 1) trained with Poisson DP-SGD at (ε = 3, δ = 1e-5).

Bring-your-own-model end to end: a flax.nnx CNN (the tanh network of Papernot et al. 2021,
"Tempered sigmoid activations for deep learning with differential privacy": conv 16@8×8 stride 2,
max-pool 2×2 stride 1, conv 32@4×4 stride 2, max-pool 2×2 stride 1, dense 32, dense 10; 26,010
parameters) wrapped by :func:`dpprep.frameworks.from_flax_nnx`, trained by
:func:`dpprep.algorithms.train` on image-shaped inputs with per-example clipping (the general
:func:`dpprep.clipping.clipped_grad` path), Poisson sampling at expected batch size ``B`` and the
noise multiplier the run's :class:`dpprep.plan.DPPlan` calibrates for the whole run.

Prints the calibrated z, test accuracy after every ``--eval-every`` epochs, and wall times
(compile included in the first chunk, reported separately). The literature reaches ≈ 95–98 % for
a DP CNN on MNIST at ε ≈ 3 (e.g. 98.1 % at ε = 2.93 for this network, Papernot et al. 2021, with
40 epochs); what this script prints is what this machine measured.

Run: ``python benchmarks/cnn_mnist.py [--epochs 10] > results/benchmarks/cnn_mnist.txt``
(needs the ``frameworks`` extra and MNIST: ``python -m dpprep.data fetch mnist``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax
import numpy as np
from flax import nnx

import machine  # benchmarks/machine.py: the script's own directory is on sys.path
from dpprep import data, frameworks, sweeps
from dpprep.algorithms import Hyper, TrainConfig, train
from dpprep.plan import DPPlan, ExecutionPlan

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nets import TanhCNN  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=float, default=3.0)
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--learning-rate", type=float, default=2.0)
    parser.add_argument("--clip-norm", dest="l2_clip_norm", type=float, default=1.0)
    parser.add_argument("--eval-every", type=int, default=5, help="epochs between test evaluations")
    parser.add_argument(
        "--microbatch-size",
        type=int,
        default=None,
        help="per-example gradients held at once (default: the whole batch)",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(machine.start_line(), flush=True)

    mnist = data.load("mnist")
    x_train = mnist.x_train.reshape(-1, 28, 28, 1)
    x_test = mnist.x_test.reshape(-1, 28, 28, 1)
    model = frameworks.from_flax_nnx(TanhCNN(nnx.Rngs(args.seed)), loss="softmax_cross_entropy")
    params = model.init(None)
    size = sum(int(np.size(p)) for p in jax.tree_util.tree_leaves(params))
    n = x_train.shape[0]
    start = time.perf_counter()
    plan = DPPlan.create(
        "poisson",
        n,
        batch_size=args.batch_size,
        epochs=args.epochs,
        l2_clip_norm=args.l2_clip_norm,
        target_epsilon=args.epsilon,
        delta=args.delta,
    )
    z = plan.noise_multiplier
    print(
        f"MNIST CNN ({size:,} params), Poisson DP-SGD: n={n}, B={args.batch_size}, {args.epochs}"
        f" epochs = {plan.steps} steps, C={args.l2_clip_norm}, lr={args.learning_rate},"
        f" microbatch={args.microbatch_size}, z={z:.4f} for (ε={args.epsilon}, δ={args.delta})"
        f" [calibrated in {time.perf_counter() - start:.1f} s]"
    )
    # The run is cut into chunks of eval_every epochs (one compilation serves them all): each chunk
    # is the plan cut to its share of the steps (DPPlan.with_steps: the same Poisson rate, z, C and
    # padded batch), so the chunks compose to the plan above: their steps add up to its steps, and
    # its pad bounds the overflow probability of all of them together.
    chunks = args.epochs // args.eval_every
    chunk_steps = ExecutionPlan.create(
        "poisson", n, batch_size=args.batch_size, epochs=args.eval_every
    ).steps
    if args.epochs % args.eval_every or chunks * chunk_steps != plan.steps:
        raise SystemExit(
            "--epochs must be a multiple of --eval-every whose chunks take the plan's steps"
        )
    config = TrainConfig(
        model,
        Hyper(args.learning_rate),
        plan.with_steps(chunk_steps),
        microbatch_size=args.microbatch_size,
    )
    key = jax.random.key(args.seed)
    total = 0.0
    for i in range(chunks):
        start = time.perf_counter()
        params, _ = train(config, params, (x_train, mnist.y_train), jax.random.fold_in(key, i))
        jax.block_until_ready(params)
        took = time.perf_counter() - start
        total += took
        acc = float(sweeps.evaluate(model, params, x_test, mnist.y_test)["accuracy"])
        note = " (includes compilation)" if i == 0 else ""
        print(
            f"epoch {(i + 1) * args.eval_every:3d}: test accuracy {100 * acc:.2f} %, "
            f"{took:.1f} s for {args.eval_every} epochs{note}",
            flush=True,
        )
    print(
        f"final test accuracy {100 * acc:.2f} % at (ε={args.epsilon}, δ={args.delta}); "
        f"training wall time {total:.0f} s on {jax.devices()[0].device_kind} "
        f"({jax.device_count()} device(s))"
    )
    print(machine.end_line())


if __name__ == "__main__":
    main()
