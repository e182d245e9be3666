"""Shared fixtures. Tests that need the real data skip without it, unless DPPREP_REQUIRE_DATA=1."""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import fcntl
import gc
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parents[1]

# One persistent XLA compilation cache for the whole test run, shared by pytest-xdist's workers
# (they inherit it from the controller, which imports this file before starting them), so a program
# compiled by one test (or one worker) is read back, not compiled again, by the next; jax reads
# these at its import. Fresh for every run (a run's result never depends on an earlier one) and
# removed at its end; a cache hit returns the executable XLA compiled for the same program and
# options. 24 % off tests/test_algorithms.py alone.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    _JAX_CACHE = tempfile.mkdtemp(prefix="dpprep-tests-xla-")
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _JAX_CACHE
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "-1")
    atexit.register(shutil.rmtree, _JAX_CACHE, ignore_errors=True)

# CI runs the property tests on a fixed example sequence, so a landing never depends on which
# examples a random draw found; locally they explore afresh (and remember failures).
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")


def pytest_collection_modifyitems(items):
    """A test that reads the session's smoke-profile run (:func:`smoke_run`, minutes of every
    experiment) belongs to the slow tier, which ``make check`` and CI run and ``make test`` does
    not: marked here from its fixtures, so no such test can land in the fast tier by accident."""
    for item in items:
        if "smoke_run" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


def _candidate_data_dirs() -> list[Path]:
    candidates = []
    if os.environ.get("DPPREP_DATA_DIR"):
        candidates.append(Path(os.environ["DPPREP_DATA_DIR"]))
    candidates.append(REPO.parent / "shared" / "data")
    return candidates


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The directory with the real dataset copies (e.g. ../shared/data)."""
    for candidate in _candidate_data_dirs():
        if (candidate / "SHA256SUMS").exists() or (candidate / "mnist").is_dir():
            return candidate
    message = (
        f"real data not found (looked in {[str(c) for c in _candidate_data_dirs()]}); set"
        " DPPREP_DATA_DIR"
    )
    if os.environ.get("DPPREP_REQUIRE_DATA") == "1":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(autouse=True)
def _no_calibration_disk_cache(monkeypatch):
    """Hermetic tests: no calibration (nor CorrDP's rebalanced Sepsis set) is read from or written
    to the user's cache (tests of the on-disk caches turn them back on in a tmp dir)."""
    monkeypatch.setenv("DPPREP_CALIBRATION_CACHE", "0")
    monkeypatch.setenv("DPPREP_CORRDP_CACHE", "0")


@pytest.fixture(autouse=True)
def _full_precision_on_accelerators(request):
    """On a GPU, JAX's float32 matmuls default to TF32 (10 mantissa bits): tests that compare two
    computations to float32 tolerances would compare TF32 roundings (11 such failed on an H200).
    There the suite runs at full precision, except the tests marked ``backend_precision``: the
    clipping bounds, which must hold at the backend's own default (on an H200 at TF32 they caught
    a contribution of 1.00063·C, now pinned by ``clipping.CLIPPED_SUM_PRECISION``). On a CPU,
    whose XLA ignores the precision, nothing changes."""
    import jax

    if jax.default_backend() == "cpu" or request.node.get_closest_marker("backend_precision"):
        yield
        return
    with jax.default_matmul_precision("highest"):
        yield


# Hermetic like the autouse fixture above, for processes started before it applies.
_HERMETIC_ENV = {"DPPREP_CALIBRATION_CACHE": "0", "DPPREP_CORRDP_CACHE": "0"}


# What an example or a tutorial shows it prints, compared with what it printed (the docs' examples,
# tests/test_docs_examples.py, and the notebooks' stored outputs, tests/test_notebooks.py).
# A printed number: integers (compared exactly) and numbers with a point or an exponent (within
# the tolerance); not the digits inside a word (float32, x1).
NUMBER = r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])|\bnan\b|[-+]?\binf\b"
TOKEN = re.compile(rf"(?P<number>{NUMBER})|(?P<ellipsis>\.\.\.)|(?P<word>\w+)|(?P<other>\S)")


def _tokens(text: str) -> list[tuple[str, str]]:
    return [(m.lastgroup or "", m.group()) for m in TOKEN.finditer(text)]


def _is_exact(number: str) -> bool:
    """An integer as written (no point, no exponent): compared exactly."""
    return not re.search(r"[.eEn]", number)


def _same_number(shown: str, printed: str, atol: float, rtol: float) -> bool:
    a, b = float(shown), float(printed)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if _is_exact(shown) or math.isinf(a):
        return a == b
    return abs(b - a) <= atol + rtol * abs(a)


def _output_mismatch(shown: str, printed: str, atol: float = 0.0, rtol: float = 0.0) -> str | None:
    """None when ``printed`` is what ``shown`` shows, else where the two part (see
    :func:`output_mismatch`)."""
    want, got = _tokens(shown), _tokens(printed)
    # match[i][j]: want[i:] matches got[j:] (``...`` matches any run of tokens, none included)
    match = [[False] * (len(got) + 1) for _ in range(len(want) + 1)]
    match[len(want)][len(got)] = True
    for i in range(len(want) - 1, -1, -1):
        kind, text = want[i]
        for j in range(len(got), -1, -1):
            if kind == "ellipsis":
                match[i][j] = match[i + 1][j] or (j < len(got) and match[i][j + 1])
            elif j < len(got):
                other_kind, other = got[j]
                same = (
                    _same_number(text, other, atol, rtol)
                    if kind == "number" and other_kind == "number"
                    else text == other
                )
                match[i][j] = same and match[i + 1][j + 1]
    if match[0][0]:
        return None
    # Where they part: the longest prefix of tokens matched without wildcards, for the message.
    k = 0
    while k < min(len(want), len(got)) and want[k][0] != "ellipsis":
        kind, text = want[k]
        if not (
            _same_number(text, got[k][1], atol, rtol)
            if kind == "number" and got[k][0] == "number"
            else text == got[k][1]
        ):
            break
        k += 1
    shown_at = want[k][1] if k < len(want) else "the end"
    printed_at = got[k][1] if k < len(got) else "the end"
    return f"token {k}: shown {shown_at!r}, printed {printed_at!r}"


@pytest.fixture(scope="session")
def output_mismatch():
    """``output_mismatch(shown, printed, atol=0, rtol=0)``: None when ``printed`` is what
    ``shown`` shows, doctest-style, else where the two part. The same words and punctuation
    (whitespace aside; ``...`` in ``shown`` stands for any text), the same integers, and every
    number written with a decimal point or an exponent within |printed − shown| ≤ atol +
    rtol·|shown|."""
    return _output_mismatch


@dataclasses.dataclass(frozen=True)
class SmokeRun:
    out: Path
    process: subprocess.CompletedProcess


@contextlib.contextmanager
def _one_worker_at_a_time(shared: Path, name: str):
    """Holds an exclusive lock on ``shared / name.lock`` (Linux and macOS ``flock``)."""
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run_smoke_profile(out: Path, data_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "run_all.py"),
            "--profile",
            "smoke",
            "--out",
            str(out),
            "--data-dir",
            str(data_dir),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=3600,
        env=os.environ | _HERMETIC_ENV,
    )


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory, data_dir) -> SmokeRun:
    """``run_all.py --profile smoke``, once per test run: every experiment computed once into one
    directory. Tests of the experiments, the end-to-end run and the notebooks work on copies of it
    (:func:`smoke_out`), where re-running an experiment finds its units cached, instead of
    computing every experiment again (test_run_all asserts the run itself succeeded).

    Under pytest-xdist each worker is a process with its own session; the first worker to need
    the run computes it into the run's shared temporary directory while the others wait on a
    lock, then every worker reads the same directory and the same recorded process."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        out = tmp_path_factory.mktemp("smoke-run") / "results"
        return SmokeRun(out, _run_smoke_profile(out, data_dir))
    shared = tmp_path_factory.getbasetemp().parent  # this run's pytest-N, one per xdist run
    out = shared / "smoke-run" / "results"
    record = shared / "smoke-run.json"
    with _one_worker_at_a_time(shared, "smoke-run"):
        if not record.exists():
            process = _run_smoke_profile(out, data_dir)
            fields = {"args": process.args, "returncode": process.returncode}
            fields |= {"stdout": process.stdout, "stderr": process.stderr}
            record.write_text(json.dumps(fields))
    fields = json.loads(record.read_text())
    return SmokeRun(out, subprocess.CompletedProcess(**fields))


@pytest.fixture
def smoke_out(smoke_run, tmp_path) -> Path:
    """A private copy of the session's smoke results, which a test may resume into, lose units
    of, or run an experiment on again (finished units are read back, not recomputed)."""
    dest = tmp_path / "smoke-results"
    if smoke_run.out.exists():
        shutil.copytree(smoke_run.out, dest)
    else:
        dest.mkdir()
    return dest


# XLA:CPU maps the machine code of every compiled executable into the process, and jax keeps every
# executable it compiled for as long as its function lives. One pytest process compiles thousands
# of them (80 tests of test_step/test_plan/test_sweeps left 14,757 mappings), and past the kernel's
# ``vm.max_map_count`` (65,530 by default) an mmap fails inside LLVM and the process dies with a
# segmentation fault (CI died that way at 98 % of the suite, twice, in a test that passes alone).
# Clearing jax's caches after each module frees them (8,551 mappings back to 1,467); the cost is
# recompiling what a later module would have reused.
_MAP_LIMIT = Path("/proc/sys/vm/max_map_count")


def _mapping_count() -> int | None:
    try:
        with open("/proc/self/maps") as maps:
            return sum(1 for _ in maps)
    except OSError:  # not Linux
        return None


@pytest.fixture(scope="module", autouse=True)
def _release_compiled_executables():
    yield
    import jax

    jax.clear_caches()
    gc.collect()
    count = _mapping_count()
    if count is not None and _MAP_LIMIT.exists():
        limit = int(_MAP_LIMIT.read_text())
        # A clear failure here beats a segmentation fault some modules later.
        assert count < limit // 2, (
            f"{count} memory mappings remain after clearing jax's caches (the limit is {limit}):"
            " something holds compiled executables across test modules"
        )
