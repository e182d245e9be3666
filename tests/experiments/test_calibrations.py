"""The experiments' on-disk calibration cache (``experiments.results.calibrations``) cannot lie: a
tampered or corrupt entry costs time, never privacy.

Entries are forged here as whoever can write the cache could forge them: a multiplier changed and
the checksum recomputed (sha256 of the canonical JSON of the rest of the entry, written out below
independently of the cache), which only re-verification with the accountant can catch, or
changed without recomputing it, which the checksum catches. Every test runs in a temporary
``DPPREP_CACHE_DIR`` with the cache installed (``dp.calibration_store``), and clears the in-memory
cache before each call that must go to the disk. The runner installs it around each experiment
(the end of this file).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import sys
import time
import types
import warnings
from pathlib import Path

import pytest

import experiments
from dpprep.accounting import dp
from dpprep.accounting.dp import AccountingOptions, DpSgdSchedule
from dpprep.files import tree_digest
from dpprep.plan import ExecutionPlan
from experiments import runner
from experiments.results import Comparison, calibrations
from experiments.results.calibrations import DiskCalibrations

RDP = AccountingOptions(accountant="rdp")
REPLACE_ONE = AccountingOptions(neighboring_relation="replace_one")
RDP_REPLACE_ONE = AccountingOptions(accountant="rdp", neighboring_relation="replace_one")


def poisson(steps: int, q: float) -> DpSgdSchedule:
    return DpSgdSchedule(steps=steps, sampling="poisson", sampling_rate=q)


def full(steps: int) -> DpSgdSchedule:
    return DpSgdSchedule(steps=steps, sampling="full")


@pytest.fixture
def disk_cache(tmp_path, monkeypatch) -> Path:
    """The cache's directory, ``<$DPPREP_CACHE_DIR>/calibrations``, with the cache installed."""
    monkeypatch.setenv("DPPREP_CACHE_DIR", str(tmp_path))
    dp.calibrate_noise.cache_clear()
    with dp.calibration_store(DiskCalibrations()):
        yield tmp_path / "calibrations"
    dp.calibrate_noise.cache_clear()


def _entry_path(directory: Path) -> Path:
    (path,) = directory.glob("*.json")
    return path


def _checksum(entry: dict) -> str:
    """What anyone can recompute: sha256 over the canonical JSON of every field but the checksum."""
    body = {name: value for name, value in entry.items() if name != "checksum"}
    return hashlib.sha256(
        json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


def _forge(path: Path, *, recompute_checksum: bool = True, **fields) -> None:
    entry = json.loads(path.read_text())
    entry.update(fields)
    if recompute_checksum:
        entry["checksum"] = _checksum(entry)
    path.write_text(json.dumps(entry, sort_keys=True))


def _count_calibrations(monkeypatch) -> list:
    calls: list = []
    real = dp.composed_calibrate

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(dp, "composed_calibrate", counting)
    return calls


def _refuse(*args, **kwargs):
    raise AssertionError("recalibrated although the disk cache holds a verified answer")


def _cache_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if "calibration cache" in str(w.message)]


def _reported_epsilons(message: str) -> tuple[float, float]:
    at_z, at_low = re.findall(r"epsilon=(\S+) at ", message)
    return float(at_z), float(at_low)


# ------------------------------------------------------------------------------------------------
# Entry format


def test_entry_carries_a_checksum_of_its_key_and_value(disk_cache):
    z = dp.calibrate_noise(2.0, 1e-5, poisson(100, 0.05), options=RDP)
    entry = json.loads(_entry_path(disk_cache).read_text())
    assert set(entry) == {"key", "noise_multiplier", "accounted_with", "checksum"}
    assert entry["noise_multiplier"] == z and entry["accounted_with"] == {"accountant": "rdp"}
    assert entry["checksum"] == _checksum(entry)
    assert entry["key"]["method_version"] == calibrations.CALIBRATION_METHOD_VERSION >= 2


# ------------------------------------------------------------------------------------------------
# A forged multiplier whose checksum was recomputed: only verification can catch it

PROBE_TARGET, PROBE_DELTA = 1.2345, 1e-5


@pytest.mark.parametrize(
    "factor, problem",
    [
        (0.1, "not shown to meet the target"),  # a tenth of the noise: the privacy side
        (10.0, "more noise than the target needs"),  # private but wasteful
    ],
)
def test_forged_multiplier_is_caught_by_verification(disk_cache, monkeypatch, factor, problem):
    plan = ExecutionPlan.create("poisson", 60_000, batch_size=1024, epochs=40)
    z = plan.calibrate(PROBE_TARGET, PROBE_DELTA)
    path = _entry_path(disk_cache)
    _forge(path, noise_multiplier=z * factor)  # key untouched, checksum recomputed
    dp.calibrate_noise.cache_clear()
    calls = _count_calibrations(monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        honest = plan.calibrate(PROBE_TARGET, PROBE_DELTA)
    assert honest == pytest.approx(z, rel=1e-12)
    assert calls == [1]  # recomputed
    (message,) = _cache_warnings(caught)
    assert path.name in message and "checksum" not in message
    eps, eps_low = _reported_epsilons(message)
    # the forged multiplier misses the target (its PLD is too large to evaluate exactly)
    if factor < 1:
        assert problem in message and "work budget" in message and eps > PROBE_TARGET
    else:
        assert problem in message and eps_low <= PROBE_TARGET
    entry = json.loads(path.read_text())  # rewritten with the honest value
    assert entry["noise_multiplier"] == honest and entry["checksum"] == _checksum(entry)
    dp.calibrate_noise.cache_clear()  # and now a verified hit
    monkeypatch.setattr(dp, "composed_calibrate", _refuse)
    assert plan.calibrate(PROBE_TARGET, PROBE_DELTA) == honest


@pytest.mark.parametrize("factor", [0.999, 1.001])
def test_forged_multiplier_near_the_answer_is_caught(disk_cache, monkeypatch, factor):
    # Off by 0.1 %, far more than the calibration tolerance: caught with both epsilons evaluated
    # exactly.
    sched = poisson(100, 0.05)
    z = dp.calibrate_noise(2.0, 1e-5, sched, options=RDP)
    path = _entry_path(disk_cache)
    _forge(path, noise_multiplier=z * factor)
    dp.calibrate_noise.cache_clear()
    with pytest.warns(UserWarning, match=re.escape(path.name)) as caught:
        assert dp.calibrate_noise(2.0, 1e-5, sched, options=RDP) == z
    (message,) = _cache_warnings(caught)
    eps, eps_low = _reported_epsilons(message)
    if factor < 1:
        assert "too little noise" in message and eps > 2.0
        assert eps == dp.epsilon(z * factor, 1e-5, sched, options=RDP)
    else:
        assert "more noise than the target needs" in message and eps <= 2.0 and eps_low <= 2.0
    assert json.loads(path.read_text())["noise_multiplier"] == z


@pytest.mark.parametrize("claim", ["rdp", "coarse pld grid"])
def test_forged_fallback_accounting_is_caught(disk_cache, monkeypatch, claim):
    # An entry may name the accounting its search fell back to (RDP, a coarser PLD grid), each a
    # valid
    # upper bound on ε; a forger naming one where the search does not fall back, with the multiplier
    # calibrated on it, passes both ε checks on it but asks for more noise than needed.
    sched = poisson(100, 0.05)
    looser = (
        RDP
        if claim == "rdp"
        else AccountingOptions(pld_discretization=dp.MAX_COARSE_DISCRETIZATION)
    )
    z_looser = dp.calibrate_noise(0.5, 1e-5, sched, options=looser)
    for path in disk_cache.glob("*.json"):
        path.unlink()
    z = dp.calibrate_noise(0.5, 1e-5, sched)
    assert z_looser > z + 10 * dp.CALIBRATION_TOL
    path = _entry_path(disk_cache)
    fields = (
        {"accountant": "rdp"}
        if claim == "rdp"
        else {"accountant": "pld", "pld_discretization": dp.MAX_COARSE_DISCRETIZATION}
    )
    _forge(path, noise_multiplier=z_looser, accounted_with=fields)
    dp.calibrate_noise.cache_clear()
    with pytest.warns(UserWarning, match=re.escape(path.name)) as caught:
        assert dp.calibrate_noise(0.5, 1e-5, sched) == z
    (message,) = _cache_warnings(caught)
    assert "falls back" in message and "over its work budget" in message
    assert json.loads(path.read_text())["accounted_with"] == {
        "accountant": "pld",
        "pld_discretization": 1e-4,
    }


@pytest.mark.parametrize(
    "options, fields, match",
    [
        (RDP, {"accountant": "pld", "pld_discretization": 1e-4}, "never falls back"),
        (
            AccountingOptions(),
            {"accountant": "pld", "pld_discretization": 1e-6},
            "not a grid the work budget",
        ),
        (
            AccountingOptions(),
            {"accountant": "pld", "pld_discretization": 0.05},
            "not a grid the work budget",
        ),
        (AccountingOptions(), {"accountant": "gdp"}, "not an accounting"),
        (
            AccountingOptions(),
            {"accountant": "rdp", "neighboring_relation": "add_remove"},
            "not an accounting",
        ),
    ],
)
def test_forged_accounting_is_refused(disk_cache, options, fields, match):
    sched = poisson(100, 0.05)
    z = dp.calibrate_noise(0.5, 1e-5, sched, options=options)
    path = _entry_path(disk_cache)
    _forge(path, accounted_with=fields)
    dp.calibrate_noise.cache_clear()
    with pytest.warns(UserWarning, match=re.escape(path.name)) as caught:
        assert dp.calibrate_noise(0.5, 1e-5, sched, options=options) == z
    assert any(match in message for message in _cache_warnings(caught))


def test_forged_tiny_multiplier_costs_no_huge_pld(disk_cache):
    # z = 1e-3 would need a PLD of ~1e9 points per step: refused on the work budget, answered at
    # once.
    sched = poisson(100, 0.05)
    z = dp.calibrate_noise(0.5, 1e-5, sched)
    path = _entry_path(disk_cache)
    _forge(path, noise_multiplier=1e-3)
    dp.calibrate_noise.cache_clear()
    t0 = time.monotonic()
    with pytest.warns(UserWarning, match=re.escape(path.name)) as caught:
        assert dp.calibrate_noise(0.5, 1e-5, sched) == z
    assert time.monotonic() - t0 < 30
    (message,) = _cache_warnings(caught)
    assert "not shown to meet the target" in message and "work budget" in message
    assert _reported_epsilons(message)[0] > 0.5


# ------------------------------------------------------------------------------------------------
# Checksum and format


@pytest.mark.parametrize(
    "edit",
    [
        {"noise_multiplier": "x10"},
        {"noise_multiplier": "x0.1"},
        {"accounted_with": {"accountant": "rdp"}},
        {"checksum": "0" * 64},
    ],
)
def test_checksum_mismatch_is_detected(disk_cache, monkeypatch, edit):
    sched = poisson(100, 0.05)
    z = dp.calibrate_noise(0.5, 1e-5, sched)
    path = _entry_path(disk_cache)
    edit = {
        name: z * float(value[1:]) if name == "noise_multiplier" else value
        for name, value in edit.items()
    }
    _forge(path, recompute_checksum=False, **edit)
    dp.calibrate_noise.cache_clear()
    calls = _count_calibrations(monkeypatch)
    with pytest.warns(UserWarning, match=re.escape(path.name)) as caught:
        assert dp.calibrate_noise(0.5, 1e-5, sched) == z
    (message,) = _cache_warnings(caught)
    assert "checksum mismatch" in message
    assert calls == [1]
    entry = json.loads(path.read_text())
    assert entry["noise_multiplier"] == z and entry["checksum"] == _checksum(entry)


def test_old_format_without_checksum_is_recomputed_quietly(disk_cache, monkeypatch, caplog):
    # The format before checksums ({"key", "noise_multiplier"}) is a miss: recomputed and rewritten,
    # with one debug note and no warning (even with a value that would fail verification).
    sched = poisson(100, 0.05)
    z = dp.calibrate_noise(2.0, 1e-5, sched, options=RDP)
    path = _entry_path(disk_cache)
    entry = json.loads(path.read_text())
    path.write_text(json.dumps({"key": entry["key"], "noise_multiplier": z / 10}, sort_keys=True))
    dp.calibrate_noise.cache_clear()
    calls = _count_calibrations(monkeypatch)
    with (
        warnings.catch_warnings(record=True) as caught,
        caplog.at_level(logging.DEBUG, logger=calibrations.__name__),
    ):
        warnings.simplefilter("always")
        assert dp.calibrate_noise(2.0, 1e-5, sched, options=RDP) == z
    assert _cache_warnings(caught) == [] and calls == [1]
    assert [r.levelno for r in caplog.records if "no checksum" in r.getMessage()] == [logging.DEBUG]
    assert json.loads(path.read_text()) == entry  # rewritten in the current format


# ------------------------------------------------------------------------------------------------
# Honest entries are accepted without recomputation


HONEST = {
    "poisson pld": (0.5, 1e-5, poisson(100, 0.05), (), AccountingOptions()),
    "poisson rdp": (2.0, 1e-5, poisson(100, 0.05), (), RDP),
    "poisson pld replace_one": (1.0, 1e-5, poisson(50, 0.05), (), REPLACE_ONE),
    "full pld": (1.0, 1e-5, full(20), (), AccountingOptions()),
    "full pld replace_one": (1.0, 1e-5, full(20), (), REPLACE_ONE),
    "full rdp": (1.0, 1e-5, full(20), (), RDP),
    "full rdp replace_one": (1.0, 1e-5, full(20), (), RDP_REPLACE_ONE),
    "fixed events pld": (
        1.0,
        1e-5,
        poisson(100, 0.05),
        (dp.gaussian_event(10.0),),
        AccountingOptions(),
    ),
    "fixed events rdp replace_one": (
        1.0,
        1e-5,
        full(10),
        (dp.gaussian_event(30.0),),
        RDP_REPLACE_ONE,
    ),
    "without replacement": (
        1.0,
        1e-5,
        DpSgdSchedule(50, "without_replacement", 256 / 10_000, dataset_size=10_000),
        (),
        RDP_REPLACE_ONE,
    ),
    "long run pld": (1.0, 1e-5, poisson(2360, 1024 / 60_000), (), AccountingOptions()),
    "rdp fallback": (20.0, 1e-5, poisson(88, 2048 / 60_000), (), AccountingOptions()),
}


@pytest.mark.parametrize("setting", HONEST, ids=list(HONEST))
def test_honest_entry_is_a_verified_hit(disk_cache, monkeypatch, setting):
    target, delta, sched, fixed, options = HONEST[setting]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fallback's own warning
        z = dp.calibrate_noise(target, delta, sched, fixed_events=fixed, options=options)
    path = _entry_path(disk_cache)
    entry = json.loads(path.read_text())
    if setting == "rdp fallback":
        assert entry["accounted_with"] == {"accountant": "rdp"}
    dp.calibrate_noise.cache_clear()
    monkeypatch.setattr(dp, "composed_calibrate", _refuse)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert dp.calibrate_noise(target, delta, sched, fixed_events=fixed, options=options) == z
    assert _cache_warnings(caught) == []
    assert json.loads(path.read_text()) == entry  # not rewritten


@pytest.mark.slow  # calibrates a whole coarse grid
def test_coarse_grid_fallback_entry_is_a_verified_hit(disk_cache, monkeypatch):
    # Replace-one Poisson has no RDP bound: a large target is calibrated on a coarser PLD grid,
    # which the entry records and verification uses.
    sched, options = poisson(4, 0.1), REPLACE_ONE
    with pytest.warns(UserWarning, match="coarsened"):
        z = dp.calibrate_noise(8.0, 1e-5, sched, options=options)
    accounted_with = json.loads(_entry_path(disk_cache).read_text())["accounted_with"]
    assert (
        accounted_with["accountant"] == "pld"
        and accounted_with["pld_discretization"] > dp.PLD_DISCRETIZATION
    )
    dp.calibrate_noise.cache_clear()
    monkeypatch.setattr(dp, "composed_calibrate", _refuse)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert dp.calibrate_noise(8.0, 1e-5, sched, options=options) == z
    assert _cache_warnings(caught) == []


# ------------------------------------------------------------------------------------------------
# Across processes, keys and the code digest


def test_disk_cache_hit_across_processes(disk_cache, monkeypatch):
    sched = poisson(100, 0.05)
    z = dp.calibrate_noise(2.0, 1e-5, sched, options=RDP)
    files = list(disk_cache.glob("*.json"))
    assert len(files) == 1 and not list(disk_cache.glob(".tmp-*"))
    umask = os.umask(0)
    os.umask(umask)
    assert files[0].stat().st_mode & 0o777 == 0o666 & ~umask
    dp.calibrate_noise.cache_clear()  # a fresh process: only the disk has it
    monkeypatch.setattr(dp, "composed_calibrate", _refuse)
    assert dp.calibrate_noise(2.0, 1e-5, sched, options=RDP) == z
    # Any other argument is another key (exact: no rounding).
    with pytest.raises(AssertionError, match="disk cache"):
        dp.calibrate_noise(2.0 * (1 - 1e-13), 1e-5, sched, options=RDP)
    with pytest.raises(AssertionError, match="disk cache"):
        dp.calibrate_noise(
            2.0, 1e-5, sched, options=AccountingOptions(accountant="rdp", pld_discretization=2e-4)
        )


def test_second_calibration_is_read_from_disk(disk_cache, monkeypatch):
    # Two fresh in-memory states, one store: the first computes and writes, the second reads the
    # file (the calibration runs once; the file is read, not rewritten).
    calls = _count_calibrations(monkeypatch)
    sched = poisson(100, 0.05)
    z = dp.calibrate_noise(0.5, 1e-5, sched)
    path = _entry_path(disk_cache)
    written = path.stat().st_mtime_ns
    dp.calibrate_noise.cache_clear()
    reads = []
    real_read = calibrations._read_calibration
    monkeypatch.setattr(
        calibrations,
        "_read_calibration",
        lambda p, *a: reads.append(p) or real_read(p, *a),
    )
    assert dp.calibrate_noise(0.5, 1e-5, sched) == z
    assert calls == [1] and reads == [path] and path.stat().st_mtime_ns == written


def test_an_explicit_directory_is_used(tmp_path, monkeypatch):
    monkeypatch.setenv("DPPREP_CACHE_DIR", str(tmp_path / "root"))
    dp.calibrate_noise.cache_clear()
    store = DiskCalibrations(tmp_path / "mine")
    assert store.directory == tmp_path / "mine"
    assert DiskCalibrations().directory == tmp_path / "root" / "calibrations"
    with dp.calibration_store(store):
        dp.calibrate_noise(2.0, 1e-5, poisson(100, 0.05), options=RDP)
    dp.calibrate_noise.cache_clear()
    assert len(list((tmp_path / "mine").glob("*.json"))) == 1 and not (tmp_path / "root").exists()


def test_disk_cache_corrupt_entry_is_recomputed(disk_cache):
    sched = poisson(100, 0.05)
    z = dp.calibrate_noise(2.0, 1e-5, sched, options=RDP)
    (path,) = disk_cache.glob("*.json")
    for garbage in ("{not json", "[]", '{"checksum": "0", "key": {}, "noise_multiplier": 1.0}', ""):
        path.write_text(garbage)
        dp.calibrate_noise.cache_clear()
        with pytest.warns(UserWarning, match=path.name):
            assert dp.calibrate_noise(2.0, 1e-5, sched, options=RDP) == z
        assert json.loads(path.read_text())["noise_multiplier"] == z  # rewritten


@pytest.mark.parametrize(
    "garbage",
    [b"\xff\xfe\x00\x81binary", b"\x89PNG\r\n\x1a\n", b"[" * 100_000],
    ids=["not utf-8", "png header", "deeply nested"],
)
def test_disk_cache_binary_garbage_is_recomputed(disk_cache, garbage):
    # Bytes that are not UTF-8 used to crash the calibration (UnicodeDecodeError).
    sched = full(10)  # RDP: closed form, fast
    z = dp.calibrate_noise(2.0, 1e-5, sched, options=RDP)
    path = _entry_path(disk_cache)
    path.write_bytes(garbage)
    dp.calibrate_noise.cache_clear()
    with pytest.warns(UserWarning, match=f"corrupt calibration cache entry .*{path.name}"):
        assert dp.calibrate_noise(2.0, 1e-5, sched, options=RDP) == z
    assert json.loads(path.read_text())["noise_multiplier"] == z  # rewritten


@pytest.mark.parametrize("value", ["1.5", "NaN", math.nan, -1.0, 0.0, None, [1.0], True])
def test_disk_cache_entry_with_a_non_multiplier_is_recomputed(disk_cache, value):
    # A checksummed entry whose value is a string, NaN, negative, ...: a warning and a
    # recomputation, never an error or a value used.
    sched = full(10)  # RDP: closed form, fast
    z = dp.calibrate_noise(2.0, 1e-5, sched, options=RDP)
    path = _entry_path(disk_cache)
    entry = json.loads(path.read_text())
    entry["noise_multiplier"] = value
    body = {name: v for name, v in entry.items() if name != "checksum"}
    entry["checksum"] = hashlib.sha256(
        json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
    path.write_text(json.dumps(entry, sort_keys=True))
    dp.calibrate_noise.cache_clear()
    with pytest.warns(UserWarning, match=path.name):
        assert dp.calibrate_noise(2.0, 1e-5, sched, options=RDP) == z
    assert json.loads(path.read_text())["noise_multiplier"] == z  # rewritten


@pytest.mark.parametrize("error", [OSError("read-only file system"), ValueError("bad path")])
def test_disk_cache_that_cannot_be_written_does_not_lose_the_run(disk_cache, monkeypatch, error):
    def failing(path, text):
        raise error

    monkeypatch.setattr(calibrations, "atomic_write_text", failing)
    with pytest.warns(UserWarning, match="cannot write calibration cache"):
        z = dp.calibrate_noise(2.0, 1e-5, full(10), options=RDP)
    assert z > 0 and not list(disk_cache.glob("*.json"))


def test_a_wrong_answer_of_the_disk_cache_never_reaches_a_plan(disk_cache, monkeypatch):
    # Even a store whose own verification were broken could not hand a plan too little noise:
    # calibrate_noise verifies what any store answers, and caches only verified values.
    from dpprep.plan import DPPlan

    monkeypatch.setattr(calibrations, "_verify_calibration", lambda *args: True)
    kwargs = dict(steps=20, l2_clip_norm=1.0, delta=1e-5, options=RDP)
    honest = DPPlan.create("full", 1000, target_epsilon=1.23, **kwargs)
    path = _entry_path(disk_cache)
    _forge(path, noise_multiplier=0.7 * honest.noise_multiplier)
    dp.calibrate_noise.cache_clear()
    with pytest.warns(UserWarning, match="too little noise, a wrong answer"):
        plan = DPPlan.create("full", 1000, target_epsilon=1.23, **kwargs)
    assert plan.noise_multiplier == honest.noise_multiplier and plan.epsilon <= 1.23
    with dp.calibration_store(None):  # and after it: the verified value
        assert DPPlan.create("full", 1000, target_epsilon=1.23, **kwargs) == honest


def test_disk_cache_is_keyed_on_the_accounting_code(disk_cache, monkeypatch):
    # An edit to the calibration code once reused the old code's cached multiplier. An entry
    # written by other code (another digest) must be a miss, and recomputed.
    sched = poisson(100, 0.05)
    z = dp.calibrate_noise(2.0, 1e-5, sched, options=RDP)
    (entry,) = disk_cache.glob("*.json")
    assert json.loads(entry.read_text())["key"]["code"] == calibrations.calibration_code_digest()
    dp.calibrate_noise.cache_clear()
    monkeypatch.setattr(calibrations, "calibration_code_digest", lambda: "edited-accounting-code")
    calls = []
    real = dp.composed_calibrate
    monkeypatch.setattr(
        dp, "composed_calibrate", lambda *a, **k: calls.append(1) or 1.5 * real(*a, **k)
    )
    assert dp.calibrate_noise(2.0, 1e-5, sched, options=RDP) == 1.5 * z  # the edited code's value
    assert calls == [1] and len(list(disk_cache.glob("*.json"))) == 2


def test_calibration_code_digest_follows_the_sources(tmp_path):
    # The digest covers every file of CALIBRATION_SOURCES: a copy agrees, an edit of the
    # calibration code, of the checks normalising its inputs or of this cache changes it; a
    # comment does not.
    import shutil

    root = Path(dp.__file__).resolve().parents[2]
    assert "experiments/results/calibrations.py" in calibrations.CALIBRATION_SOURCES
    shutil.copytree(
        root / "dpprep" / "accounting",
        tmp_path / "dpprep" / "accounting",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    for file in ("dpprep/validation.py", "experiments/results/calibrations.py"):
        (tmp_path / file).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(root / file, tmp_path / file)
    digest = calibrations.calibration_code_digest()
    assert tree_digest(tmp_path, calibrations.CALIBRATION_SOURCES) == digest
    for edited in (
        "dpprep/accounting/dp.py",
        "dpprep/validation.py",
        "experiments/results/calibrations.py",
    ):
        path = tmp_path / edited
        original = path.read_text()
        # A comment is not code: the cached calibrations stay valid.
        path.write_text(original + "\n# edit\n")
        assert tree_digest(tmp_path, calibrations.CALIBRATION_SOURCES) == digest
        path.write_text(
            original.replace("return float(z)", "return 1.5 * float(z)") + "\n_EDITED = 1\n"
        )
        assert tree_digest(tmp_path, calibrations.CALIBRATION_SOURCES) != digest
        path.write_text(original)
    assert tree_digest(tmp_path, calibrations.CALIBRATION_SOURCES) == digest


# ------------------------------------------------------------------------------------------------
# The runner installs it around each experiment, unless DPPREP_CALIBRATION_CACHE turns it off


@pytest.fixture
def calibrating_experiment(tmp_path, monkeypatch):
    """A registered toy experiment that calibrates one setting; its cache root is ``tmp_path``."""
    monkeypatch.setenv("DPPREP_CACHE_DIR", str(tmp_path))
    module = types.ModuleType("toy_experiments.calibrating")
    module.values = []

    def run(ctx):
        module.values.append(dp.calibrate_noise(2.0, 1e-5, poisson(100, 0.05), options=RDP))
        return [Comparison.info("noise multiplier", repr(module.values[-1]))]

    module.run = run
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(experiments, "REGISTRY", {"calibrating": (module.__name__, "Toy")})
    dp.calibrate_noise.cache_clear()
    yield module
    dp.calibrate_noise.cache_clear()


def _run(tmp_path) -> None:
    runner.run_experiment("calibrating", "smoke", tmp_path / "results", quiet=True)


def test_the_runner_keeps_calibrations_on_disk(tmp_path, monkeypatch, calibrating_experiment):
    monkeypatch.delenv("DPPREP_CALIBRATION_CACHE")
    calls = _count_calibrations(monkeypatch)
    _run(tmp_path)
    path = _entry_path(tmp_path / "calibrations")
    entry, written = json.loads(path.read_text()), path.stat().st_mtime_ns
    assert entry["noise_multiplier"] == calibrating_experiment.values[0] and calls == [1]
    # A second run in a fresh process reads it back (verified) instead of calibrating.
    dp.calibrate_noise.cache_clear()
    _run(tmp_path)
    assert calls == [1] and path.stat().st_mtime_ns == written
    assert calibrating_experiment.values[1] == calibrating_experiment.values[0]
    # Scoped to the run: after it, the library writes no file.
    path.unlink()
    dp.calibrate_noise.cache_clear()
    dp.calibrate_noise(2.0, 1e-5, poisson(100, 0.05), options=RDP)
    assert list((tmp_path / "calibrations").iterdir()) == [] and calls == [1, 1]


@pytest.mark.parametrize("value, on", [("1", True), ("on", True), ("YES", True), ("true", True)])
def test_the_runner_switch_turns_it_on(monkeypatch, value, on):
    monkeypatch.setenv("DPPREP_CALIBRATION_CACHE", value)
    assert runner.calibration_cache_enabled() is on


@pytest.mark.parametrize("off", ["0", "off", "False", "no"])
def test_the_runner_switch_turns_it_off(tmp_path, monkeypatch, calibrating_experiment, off):
    monkeypatch.setenv("DPPREP_CALIBRATION_CACHE", off)
    assert not runner.calibration_cache_enabled()
    _run(tmp_path)
    assert calibrating_experiment.values and not (tmp_path / "calibrations").exists()


def test_the_tests_keep_the_runner_cache_off():
    # tests/conftest.py's hermetic environment: no test reads or writes the user's cache.
    assert os.environ["DPPREP_CALIBRATION_CACHE"] == "0" and not runner.calibration_cache_enabled()


def test_no_calibration_made_under_a_planted_bug_reaches_the_store(disk_cache):
    # experiments.audit.inject.inject turns the store off for its block, and back on after.
    from experiments.audit.inject import inject

    with inject("calibration_0.7x"):
        dp.calibrate_noise(2.0, 1e-5, poisson(100, 0.05), options=RDP)
    assert not disk_cache.exists()
    dp.calibrate_noise(2.5, 1e-5, poisson(100, 0.05), options=RDP)
    assert len(list(disk_cache.glob("*.json"))) == 1
