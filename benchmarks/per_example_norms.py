"""Per-example clipping without per-example autodiff: which path wins, per layer and batch size.

One layer (dense or convolution, with bias) followed by ``tanh`` and a fixed random read-out, so
the per-example loss is ``Σ r_i ⊙ tanh(layer(θ, x_i))``; the clipped sum
``Σ_i min(1, C/‖∇_θ ℓ_i‖)·∇_θ ℓ_i`` is computed three ways and timed side by side in one run
(interleaved rounds; each ratio is the median of the per-round ratios to the layer's non-private
gradient ``∇_θ Σ_i ℓ_i`` timed in the same round):

- **vmap**: :func:`dpprep.clipping.clipped_grad` with ``method="vmap"``: ``jax.vmap(jax.grad(ℓ))``
  materialises every per-example gradient (jax_privacy's way too);
- **taps**: the same with ``method="taps"`` (:mod:`dpprep.taps`, what ``"auto"`` runs): one
  batched backward pass to the layer's output; a dense layer's norms as ``‖a_i‖·‖δ_i‖`` and its
  clipped sum as one product ``aᵀ(s ⊙ δ)`` (ghost norm and book-keeping: Li et al. 2022, Bu et al.
  2023), a convolution's per-example kernel gradients as one contraction of strided views of its
  input with ``δ_i``;
- **ghost + 2nd pass** (a reference, not in the library): the convolution's norms by the ghost
  norm over its ``T`` output positions, ``‖a_iᵀ δ_i‖² = Σ_{t,s} (a_{it}·a_{is})(δ_{it}·δ_{is})``
  (Opacus's ghost clipping; ``T = 1`` for a dense layer), and the clipped sum by a second backward
  pass of the loss reweighted by the clip factors.

All three are checked to agree (to 1e-4 relative) before they are timed. The dense rows are the
tanh CNN's and an MLP's layers; the convolutions are the tanh CNN's two (:class:`nets.TanhCNN`)
and a ResNet-18 stage-1 3×3 convolution at 16×16.

Run: ``python benchmarks/per_example_norms.py > results/benchmarks/per_example_norms.txt``
(``--smoke``: tiny sizes, for the tests).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import machine  # noqa: E402  benchmarks/machine.py
from dpprep import clipping  # noqa: E402

CLIP = 1e-3  # small enough that every example is clipped: the clip factors are not all 1


class Layer(NamedTuple):
    name: str
    input_shape: tuple[int, ...]  # one example's
    kernel: tuple[int, ...]  # dense: (in, out); conv: (kh, kw, in, out)
    stride: int = 1
    padding: str | tuple[tuple[int, int], ...] = "VALID"


LAYERS = (
    Layer("dense 512→32 (CNN fc1)", (512,), (512, 32)),
    Layer("dense 784→256 (MLP)", (784,), (784, 256)),
    Layer("conv 8×8 1→16 /2, 28×28 (CNN conv1)", (28, 28, 1), (8, 8, 1, 16), 2, ((3, 3), (3, 3))),
    Layer("conv 4×4 16→32 /2, 13×13 (CNN conv2)", (13, 13, 16), (4, 4, 16, 32), 2),
    Layer("conv 3×3 64→64, 16×16 (ResNet)", (16, 16, 64), (3, 3, 64, 64), 1, ((1, 1), (1, 1))),
)
DIMENSIONS = ("NHWC", "HWIO", "NHWC")


def apply(layer: Layer, params, x):
    w, b = params
    if len(layer.kernel) == 2:
        return x @ w + b
    out = jax.lax.conv_general_dilated(
        x, w, (layer.stride,) * 2, layer.padding, dimension_numbers=DIMENSIONS
    )
    return out + b


def losses(layer: Layer, params, x, r):
    """Per-example losses ``Σ r_i ⊙ tanh(layer(θ, x_i))``."""
    out = jnp.tanh(apply(layer, params, x))
    return jnp.sum((out * r).reshape(x.shape[0], -1), axis=1)


def _factors(sq_norms):
    return jnp.minimum(1.0, CLIP / jnp.sqrt(sq_norms))


def nonprivate(layer, params, x, r):
    return jax.grad(lambda p: jnp.sum(losses(layer, p, x, r)))(params)


def _library(method):
    def clipped(layer, params, x, r):
        loss = lambda p, batch: losses(layer, p, batch[0], batch[1])[0]  # noqa: E731
        return clipping.clipped_grad(loss, l2_clip_norm=CLIP, method=method)(params, (x, r)).grad

    return clipped


def _taps(layer, params, x, r):
    """The layer's input rows (patches for a convolution: ``(b, T, k)``) and its output cotangent
    ``(b, T, c)`` from one batched forward and one backward to the output."""
    out = apply(layer, params, x)
    g = jax.grad(lambda z: jnp.sum(jnp.tanh(z) * r))(out)
    if len(layer.kernel) == 2:
        return x[:, None, :], g[:, None, :]
    kh, kw, cin, cout = layer.kernel
    patches = jax.lax.conv_general_dilated_patches(
        x, (kh, kw), (layer.stride,) * 2, layer.padding, dimension_numbers=DIMENSIONS
    )
    b = x.shape[0]
    return patches.reshape(b, -1, patches.shape[-1]), g.reshape(b, -1, cout)


def ghost(layer, params, x, r):
    a, g = _taps(layer, params, x, r)
    if a.shape[1] == 1:
        sq_w = jnp.sum(a[:, 0] ** 2, axis=1) * jnp.sum(g[:, 0] ** 2, axis=1)
    else:
        sq_w = jnp.sum(jnp.einsum("btk,bsk->bts", a, a) * jnp.einsum("btc,bsc->bts", g, g), (1, 2))
    per_b = jnp.sum(g, axis=1)
    c = _factors(sq_w + jnp.sum(per_b**2, axis=1))
    return jax.grad(lambda p: jnp.sum(c * losses(layer, p, x, r)))(params)


PATHS = {"vmap": _library("vmap"), "taps": _library("taps"), "ghost + 2nd pass": ghost}


def _time(fn, *args) -> float:
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - start


def measure(layer: Layer, batch: int, rounds: int, seed: int = 0) -> dict[str, tuple[float, float]]:
    """``{path: (median ms, median ratio to the non-private gradient)}``; raises if a path's
    clipped sum disagrees with the vmap path's."""
    keys = jax.random.split(jax.random.key(seed), 4)
    fan_in = int(np.prod(layer.kernel[:-1]))
    params = (
        jax.random.normal(keys[0], layer.kernel) / np.sqrt(fan_in),
        jax.random.normal(keys[1], (layer.kernel[-1],)) * 0.1,
    )
    x = jax.random.normal(keys[2], (batch, *layer.input_shape))
    r = jax.random.normal(keys[3], apply(layer, params, x).shape)
    fns = {"non-private": jax.jit(lambda p, x, r: nonprivate(layer, p, x, r))}
    fns |= {name: jax.jit(lambda p, x, r, f=f: f(layer, p, x, r)) for name, f in PATHS.items()}
    for fn in fns.values():  # compile outside the timed rounds
        jax.block_until_ready(fn(params, x, r))
    reference = fns["vmap"](params, x, r)
    for name in PATHS:
        got = fns[name](params, x, r)
        for want, have in zip(reference, got):
            scale = float(jnp.max(jnp.abs(want)))
            error = float(jnp.max(jnp.abs(want - have)))
            if not error <= 1e-4 * scale:
                raise AssertionError(f"{layer.name}, B={batch}: {name} off by {error / scale:.2e}")
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            times[name].append(_time(fn, params, x, r))
    base = times["non-private"]
    return {
        name: (
            1e3 * statistics.median(t),
            statistics.median(a / b for a, b in zip(t, base)),
        )
        for name, t in times.items()
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for the tests")
    args = parser.parse_args(argv)
    batches, rounds = ((8,), 2) if args.smoke else ((64, 256, 1024), 15)
    print(machine.start_line())
    print(
        f"\nms per clipped sum (median of {rounds} interleaved rounds) and ratio to the layer's"
        " non-private gradient (median of per-round ratios); * marks the fastest private path\n"
    )
    header = f"{'layer':40} {'B':>5} {'non-private':>12}" + "".join(f"{n:>22}" for n in PATHS)
    print(header)
    for layer in LAYERS:
        for batch in batches:
            got = measure(layer, batch, rounds)
            best = min(PATHS, key=lambda n: got[n][1])
            cells = "".join(
                f"{got[n][0]:10.2f} ms {got[n][1]:5.2f}x{'*' if n == best else ' ':1}"
                for n in PATHS
            )
            print(f"{layer.name:40} {batch:5d} {got['non-private'][0]:9.2f} ms{cells}", flush=True)
    print("\n" + machine.end_line())


if __name__ == "__main__":
    main()
