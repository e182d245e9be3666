"""The networks the benchmarks train, as flax.nnx modules (bring-your-own-model through
:func:`dpprep.frameworks.from_flax_nnx`).

* :class:`TanhCNN`: Papernot et al. (2021)'s MNIST network with tanh activations ("Tempered
  sigmoid activations for deep learning with differential privacy"): conv 16@8×8 stride 2, max-pool
  2×2 stride 1, conv 32@4×4 stride 2, max-pool 2×2 stride 1, dense 32, dense 10; 26,010 parameters.
* :class:`ResNet18`: He et al. (2016)'s ResNet-18 for CIFAR-10 shapes (3×3 stem, four stages of two
  basic blocks at widths ``w, 2w, 4w, 8w``, global average pooling, dense 10), with group
  normalisation instead of batch normalisation (batch statistics mix examples, which per-example
  clipping cannot allow; De et al. 2022 train it this way). ``width=64`` is the usual ResNet-18
  (11.2M parameters); a smaller width keeps the architecture at a size a test can train.
"""

from __future__ import annotations

from flax import nnx


class TanhCNN(nnx.Module):
    """Papernot et al. (2021)'s MNIST network with tanh activations."""

    def __init__(self, rngs: nnx.Rngs):
        self.conv1 = nnx.Conv(1, 16, (8, 8), strides=2, padding=((3, 3), (3, 3)), rngs=rngs)
        self.conv2 = nnx.Conv(16, 32, (4, 4), strides=2, padding="VALID", rngs=rngs)
        self.fc1 = nnx.Linear(32 * 4 * 4, 32, rngs=rngs)
        self.fc2 = nnx.Linear(32, 10, rngs=rngs)

    def __call__(self, x):
        pool = lambda h: nnx.max_pool(h, (2, 2), strides=(1, 1))  # noqa: E731
        h = pool(nnx.tanh(self.conv1(x)))  # 28 → 14 → 13
        h = pool(nnx.tanh(self.conv2(h)))  # 13 → 5 → 4
        h = nnx.tanh(self.fc1(h.reshape(h.shape[0], -1)))
        return self.fc2(h)


def _norm(features: int, rngs: nnx.Rngs) -> nnx.GroupNorm:
    return nnx.GroupNorm(features, num_groups=min(16, features), rngs=rngs)


class BasicBlock(nnx.Module):
    """Two 3×3 convolutions with a residual connection (a 1×1 projection when the shape changes)."""

    def __init__(self, cin: int, cout: int, stride: int, rngs: nnx.Rngs):
        self.conv1 = nnx.Conv(
            cin, cout, (3, 3), strides=stride, padding=1, use_bias=False, rngs=rngs
        )
        self.norm1 = _norm(cout, rngs)
        self.conv2 = nnx.Conv(cout, cout, (3, 3), padding=1, use_bias=False, rngs=rngs)
        self.norm2 = _norm(cout, rngs)
        self.projects = stride != 1 or cin != cout
        if self.projects:
            self.project = nnx.Conv(cin, cout, (1, 1), strides=stride, use_bias=False, rngs=rngs)
            self.project_norm = _norm(cout, rngs)

    def __call__(self, x):
        h = nnx.relu(self.norm1(self.conv1(x)))
        h = self.norm2(self.conv2(h))
        skip = self.project_norm(self.project(x)) if self.projects else x
        return nnx.relu(h + skip)


class ResNet18(nnx.Module):
    """ResNet-18 for 32×32×3 inputs and 10 classes, group-normalised; ``width`` channels in the
    stem."""

    def __init__(self, rngs: nnx.Rngs, width: int = 64, classes: int = 10):
        self.stem = nnx.Conv(3, width, (3, 3), padding=1, use_bias=False, rngs=rngs)
        self.stem_norm = _norm(width, rngs)
        blocks, cin = [], width
        for stage, stride in enumerate((1, 2, 2, 2)):
            cout = width * 2**stage
            blocks += [BasicBlock(cin, cout, stride, rngs), BasicBlock(cout, cout, 1, rngs)]
            cin = cout
        self.blocks = nnx.List(blocks)
        self.head = nnx.Linear(cin, classes, rngs=rngs)

    def __call__(self, x):
        h = nnx.relu(self.stem_norm(self.stem(x)))
        for block in self.blocks:
            h = block(h)
        return self.head(h.mean(axis=(1, 2)))


def resnet18_flops_per_example(width: int = 64) -> float:
    """Multiply-add FLOPs (2 per multiply-add) of one 32×32 example's forward pass through the
    convolutions and the head of :class:`ResNet18` (normalisation and activations, O(activations),
    not counted)."""
    flops, cin, size = 2 * 32 * 32 * 9 * 3 * width, width, 32
    for stage, stride in enumerate((1, 2, 2, 2)):
        cout = width * 2**stage
        for block in range(2):
            s = stride if block == 0 else 1
            size_out = size // s
            flops += 2 * size_out**2 * 9 * cin * cout + 2 * size_out**2 * 9 * cout * cout
            if s != 1 or cin != cout:
                flops += 2 * size_out**2 * cin * cout
            cin, size = cout, size_out
    return float(flops + 2 * cin * 10)
