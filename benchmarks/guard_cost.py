"""What the non-finite guard and the zeroed padding cost an honest run, measured side by side.

Two pieces that every route goes through keep one record from leaking through a NaN or through a
padded slot: :func:`dpprep.clipping.nan_safe` (a per-example gradient that is not finite
contributes exactly 0 to the clipped sum) and :func:`dpprep.sampling.gather` (padded slots are
rows of zeros, not copies of record 0). This benchmark compiles each learner's
:func:`dpprep.algorithms.make_train_fn` twice in one process: as the library builds it, and with
both pieces replaced by their unguarded forms (the plain weighted sum; the gathered rows as they
come). The two compiled runs are timed in interleaved rounds (the order alternating), and the
reported ratio is the median over rounds of guarded / unguarded; on finite data both must return
bitwise the same parameters (checked). Learners, on MNIST-shaped random data, Poisson sampling:

* softmax regression, the GLM fast path (d = 784, expected B = 1024);
* an MLP 784-32-10 on the vmap path (B = 256);
* the tanh CNN of :mod:`nets` through flax.nnx (B = 64).

The issue's bound: each ratio at most 1.03.
Run: ``python benchmarks/guard_cost.py > results/benchmarks/guard_cost.txt``.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

import machine  # benchmarks/machine.py: the script's own directory is on sys.path
from dpprep import clipping, frameworks, models, sampling
from dpprep.algorithms import Hyper, TrainConfig, make_train_fn
from step_overhead import D, K, N, dp_plan


@contextlib.contextmanager
def unguarded() -> Iterator[None]:
    """Trace with the guard and the padding's zeros taken out (the code before they existed)."""
    saved = clipping.nan_safe, sampling.gather

    def plain_sum(finite: Any, contract: Callable[[Any], Any], rows: Any, *_: Any) -> Any:
        del finite
        return contract(rows)

    def gather_as_is(data: Any, idx: Any, mask: Any) -> Any:
        del mask
        return data if idx is None else jax.tree_util.tree_map(lambda a: jnp.asarray(a)[idx], data)

    clipping.nan_safe, sampling.gather = plain_sum, gather_as_is
    try:
        yield
    finally:
        clipping.nan_safe, sampling.gather = saved


def compiled_run(
    model: Any, batch_size: int, steps: int, method: str, x: Any, y: Any
) -> tuple[Callable[[int], Any], str]:
    """The compiled run of ``model`` under step_overhead's plan, and its program's text."""
    plan = dp_plan(batch_size, steps)
    params = model.init(jax.random.key(0))
    config = TrainConfig(model, Hyper(0.1), plan, clip_method=method)
    fn = jax.jit(make_train_fn(config, params))
    key = jax.random.key(1)
    compiled = fn.lower(params, x, y, key).compile()
    run = lambda r: compiled(params, x, y, jax.random.key(r))[0]  # noqa: E731
    return run, compiled.as_text()


def measure(name: str, build: Callable[[], Any], rounds: int) -> float:
    guarded, guarded_program = build()
    with unguarded():
        plain, plain_program = build()
    if guarded_program == plain_program:
        raise AssertionError(f"{name}: the guard was not taken out (the programs are the same)")
    same = all(
        bool(jnp.array_equal(a, b))
        for a, b in zip(jax.tree_util.tree_leaves(guarded(0)), jax.tree_util.tree_leaves(plain(0)))
    )
    if not same:
        raise AssertionError(
            f"{name}: the guarded run differs from the unguarded one on finite data"
        )
    times: dict[str, list[float]] = {"guarded": [], "plain": []}
    for r in range(rounds):
        order = [("guarded", guarded), ("plain", plain)]
        for label, run in order if r % 2 == 0 else order[::-1]:
            start = time.perf_counter()
            jax.block_until_ready(run(r + 1))
            times[label].append(time.perf_counter() - start)
    ratios = np.array(times["guarded"]) / np.array(times["plain"])
    q1, median, q3 = np.percentile(ratios, [25, 50, 75])
    plain_ms, guarded_ms = 1e3 * np.median(times["plain"]), 1e3 * np.median(times["guarded"])
    print(
        f"{name:34s} {plain_ms:10.2f} {guarded_ms:10.2f} {median:8.4f}"
        f"  [{q1:.4f}, {q3:.4f}]  bitwise equal: {same}",
        flush=True,
    )
    return float(median)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=41, help="interleaved rounds per learner")
    parser.add_argument("--steps", type=int, default=20, help="steps per timed run")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    x_flat = jnp.asarray(rng.random((N, D), dtype=np.float32))
    y = jnp.asarray(rng.integers(0, K, N).astype(np.int32))
    x_img = x_flat.reshape(N, 28, 28, 1)
    print(machine.start_line())
    print(
        f"{args.steps} steps per timed run, {args.rounds} interleaved rounds, median of paired"
        " ratios guarded/unguarded [interquartile range]"
    )
    print(f"{'learner':34s} {'plain ms':>10} {'guarded ms':>10} {'ratio':>8}")

    from flax import nnx
    from nets import TanhCNN

    cnn = frameworks.from_flax_nnx(
        TanhCNN(nnx.Rngs(0)), loss=optax.losses.softmax_cross_entropy_with_integer_labels
    )
    learners = [
        (
            "softmax regression, fast, B=1024",
            lambda: compiled_run(
                models.softmax_regression(D, K), 1024, args.steps, "fast", x_flat, y
            ),
        ),
        (
            "MLP 784-32-10, vmap, B=256",
            lambda: compiled_run(
                models.mlp(D, 32, K, activation="tanh"), 256, args.steps, "vmap", x_flat, y
            ),
        ),
        ("tanh CNN (nnx), vmap, B=64", lambda: compiled_run(cnn, 64, args.steps, "vmap", x_img, y)),
    ]
    worst = max(measure(name, build, args.rounds) for name, build in learners)
    print(f"largest ratio {worst:.4f} (bound 1.03)")
    print(machine.end_line())


if __name__ == "__main__":
    main()
