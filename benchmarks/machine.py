"""What every benchmark file records about the machine it ran on, at its start and at its end: the
CPU model, the cores, JAX's backend and version, and the load average. A ratio of two timings is
fair on a loaded machine only when both sides were timed in the same interleaved rounds (each
benchmark does that); the load says how loaded, and the end line whether it changed meanwhile."""

from __future__ import annotations

import os
import platform
import statistics
from typing import Callable


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what the platform says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def load() -> str:
    """The 1, 5 and 15 minute load averages (``n/a`` where the OS has none)."""
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "n/a"


def start_line() -> str:
    """The line a benchmark prints (and writes) first."""
    import jax

    device = jax.devices()[0]
    return (
        f"machine: {cpu_model()}, {os.cpu_count()} cores; jax {jax.__version__}, backend"
        f" {jax.default_backend()} ({device.device_kind}, {jax.device_count()} device(s));"
        f" load average at start {load()}"
    )


def end_line() -> str:
    """The line a benchmark prints (and writes) last."""
    return f"load average at end {load()}"


def paired_median(
    timed: Callable[[], float], reference: Callable[[], float], rounds: int
) -> tuple[float, float, float]:
    """``(median timed, median reference, median of the per-round ratios timed/reference)``, the
    two timed alternately in ``rounds`` rounds, so that both see the same load: a ratio to a
    reference measured at another moment (before the rounds, on a quieter machine) is not one."""
    pairs = []
    for _ in range(rounds):
        a = timed()
        b = reference()
        pairs.append((a, b))
    return (
        statistics.median(a for a, _ in pairs),
        statistics.median(b for _, b in pairs),
        statistics.median(a / b for a, b in pairs),
    )
