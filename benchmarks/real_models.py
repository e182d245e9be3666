"""Real models at speed and scale: dpprep's drivers against their own step, jax_privacy and Opacus.

Measured side by side in one run (interleaved rounds, medians; the machine's load is printed):

1. **The tanh CNN** (:class:`nets.TanhCNN`, 26,010 parameters, MNIST shapes, random data), ms per
   step at B ∈ {64, 256, 1024}: a JAX non-private step (``jax.grad`` of the mean loss + SGD); the
   dpprep step API (a Python loop over jitted :func:`dpprep.step.dp_step`); :func:`dpprep.train`
   as it runs now (host calls of a few straight-line steps, ``steps_per_call="auto"``) and as one
   scan (``steps_per_call=None``, the driver before) and on the ``vmap`` path
   (``clip_method="vmap"``: per-example gradients by ``vmap(grad)``, the path before the layer
   taps of :mod:`dpprep.taps`), all on a full batch of ``B`` rows (the same
   work per step); ``train`` with Poisson sampling on n = 60,000 (a padded batch: ``pad`` slots),
   without and with microbatches of 64; jax_privacy 2.0's ``clipped_grad`` + Gaussian noise + SGD
   at its best microbatch size; Opacus (ghost clipping) and the same net's plain torch step when
   torch and opacus are installed in the benchmark's own environment (``make bench-env``; the
   locks do not carry torch). Every ratio is the median over rounds of the round's ratio to a
   reference timed in that round: the JAX non-private step in the main table; each library's own
   non-private step in the DP-overhead table (torch's for Opacus); ``train`` in the wall-time
   table. Then the minor page faults per step of ``train`` (fresh pages XLA:CPU touches).
2. **Sweeps vs loops:** 4 seeds × 4 learning rates of a flax.nnx MLP (Adult shapes) and of the
   CNN as one :func:`dpprep.sweeps.sweep` (as it runs on this backend, and with its runs batched)
   against a Python loop of ``train`` calls.
3. **Poisson's padded work:** the slots a step computes over the realised batch, without
   microbatches (every padded slot) and with microbatches of 64 (padding-only ones skipped).
4. **Memory** (``memory_analysis`` of the compiled clipped gradient: temporaries needed at once)
   for the CNN at B = 1024 and ResNet-18 (:class:`nets.ResNet18`, 11.2M parameters, CIFAR-10
   shapes) at Poisson B = 4096, whole batch vs microbatches of 64.
5. **The clip pad** (:func:`dpprep.clipping.rounding_pad` of :func:`dpprep.clipping.norm_roundings`)
   at 26k, 1M and 11M parameters against the sequential worst case it replaced.
6. **ResNet-18 at B = 4096 with microbatches of 64:** one real microbatched step timed at a
   small Poisson batch on this machine, and a FLOP-based projection for one GPU, labelled as such.

Run: ``python benchmarks/real_models.py > results/benchmarks/real_models.txt`` (``--smoke``: tiny
sizes, for the tests). On a GPU machine the same command prints the same tables.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nets import ResNet18, TanhCNN, resnet18_flops_per_example  # noqa: E402

import machine  # benchmarks/machine.py: the script's own directory is on sys.path
from dpprep import clipping, frameworks, sweeps  # noqa: E402
from dpprep.algorithms import Hyper, TrainConfig, train  # noqa: E402
from dpprep.plan import DPPlan  # noqa: E402
from dpprep.step import dp_step  # noqa: E402

#: Peak dense float32-input matrix rates (TF32 tensor cores, JAX's default precision for float32
#: matmuls on NVIDIA GPUs) of the GPUs the projection names, from NVIDIA's data sheets (TFLOP/s).
GPU_PEAK_TFLOPS = {"H100 SXM (TF32, dense)": 494.7}
#: The share of that peak the projection assumes a convolutional network's training step sustains.
ASSUMED_UTILISATION = (0.2, 0.5)


@dataclasses.dataclass(frozen=True)
class Sizes:
    batches: tuple[int, ...] = (64, 256, 1024)
    n: int = 60_000
    steps: int = 8
    rounds: int = 5
    sweep_steps: int = 4
    mlp_n: int = 30_000
    mlp_steps: int = 60
    resnet_width: int = 64
    resnet_batch: int = 4096
    resnet_timed_batch: int = 64
    microbatch: int = 64
    jax_privacy_microbatches: tuple[int | None, ...] = (None, 64, 256)


SMOKE = Sizes(
    batches=(8,),
    n=256,
    steps=2,
    rounds=1,
    sweep_steps=2,
    mlp_n=256,
    mlp_steps=2,
    resnet_width=4,
    resnet_batch=32,
    resnet_timed_batch=8,
    microbatch=8,
    jax_privacy_microbatches=(None, 4),
)


def _median_ms(times: list[float], steps: int) -> float:
    return 1e3 * float(np.median(times)) / steps


def _interleaved(fns: dict[str, callable], rounds: int) -> dict[str, list[float]]:
    """Each function once to compile, then ``rounds`` rounds of one call each, interleaved."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return times


def _cnn():
    model = frameworks.from_flax_nnx(TanhCNN(nnx.Rngs(0)), loss="softmax_cross_entropy")
    return model, model.init(None)


def _data(rng, n, shape, classes):
    return (
        jnp.asarray(rng.random((n, *shape)), jnp.float32),
        jnp.asarray(rng.integers(0, classes, n)),
    )


def _opacus_step(batch: int, steps: int):
    """``(plain torch step, Opacus ghost clipping step)`` on the same CNN in torch, each running
    ``steps`` SGD steps on one batch; None when torch/opacus are not installed."""
    try:
        import torch
        from opacus import PrivacyEngine
    except ImportError:
        return None
    torch.set_num_threads(os.cpu_count() or 1)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(1, 16, 8, 2, padding=3)
            self.conv2 = torch.nn.Conv2d(16, 32, 4, 2)
            self.fc1 = torch.nn.Linear(32 * 4 * 4, 32)
            self.fc2 = torch.nn.Linear(32, 10)

        def forward(self, x):
            x = torch.nn.functional.max_pool2d(torch.tanh(self.conv1(x)), 2, 1)
            x = torch.nn.functional.max_pool2d(torch.tanh(self.conv2(x)), 2, 1)
            return self.fc2(torch.tanh(self.fc1(x.flatten(1))))

    x = torch.rand(batch, 1, 28, 28)
    y = torch.randint(0, 10, (batch,))
    criterion = torch.nn.CrossEntropyLoss()
    plain = Net()
    plain_optimizer = torch.optim.SGD(plain.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch)
    net = Net()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    engine = PrivacyEngine()
    net, optimizer, dp_criterion, loader = engine.make_private(
        module=net,
        optimizer=optimizer,
        data_loader=loader,
        criterion=torch.nn.CrossEntropyLoss(),  # its own: ghost clipping changes the reduction
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        grad_sample_mode="ghost",
        poisson_sampling=False,
    )

    def loop(net, optimizer, criterion):
        def run():
            for _ in range(steps):
                optimizer.zero_grad()
                loss = criterion(net(x), y)
                loss.backward()
                optimizer.step()

        return run

    return loop(plain, plain_optimizer, criterion), loop(net, optimizer, dp_criterion)


def cnn_table(sizes: Sizes, rng) -> None:
    import jax_privacy

    model, params0 = _cnn()
    x_all, y_all = _data(rng, sizes.n, (28, 28, 1), 10)
    s = sizes.steps
    print(
        f"\n## 1. The tanh CNN: ms per step ({s} steps per timing, median of {sizes.rounds}"
        " interleaved rounds)"
    )
    header = ["ms / step"] + [f"B = {b}" for b in sizes.batches]
    rows: dict[str, list[str]] = {}
    overhead: dict[str, list[float | None]] = {}
    wall: dict[str, list[float | None]] = {}
    faults: list[float] = []
    for b in sizes.batches:
        x, y = x_all[:b], y_all[:b]
        plan = DPPlan.create("full", b, steps=s, l2_clip_norm=1.0, noise_multiplier=1.0, delta=1e-5)
        config = TrainConfig(model, Hyper(0.1), plan)
        grad_fn = plan.clipped_grad(model)
        tx = plan.optimizer(optax.sgd(0.1), key=jax.random.key(0))
        step = jax.jit(
            lambda p, st, d, grad_fn=grad_fn, tx=tx: dp_step(p, st, d, grad_fn=grad_fn, tx=tx)[:2]
        )

        def step_api(step=step, tx=tx, x=x, y=y):
            p, st = (
                params0,
                tx.chained.init(params0),
            )  # a fresh state per timing (the plan's own init is once-only)
            for _ in range(s):
                p, st = step(p, st, (x, y))
            jax.block_until_ready(p)

        def loss(p, x, y):
            return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(model.apply(p, x), y))

        nonprivate = jax.jit(
            lambda p, x, y: jax.tree_util.tree_map(
                lambda a, g: a - 0.1 * g, p, jax.grad(loss)(p, x, y)
            )
        )

        def nonprivate_loop(x=x, y=y):
            p = params0
            for _ in range(s):
                p = nonprivate(p, x, y)
            jax.block_until_ready(p)

        poisson = DPPlan.create(
            "poisson",
            sizes.n,
            batch_size=b,
            steps=s,
            l2_clip_norm=1.0,
            noise_multiplier=1.0,
            delta=1e-5,
        )

        def run(config, data):
            return lambda: jax.block_until_ready(train(config, params0, data, jax.random.key(0))[0])

        fns = {
            NONPRIVATE_JAX: nonprivate_loop,
            "dpprep step API (clipped_grad + privatizer + dp_step)": step_api,
            TRAIN_NOW: run(config, (x, y)),
            "dpprep train (one scan, before)": run(
                dataclasses.replace(config, steps_per_call=None), (x, y)
            ),
            TRAIN_VMAP: run(dataclasses.replace(config, clip_method="vmap"), (x, y)),
            f"dpprep train, Poisson on n = {sizes.n} [pad]": run(
                TrainConfig(model, Hyper(0.1), poisson), (x_all, y_all)
            ),
            f"dpprep train, Poisson, microbatch {sizes.microbatch}": run(
                TrainConfig(model, Hyper(0.1), poisson, microbatch_size=sizes.microbatch),
                (x_all, y_all),
            ),
        }
        for m in sizes.jax_privacy_microbatches:
            if m is not None and m >= b:
                rows.setdefault(f"jax_privacy 2.0 clipped_grad, microbatch {m}", []).append("-")
                continue
            jp = jax_privacy.clipped_grad(
                lambda p, x, y: loss(p, x, y),
                l2_clip_norm=1.0,
                batch_argnums=(1, 2),
                microbatch_size=m,
            )

            @jax.jit
            def jp_step(p, key, x, y, jp=jp):
                g = jp(p, x, y)
                leaves, tree = jax.tree_util.tree_flatten(g)
                keys = jax.random.split(key, len(leaves))
                noisy = [
                    (leaf + jax.random.normal(k, leaf.shape)) / b for leaf, k in zip(leaves, keys)
                ]
                return jax.tree_util.tree_map(
                    lambda a, u: a - 0.1 * u, p, jax.tree_util.tree_unflatten(tree, noisy)
                )

            def jp_loop(jp_step=jp_step, x=x, y=y):
                p = params0
                for t in range(s):
                    p = jp_step(p, jax.random.key(t), x, y)
                jax.block_until_ready(p)

            fns[f"jax_privacy 2.0 clipped_grad, microbatch {m}"] = jp_loop
        torch_steps = _opacus_step(b, s)
        if torch_steps is not None:
            fns[NONPRIVATE_TORCH], fns[OPACUS] = torch_steps
        times = _interleaved(fns, sizes.rounds)
        for name, ts in times.items():
            ms = _median_ms(ts, s)
            cell = f"{ms:.1f} ({_paired(times, name, NONPRIVATE_JAX):.2f}x)" + (
                f" [pad {poisson.pad}]" if "[pad]" in name else ""
            )
            rows.setdefault(name, []).append(cell)
        overhead.setdefault("dpprep train (host calls)", []).append(
            _paired(times, TRAIN_NOW, NONPRIVATE_JAX)
        )
        overhead.setdefault("dpprep train, vmap path (before the taps)", []).append(
            _paired(times, TRAIN_VMAP, NONPRIVATE_JAX)
        )
        best_jp = min(
            (name for name in times if name.startswith("jax_privacy")),
            key=lambda name: float(np.median(times[name])),
        )
        overhead.setdefault("jax_privacy 2.0, best microbatch", []).append(
            _paired(times, best_jp, NONPRIVATE_JAX)
        )
        wall.setdefault("jax_privacy 2.0, best microbatch", []).append(
            _paired(times, best_jp, TRAIN_NOW)
        )
        if torch_steps is None:
            for name in (NONPRIVATE_TORCH, OPACUS):
                rows.setdefault(name, []).append("not installed")
            overhead.setdefault("Opacus ghost clipping", []).append(None)
            wall.setdefault("Opacus ghost clipping", []).append(None)
            wall.setdefault("torch non-private step", []).append(None)
        else:
            overhead.setdefault("Opacus ghost clipping", []).append(
                _paired(times, OPACUS, NONPRIVATE_TORCH)
            )
            wall.setdefault("Opacus ghost clipping", []).append(_paired(times, OPACUS, TRAIN_NOW))
            wall.setdefault("torch non-private step", []).append(
                _paired(times, NONPRIVATE_TORCH, NONPRIVATE_JAX)
            )
        faults.append(_minor_faults_per_step(fns[TRAIN_NOW], s))
    jp_rows = [name for name in rows if name.startswith("jax_privacy")]
    best = [
        min(
            (rows[name][i] for name in jp_rows if i < len(rows[name]) and rows[name][i] != "-"),
            key=lambda c: float(c.split()[0]),
        )
        for i in range(len(sizes.batches))
    ]
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for name, cells in rows.items():
        if name.startswith("jax_privacy"):
            continue
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("| jax_privacy 2.0, best microbatch | " + " | ".join(best) + " |")
    for name in jp_rows:
        print(f"|   {name} | " + " | ".join(rows[name]) + " |")
    print(
        "(ratios: to the JAX non-private step, the median over rounds of the round's ratio;"
        " [pad]: Poisson's padded batch, whose padded slots are computed without microbatches)"
    )
    print(
        "\n### DP overhead: each library against its own non-private step (same rounds, median of"
        " the rounds' ratios)"
    )
    print("| DP overhead | " + " | ".join(header[1:]) + " |\n|" + "---|" * len(header))
    for name, ratios in overhead.items():
        print(f"| {name} | " + " | ".join(_ratio_cell(r) for r in ratios) + " |")
    print(
        "(dpprep and jax_privacy: against the JAX non-private step; Opacus: against the same net's"
        " plain torch step)"
    )
    print(
        "\n### Wall time against dpprep train (host calls), same rounds (< 1: faster than dpprep)"
    )
    print("| wall time | " + " | ".join(header[1:]) + " |\n|" + "---|" * len(header))
    for name, ratios in wall.items():
        print(f"| {name} | " + " | ".join(_ratio_cell(r) for r in ratios) + " |")
    print("(torch non-private step: against the JAX non-private step, the frameworks' own speed)")
    print(
        "minor page faults per step of dpprep train (host calls), one timed call: "
        + ", ".join(f"B = {b}: {f:,.0f}" for b, f in zip(sizes.batches, faults))
    )


NONPRIVATE_JAX = "JAX non-private step"
TRAIN_NOW = "dpprep train (host calls, now)"
TRAIN_VMAP = 'dpprep train, vmap path (clip_method="vmap", before the taps)'
NONPRIVATE_TORCH = "torch non-private step (same net)"
OPACUS = "Opacus ghost clipping (torch)"


def _paired(times: dict[str, list[float]], name: str, reference: str) -> float:
    """The median over rounds of ``name``'s time over ``reference``'s in the same round."""
    return float(np.median([a / b for a, b in zip(times[name], times[reference], strict=True)]))


def _ratio_cell(ratio: float | None) -> str:
    return "not installed" if ratio is None else f"{ratio:.2f}x"


def _minor_faults_per_step(fn: Callable[[], None], steps: int) -> float:
    """Minor page faults of the process during one call of ``fn`` (fresh pages touched), per
    step."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    fn()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / steps


def _mlp_module():
    class MLP(nnx.Module):
        def __init__(self, rngs):
            self.l1, self.l2 = nnx.Linear(104, 64, rngs=rngs), nnx.Linear(64, 2, rngs=rngs)

        def __call__(self, x):
            return self.l2(nnx.relu(self.l1(x)))

    return MLP(nnx.Rngs(0))


def sweep_table(sizes: Sizes, rng) -> None:
    print(
        "\n## 2. Sweeps vs loops: 4 seeds x 4 learning rates, seconds (median of "
        f"{sizes.rounds} interleaved rounds; speed = loop time / sweep time)"
    )
    print(
        "| model | loop of train calls | sweep (as it runs here) | speed | sweep, runs batched |"
        " speed |"
    )
    print("|---|---|---|---|---|---|")
    b = min(256, sizes.n // 2)
    cases = {
        f"flax.nnx MLP 104-64-2, Poisson B = {b}, {sizes.mlp_steps} steps, n = {sizes.mlp_n}": (
            frameworks.from_flax_nnx(_mlp_module(), loss="softmax_cross_entropy"),
            _data(rng, sizes.mlp_n, (104,), 2),
            b,
            sizes.mlp_steps,
        ),
        f"tanh CNN, Poisson B = {b}, {sizes.sweep_steps} steps, n = {sizes.n}": (
            _cnn()[0],
            _data(rng, sizes.n, (28, 28, 1), 10),
            b,
            sizes.sweep_steps,
        ),
    }
    keys = jax.random.split(jax.random.key(0), 4)
    lrs = np.array([0.03, 0.1, 0.3, 1.0], np.float32)
    for name, (model, (x, y), b, steps) in cases.items():
        params0 = model.init(None)
        plan = DPPlan.create(
            "poisson",
            len(y),
            batch_size=b,
            steps=steps,
            l2_clip_norm=1.0,
            noise_multiplier=1.0,
            delta=1e-5,
        )
        config = TrainConfig(model, Hyper(0.1), plan)

        def loop(config=config, x=x, y=y, params0=params0):
            out = [
                train(dataclasses.replace(config, hyper=Hyper(float(lr))), params0, (x, y), k)[0]
                for k in keys
                for lr in lrs
            ]
            jax.block_until_ready(out)

        def swept(config=config, x=x, y=y, params0=params0):
            jax.block_until_ready(
                sweeps.sweep(config, params0, (x, y), keys, learning_rate=lrs).params
            )

        def batched(config=config, x=x, y=y, params0=params0):
            original = sweeps.vmaps_runs
            sweeps.vmaps_runs = lambda *args, **kwargs: True
            try:
                swept(config, x, y, params0)
            finally:
                sweeps.vmaps_runs = original

        times = {
            k: float(np.median(v))
            for k, v in _interleaved(
                {"loop": loop, "sweep": swept, "batched": batched}, sizes.rounds
            ).items()
        }
        print(
            f"| {name} | {times['loop']:.2f} | {times['sweep']:.2f} |"
            f" {times['loop'] / times['sweep']:.2f}x | {times['batched']:.2f} |"
            f" {times['loop'] / times['batched']:.2f}x |"
        )
    print(
        f"(backend: {jax.default_backend()}; a sweep of a network batches its runs on an"
        " accelerator and runs them one by one on a CPU: dpprep.sweeps.vmaps_runs)"
    )


def padded_work(sizes: Sizes) -> None:
    print(
        f"\n## 3. Poisson's padded work: slots computed per realised example (n = {sizes.n}, 200"
        " steps)"
    )
    print(
        f"| B | pad | whole padded batch | microbatches of {sizes.microbatch} (padding-only"
        " skipped) |"
    )
    print("|---|---|---|---|")
    for b in sizes.batches:
        plan = DPPlan.create(
            "poisson",
            sizes.n,
            batch_size=b,
            steps=200,
            l2_clip_norm=1.0,
            noise_multiplier=1.0,
            delta=1e-5,
        )
        x = jnp.zeros((sizes.n, 1))
        real = whole = micro = 0
        for t in range(200):
            size = int(jnp.sum(plan.batch(jax.random.key(0), t, x).mask))
            real += size
            whole += plan.pad
            micro += -(-size // sizes.microbatch) * sizes.microbatch
        print(f"| {b} | {plan.pad} | {whole / real:.3f} | {micro / real:.3f} |")


def _temp_mib(model, params0, x, y, microbatch):
    plan = DPPlan.create(
        "full", x.shape[0], steps=1, l2_clip_norm=1.0, noise_multiplier=1.0, delta=1e-5
    )
    grad_fn = plan.clipped_grad(model, microbatch_size=microbatch)
    key = jax.random.key(0)
    fn = jax.jit(lambda p, x, y: grad_fn(p, plan.batch(key, 0, (x, y))).grad)
    compiled = fn.lower(params0, x, y).compile()
    return compiled.memory_analysis().temp_size_in_bytes / 2**20


def memory_table(sizes: Sizes) -> None:
    print(
        "\n## 4. Memory of the clipped gradient (memory_analysis: temporaries needed at once, MiB)"
    )
    print(f"| model | batch | whole batch | microbatches of {sizes.microbatch} |")
    print("|---|---|---|---|")
    model, params0 = _cnn()
    b = sizes.batches[-1]
    x = jax.ShapeDtypeStruct((b, 28, 28, 1), jnp.float32)
    y = jax.ShapeDtypeStruct((b,), jnp.int32)
    print(
        f"| tanh CNN (26,010 parameters) | {b} | {_temp_mib(model, params0, x, y, None):.1f} | "
        f"{_temp_mib(model, params0, x, y, sizes.microbatch):.1f} |"
    )
    resnet = frameworks.from_flax_nnx(
        ResNet18(nnx.Rngs(0), width=sizes.resnet_width), loss="softmax_cross_entropy"
    )
    rparams = resnet.init(None)
    size = sum(int(np.size(p)) for p in jax.tree_util.tree_leaves(rparams))
    pad = DPPlan.create(
        "poisson",
        50_000,
        batch_size=sizes.resnet_batch,
        steps=1,
        l2_clip_norm=1.0,
        noise_multiplier=1.0,
        delta=1e-5,
    ).pad
    x = jax.ShapeDtypeStruct((pad, 32, 32, 3), jnp.float32)
    y = jax.ShapeDtypeStruct((pad,), jnp.int32)
    print(
        f"| ResNet-18, width {sizes.resnet_width} ({size:,} parameters) | Poisson"
        f" {sizes.resnet_batch} (pad {pad}) | {_temp_mib(resnet, rparams, x, y, None):,.0f} |"
        f" {_temp_mib(resnet, rparams, x, y, sizes.microbatch):,.0f} |"
    )


def clip_pad_table() -> None:
    print("\n## 5. The float32 clip pad (contribution of a clipped example: C / pad)")
    print("| parameters | sequential worst case 1 + (k + 8)u (before) | pairwise, now |")
    print("|---|---|---|")
    u = 2.0**-24
    for name, shapes in {
        "26,010 (tanh CNN)": [
            (1, 8, 8, 1, 16),
            (1, 16),
            (1, 4, 4, 16, 32),
            (1, 32),
            (1, 512, 32),
            (1, 32),
            (1, 32, 10),
            (1, 10),
        ],
        "1,000,000 (one leaf)": [(1, 1_000_000)],
        "11,173,962 (ResNet-18)": None,
    }.items():
        if shapes is None:
            params = frameworks.from_flax_nnx(
                ResNet18(nnx.Rngs(0)), loss="softmax_cross_entropy"
            ).init(None)
            shapes = [(1, *np.shape(p)) for p in jax.tree_util.tree_leaves(params)]
        k = sum(int(np.prod(s[1:])) for s in shapes)
        print(
            f"| {name} | {1 + (k + 8) * u:.6g} |"
            f" {clipping.rounding_pad(clipping.norm_roundings(shapes)):.8g} |"
        )


def resnet_projection(sizes: Sizes, rng) -> None:
    width, b, m = sizes.resnet_width, sizes.resnet_timed_batch, sizes.microbatch
    model = frameworks.from_flax_nnx(
        ResNet18(nnx.Rngs(0), width=width), loss="softmax_cross_entropy"
    )
    params0 = model.init(None)
    n = 50_000 if width == 64 else 4 * b
    x, y = _data(rng, n, (32, 32, 3), 10)
    plan = DPPlan.create(
        "poisson", n, batch_size=b, steps=2, l2_clip_norm=1.0, noise_multiplier=1.0, delta=1e-5
    )
    config = TrainConfig(model, Hyper(0.1), plan, microbatch_size=min(m, b))
    start = time.perf_counter()
    params, metrics = train(config, params0, (x, y), jax.random.key(0))
    jax.block_until_ready(params)
    first = time.perf_counter() - start
    start = time.perf_counter()
    params, metrics = train(config, params0, (x, y), jax.random.key(1))
    jax.block_until_ready(params)
    took = time.perf_counter() - start
    realised = float(np.mean(metrics["batch_size"]))
    per_example = took / (2 * realised)
    flops = 3 * resnet18_flops_per_example(width)  # forward + backward ≈ 3 forward passes
    print(
        f"\n## 6. ResNet-18 (width {width}), CIFAR-10 shapes, Poisson, microbatches of {min(m, b)}"
    )
    print(
        f"measured here: 2 steps at expected B = {b} (realised {realised:.0f} on average, pad"
        f" {plan.pad}) in {took:.1f} s after a first call of {first:.1f} s (compilation included):"
        f" {1e3 * per_example:.0f} ms per example, {flops / per_example / 1e9:.1f} GFLOP/s of"
        " convolution work"
    )
    print(
        f"CPU estimate at B = {sizes.resnet_batch}: {per_example * sizes.resnet_batch:.3g} s per"
        " step (measured per-example time x B)"
    )
    step_flops = flops * sizes.resnet_batch
    for gpu, peak in GPU_PEAK_TFLOPS.items():
        lo, hi = (step_flops / (peak * 1e12 * u) for u in ASSUMED_UTILISATION[::-1])
        print(
            f"FLOP-based projection, not a measurement: one {gpu} at"
            f" {ASSUMED_UTILISATION[0]:.0%}-{ASSUMED_UTILISATION[1]:.0%} of peak:"
            f" {1e3 * lo:.3g}-{1e3 * hi:.3g} ms per B = {sizes.resnet_batch} step"
            f" ({step_flops / 1e12:.3g} TFLOP: 3 x {resnet18_flops_per_example(width) / 1e9:.3f}"
            " GFLOP per example; per-example clipping's norms and the noise are lower order)"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (for the tests)")
    args = parser.parse_args(argv)
    sizes = SMOKE if args.smoke else Sizes()
    rng = np.random.default_rng(0)
    print(f"# Real models at speed and scale ({'smoke' if args.smoke else 'full'} sizes)")
    print(machine.start_line())
    cnn_table(sizes, rng)
    sweep_table(sizes, rng)
    padded_work(sizes)
    memory_table(sizes)
    clip_pad_table()
    resnet_projection(sizes, rng)
    print("\n" + machine.end_line())


if __name__ == "__main__":
    main()
