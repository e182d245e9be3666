"""End to end: ``scripts/run_all.py --profile smoke`` into a temporary directory."""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
import re
import subprocess
import sys
import time
import types
from pathlib import Path

import pandas as pd
import pytest

import experiments
from experiments import runner
from experiments.results import identity, output, store
from experiments.results import Comparison, provenance_json, write_csv

REPO = Path(__file__).resolve().parents[1]


def _run_all(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "scripts" / "run_all.py"), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_list_names_every_experiment():
    result = _run_all("--list")
    assert result.returncode == 0, result.stderr
    for experiment_id in experiments.REGISTRY:
        assert experiment_id in result.stdout


def test_unknown_experiment_is_rejected():
    result = _run_all("--only", "no_such_table")
    assert result.returncode != 0 and "unknown experiment" in result.stderr


def test_smoke_profile_end_to_end_and_resume(smoke_run, smoke_out, data_dir):
    """The session's one smoke run of every experiment (conftest.smoke_run) succeeded and reported
    each; resuming a copy of it recomputes nothing, and exactly what was lost."""
    first, out = smoke_run.process, smoke_out
    assert first.returncode == 0, first.stderr[-4000:]
    report = (out / "REPORT.md").read_text()
    for experiment_id in experiments.REGISTRY:
        frame = pd.read_csv(out / experiment_id / "comparisons.csv", keep_default_na=False)
        assert len(frame) > 0 and set(frame["profile"]) == {"smoke"}
        assert set(frame["status"]) <= {"pass", "miss", "info"}
        assert f"`{experiment_id}`" in report
    assert "Not run yet" not in report

    # Resume: a second run computes no finished unit again (no unit file is rewritten) and
    # reproduces the outputs.
    units = sorted(out.glob("*/.units/smoke/*.json"))
    assert units, "the smoke run cached no unit of work"
    stamps = {p: p.stat().st_mtime_ns for p in units}
    before = {p: p.read_bytes() for p in out.rglob("comparisons.csv")}
    second = _run_all("--profile", "smoke", "--out", str(out), "--data-dir", str(data_dir))
    assert second.returncode == 0, second.stderr[-4000:]
    assert {p: p.stat().st_mtime_ns for p in units} == stamps, "finished units were recomputed"
    for path, content in before.items():
        assert path.read_bytes() == content, f"{path} changed on resume"

    # An interrupted run (here: a third of the units lost) recomputes exactly the missing units.
    lost = units[::3]
    for path in lost:
        path.unlink()
    third = _run_all("--profile", "smoke", "--out", str(out), "--data-dir", str(data_dir))
    assert third.returncode == 0, third.stderr[-4000:]
    assert all(p.exists() for p in lost), "lost units were not recomputed"
    kept = [p for p in units if p not in lost]
    assert {p: p.stat().st_mtime_ns for p in kept} == {p: stamps[p] for p in kept}
    for path, content in before.items():
        assert path.read_bytes() == content, f"{path} changed after recomputing lost units"


# In-process runs of run_all.main over toy experiments registered for one test: fast, and they let
# a test count which units each run computed.
def _load_run_all():
    spec = importlib.util.spec_from_file_location(
        "run_all_under_test", REPO / "scripts" / "run_all.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


run_all = _load_run_all()


def _toy(name: str, n_units: int = 10, *, fail: bool = False) -> types.ModuleType:
    """A toy experiment: a grid of ``n_units`` units through ``run_many`` plus one analytic ``run``
    unit; ``module.computed`` lists the grid units computed, ``module.fail`` makes it raise."""
    module = types.ModuleType(name)
    module.computed, module.fail = [], fail

    def unit(i: int) -> dict:
        module.computed.append(i)
        return {"i": i, "square": i * i / 7}

    def run(ctx):
        if module.fail:
            raise RuntimeError("dataset not found: adult/adult.data")
        keys = [f"{name}|point={i}" for i in range(n_units)]
        values = ctx.store.run_many([(k, functools.partial(unit, i)) for i, k in enumerate(keys)])
        total = ctx.store.run(f"{name}|total", lambda: {"total": n_units})["total"]
        frame = pd.DataFrame(values)
        frame["versions"] = [provenance_json(ctx.store.provenance(k)) for k in keys]
        write_csv(frame, ctx.out_dir / "table.csv")
        return [
            Comparison.numeric(
                "sum of squares",
                sum(i * i / 7 for i in range(total)),
                float(frame["square"].sum()),
                rel_tol=1e-12,
            )
        ]

    module.run = run
    return module


@pytest.fixture
def toys(monkeypatch):
    """Registers toy experiments ``toy_a`` (10 grid units) and ``toy_b`` (4) in place of the real
    ones."""
    modules = {"toy_a": _toy("toy_a", 10), "toy_b": _toy("toy_b", 4)}
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, f"toy_experiments.{name}", module)
    monkeypatch.setattr(
        experiments, "REGISTRY", {n: (f"toy_experiments.{n}", f"Toy {n}") for n in modules}
    )
    # A frozen clock: runs at different moments then record identical provenance.
    epoch = time.gmtime(0)
    monkeypatch.setattr(identity.time, "gmtime", lambda *a: epoch)
    return modules


def _write_comparisons(directory: Path, profile: str, rows: list[tuple[str, str, str]]) -> None:
    frame = pd.DataFrame(
        [
            {"profile": profile, "quantity": q, "paper": "1", "measured": m}
            | {"tolerance": "rel 0.1", "status": s, "note": ""}
            for q, m, s in rows
        ]
    )
    (directory / "toy_a").mkdir(parents=True)
    frame.to_csv(directory / "toy_a" / "comparisons.csv", index=False)


def test_a_smaller_runs_misses_are_read_against_the_larger_committed_runs(tmp_path, toys):
    here, quick, paper = (tmp_path / name for name in ("smoke", "quick", "paper"))
    _write_comparisons(
        here,
        "smoke",
        [
            ("accuracy over 3 seeds", "0.5", "miss"),
            ("ordering holds", "no", "miss"),
            ("a smoke-only row", "0", "miss"),
            ("exact value", "1", "pass"),
        ],
    )
    # Rows match by quantity, or with every number masked (3 seeds here are 10 there).
    _write_comparisons(
        quick,
        "quick",
        [("accuracy over 10 seeds", "0.9", "pass"), ("ordering holds", "no", "miss")],
    )
    _write_comparisons(paper, "paper", [("ordering holds", "no", "miss")])
    report = run_all.write_report(here, {"quick": quick, "paper": paper}).read_text()
    assert "Totals: 1 pass, 3 miss, 0 info." in report
    assert "committed `quick` run and `paper` run (`quick/`, `paper/`): 1 of the misses" in report
    assert "1 miss there too" in report and "1 have no row there" in report
    section = report.split("## `toy_a`")[1].split("## `toy_b`")[0]
    assert "- 1 expected at `smoke`'s size" in section
    assert "accuracy over 3 seeds (passes at quick)" in section
    assert "- 1 a finding at every size" in section
    assert "ordering holds (misses at quick, paper too)" in section
    assert "- 1 no larger committed run has this row: a smoke-only row" in section
    # The largest profile's report (and any run read against nothing) has no such paragraph.
    assert "Misses at this profile" not in run_all.write_report(here).read_text()
    assert run_all.larger_committed_runs("paper", tmp_path) == {}
    committed = run_all.larger_committed_runs("smoke", tmp_path)
    assert committed["quick"] == REPO / "results"
    assert "quick" not in run_all.larger_committed_runs("quick", tmp_path)
    assert "quick" not in run_all.larger_committed_runs("smoke", REPO / "results")


def test_failed_experiment_is_marked_in_the_report_not_shown_with_old_numbers(
    tmp_path, toys, capsys
):
    out = tmp_path / "r"
    assert run_all.main(["--out", str(out)]) == 0
    assert "sum of squares" in (out / "REPORT.md").read_text()
    toys["toy_a"].fail = True
    assert run_all.main(["--out", str(out)]) == 1
    section = (out / "REPORT.md").read_text().split("## `toy_a`")[1].split("## `toy_b`")[0]
    assert "FAILED" in section and "dataset not found: adult/adult.data" in section
    assert "sum of squares" not in section
    assert "1 failed" in (out / "REPORT.md").read_text()
    # Still marked after a later run of another experiment only; cleared once it succeeds again.
    assert run_all.main(["--out", str(out), "--only", "toy_b"]) == 0
    assert "FAILED" in (out / "REPORT.md").read_text().split("## `toy_b`")[0]
    toys["toy_a"].fail = False
    assert run_all.main(["--out", str(out), "--only", "toy_a"]) == 0
    assert "FAILED" not in (out / "REPORT.md").read_text()


def test_unwritable_out_stops_at_once_with_one_line(tmp_path, toys, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert run_all.main(["--out", str(blocker / "out")]) != 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert str(blocker / "out") in err and toys["toy_a"].computed == []


def _disk_fills_after(monkeypatch, writes: int, *modules):
    """Every ``atomic_write_text`` of ``modules`` after the first ``writes`` fails as on a full
    disk."""
    import errno

    done = []
    for module in modules:
        real = module.atomic_write_text

        def write(path, text, real=real):
            if len(done) >= writes:
                raise OSError(errno.ENOSPC, "No space left on device", str(path))
            done.append(path)
            real(path, text)

        monkeypatch.setattr(module, "atomic_write_text", write)


def test_full_disk_is_one_line_and_the_rerun_resumes(tmp_path, toys, capsys, monkeypatch):
    """Issue 21: a full disk gave a traceback inside a traceback (writing FAILED.txt); now one
    line."""
    out = tmp_path / "r"
    with monkeypatch.context() as patch:
        # 3 units saved, then the 4th unit and FAILED.txt find the disk full
        _disk_fills_after(patch, 3, output, store, runner)
        assert run_all.main(["--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "toy_b" not in err, err
    (line,) = [x for x in err.splitlines() if "error" in x]
    assert line.startswith("run_all.py: error: the disk is full (No space left on device writing ")
    assert str(out / "toy_a") in line
    assert "free some space and rerun to resume" in line
    assert (
        not (out / "toy_a" / experiments.FAILURE_FILE).exists() and not (out / "REPORT.md").exists()
    )
    toys["toy_a"].computed.clear()
    assert run_all.main(["--out", str(out)]) == 0  # the rerun keeps the 3 finished units
    assert len(toys["toy_a"].computed) == 7 and "sum of squares" in (out / "REPORT.md").read_text()


def test_full_disk_while_writing_the_report_is_one_line(tmp_path, toys, capsys, monkeypatch):
    out = tmp_path / "r"
    with monkeypatch.context() as patch:
        _disk_fills_after(patch, 0, run_all)  # REPORT.md (experiments' own files still fit)
        assert run_all.main(["--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert (
        err.splitlines()[-1]
        == "run_all.py: error: the disk is full (No space left on device writing "
        f"{out / 'REPORT.md'}); every finished unit of work is kept (files are "
        "replaced whole, never half-written): free some space and rerun to resume"
    )
    for module in toys.values():
        module.computed.clear()
    assert run_all.main(["--out", str(out)]) == 0
    assert all(module.computed == [] for module in toys.values()) and (out / "REPORT.md").exists()


def test_failure_that_cannot_be_recorded_keeps_its_own_error(tmp_path, toys, monkeypatch):
    toys["toy_a"].fail = True
    _disk_fills_after(monkeypatch, 0, runner)  # only FAILED.txt cannot be written
    with pytest.raises(RuntimeError, match="dataset not found") as info:
        experiments.run_experiment("toy_a", "smoke", tmp_path, quiet=True)
    assert info.value.__context__ is None  # not a traceback inside a traceback
    assert any(
        "could not record this failure in" in note and "No space left" in note
        for note in info.value.__notes__
    )


def test_experiment_alone_refuses_an_unwritable_out_with_one_line(tmp_path, toys, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cases = [blocker, blocker / "out"]
    if os.geteuid() != 0:  # root writes into read-only directories
        readonly = tmp_path / "readonly"
        readonly.mkdir(mode=0o555)
        cases.append(readonly)
    for out in cases:
        with pytest.raises(SystemExit) as info:
            experiments.main_for("toy_a", ["--out", str(out), "--profile", "smoke"])
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
        expected = (
            f"--out {out} is a file, not a directory"
            if out == blocker
            else f"cannot write into --out {out}: "
        )
        assert err.startswith(f"python -m toy_experiments.toy_a: error: {expected}"), err
    assert toys["toy_a"].computed == []


def test_experiment_alone_on_a_full_disk_is_one_line(tmp_path, toys, capsys, monkeypatch):
    _disk_fills_after(monkeypatch, 0, output, store, runner)
    with pytest.raises(SystemExit) as info:
        experiments.main_for("toy_a", ["--out", str(tmp_path), "--profile", "smoke"])
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1
    assert err.startswith(
        "python -m toy_experiments.toy_a: error: the disk is full (No space left on device writing "
    ), err


def test_corrupt_comparisons_of_one_experiment_is_reported_as_unreadable(tmp_path, toys):
    out = tmp_path / "r"
    assert run_all.main(["--out", str(out)]) == 0
    (out / "toy_a" / "comparisons.csv").write_bytes(b'\x00\x01garbage,\n"unclosed')
    assert run_all.main(["--out", str(out), "--only", "toy_b"]) == 0
    report = (out / "REPORT.md").read_text()
    toy_a = report.split("## `toy_a`")[1].split("## `toy_b`")[0]
    assert "UNREADABLE" in toy_a and "toy_a/comparisons.csv" in toy_a
    assert "sum of squares" in report.split("## `toy_b`")[1]


@pytest.mark.parametrize("only", ["", ",", "toy_a,,toy_b", " , "])
def test_empty_only_is_a_parser_error(tmp_path, toys, capsys, only):
    with pytest.raises(SystemExit) as exit_info:
        run_all.main(["--out", str(tmp_path), "--only", only])
    assert exit_info.value.code == 2 and "--only" in capsys.readouterr().err
    assert toys["toy_a"].computed == [] and not (tmp_path / "REPORT.md").exists()


def test_missing_data_dir_is_a_parser_error_even_with_the_env_set(
    tmp_path, toys, capsys, monkeypatch
):
    # Issue 21: --data-dir /nonexistent was ignored when DPPREP_DATA_DIR was set.
    monkeypatch.setenv("DPPREP_DATA_DIR", str(tmp_path))
    with pytest.raises(SystemExit) as exit_info:
        run_all.main(["--out", str(tmp_path / "r"), "--data-dir", str(tmp_path / "nonexistent")])
    assert exit_info.value.code == 2
    assert f"--data-dir: not a directory: {tmp_path / 'nonexistent'}" in capsys.readouterr().err
    assert toys["toy_a"].computed == [] and not (tmp_path / "r" / "REPORT.md").exists()


def test_data_dir_flag_wins_over_the_env(tmp_path, toys, monkeypatch):
    flag = tmp_path / "flag"
    flag.mkdir()
    monkeypatch.setenv("DPPREP_DATA_DIR", str(tmp_path / "env"))
    assert (
        run_all.main(["--out", str(tmp_path / "r"), "--only", "toy_b", "--data-dir", str(flag)])
        == 0
    )
    assert os.environ["DPPREP_DATA_DIR"] == str(flag)


def test_other_profiles_do_not_overwrite_the_committed_results(tmp_path, toys, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert run_all.main(["--profile", "smoke"]) == 0
    assert (tmp_path / "results-smoke" / "REPORT.md").exists() and not (
        tmp_path / "results"
    ).exists()
    assert "results-smoke" in capsys.readouterr().err
    assert run_all.main([]) == 0  # the committed profile keeps results/
    assert (tmp_path / "results" / "REPORT.md").exists()


def _outputs(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.glob("*/*.csv"))}


def test_shards_compute_disjoint_slices_and_merge_reproduces_one_run(tmp_path, toys, capsys):
    assert run_all.main(["--out", str(tmp_path / "full")]) == 0
    full = _outputs(tmp_path / "full")
    assert set(full) == {f"{t}/{f}" for t in toys for f in ("comparisons.csv", "table.csv")}

    slices = {name: [] for name in toys}
    for k in (1, 2, 3):
        for module in toys.values():
            module.computed.clear()
        assert run_all.main(["--shard", f"{k}/3", "--out", str(tmp_path / f"shard{k}")]) == 0
        err = capsys.readouterr().err
        assert f"shard {k}/3 done" in err and "REPORT.md not written" in err
        assert not (tmp_path / f"shard{k}" / "REPORT.md").exists()
        for name, module in toys.items():
            slices[name].append(sorted(module.computed))
    for name, n_units in (("toy_a", 10), ("toy_b", 4)):
        flat = [i for part in slices[name] for i in part]
        assert sorted(flat) == list(range(n_units)), (
            f"{name}: slices overlap or miss units: {slices[name]}"
        )
        assert max(map(len, slices[name])) - min(map(len, slices[name])) <= 1  # balanced

    for module in toys.values():
        module.computed.clear()
    shards = [str(tmp_path / f"shard{k}") for k in (1, 2, 3)]
    assert run_all.main(["--merge", *shards, "--out", str(tmp_path / "merged")]) == 0
    assert all(module.computed == [] for module in toys.values()), "merge computed grid units"
    assert _outputs(tmp_path / "merged") == full
    assert "sum of squares" in (tmp_path / "merged" / "REPORT.md").read_text()

    # A shard that never ran: merge names the missing units and their shard, and computes nothing.
    capsys.readouterr()
    assert run_all.main(["--merge", *shards[:2], "--out", str(tmp_path / "partial")]) == 1
    err = capsys.readouterr().err
    assert "no manifest from shard(s) [3]" in err and "(shard 3/3)" in err and "toy_a|point=" in err
    assert all(module.computed == [] for module in toys.values())


def test_merge_never_replaces_a_current_unit_with_one_of_other_code(
    tmp_path, toys, capsys, monkeypatch
):
    out, shard = tmp_path / "out", tmp_path / "old_shard"
    assert run_all.main(["--out", str(out)]) == 0
    units = {p: p.read_bytes() for p in out.glob("*/.units/*/*.json")}
    with monkeypatch.context() as older:  # a shard computed by other (older) code
        older.setattr(identity, "source_digest", lambda: "older code")
        assert run_all.main(["--shard", "1/1", "--out", str(shard)]) == 0
    capsys.readouterr()
    # It used to overwrite the good units, count them as missing and mark the REPORT FAILED.
    assert run_all.main(["--merge", str(shard), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"kept {len(units)} unit(s) of this code already in {out}" in err
    assert {p: p.read_bytes() for p in units} == units
    report = (out / "REPORT.md").read_text()
    assert "FAILED" not in report and "sum of squares" in report


@pytest.mark.parametrize("rate", ["0", "-1", "nan", "inf", "fast"])
def test_plan_refuses_a_gpu_rate_that_is_not_a_positive_number(tmp_path, toys, capsys, rate):
    # 0 was a ZeroDivisionError; -1 and nan printed negative or NaN times
    with pytest.raises(SystemExit) as exit_info:
        run_all.main(["--plan", "--gpu-flops", rate, "--out", str(tmp_path)])
    assert exit_info.value.code == 2 and "--gpu-flops" in capsys.readouterr().err


def test_shards_sharing_one_out_are_assembled_by_merge_without_dirs(tmp_path, toys):
    assert run_all.main(["--out", str(tmp_path / "full")]) == 0
    shared = tmp_path / "shared"
    for k in (1, 2):
        assert run_all.main(["--shard", f"{k}/2", "--out", str(shared)]) == 0
    assert not (shared / "REPORT.md").exists()
    assert run_all.main(["--merge", "--out", str(shared)]) == 0
    assert _outputs(shared) == _outputs(tmp_path / "full")


def test_experiments_without_a_grid_run_whole_in_one_shard(tmp_path, toys, capsys, monkeypatch):
    """Issue 21: an experiment with no run_many grid was computed in full by every shard."""
    toys["toy_c"] = _toy("toy_c", 3)
    monkeypatch.setitem(sys.modules, "toy_experiments.toy_c", toys["toy_c"])
    monkeypatch.setitem(experiments.REGISTRY, "toy_c", ("toy_experiments.toy_c", "Toy toy_c"))
    # run whole: shards 1 and 2 of 3
    monkeypatch.setattr(experiments, "UNSHARDED", frozenset({"toy_b", "toy_c"}))
    assert [experiments.whole_owner(e, 3) for e in ("toy_b", "toy_c")] == [1, 2]
    assert run_all.main(["--out", str(tmp_path / "full")]) == 0
    capsys.readouterr()
    ran_whole: dict[str, list[int]] = {"toy_b": [], "toy_c": []}
    for k in (1, 2, 3):
        for module in toys.values():
            module.computed.clear()
        assert run_all.main(["--shard", f"{k}/3", "--out", str(tmp_path / f"shard{k}")]) == 0
        err = capsys.readouterr().err
        for name, n_units in (("toy_b", 4), ("toy_c", 3)):
            if toys[name].computed:
                # every unit, in one shard
                assert sorted(toys[name].computed) == list(range(n_units))
                ran_whole[name].append(k)
            else:
                owner = experiments.whole_owner(name, 3)
                assert f"{name}: shard {k}/3 done in" in err
                assert (
                    f"skipped: {name} has no grid to split, so shard {owner}/3 runs it whole" in err
                ), err
        assert len(toys["toy_a"].computed) in (3, 4)  # the grid experiment is still split
    assert ran_whole == {"toy_b": [1], "toy_c": [2]}
    for module in toys.values():
        module.computed.clear()
    shards = [str(tmp_path / f"shard{k}") for k in (1, 2, 3)]
    assert run_all.main(["--merge", *shards, "--out", str(tmp_path / "merged")]) == 0
    assert all(module.computed == [] for module in toys.values()), "merge computed units"
    assert _outputs(tmp_path / "merged") == _outputs(tmp_path / "full")


def test_unsharded_lists_exactly_the_experiments_without_a_grid():
    for experiment_id, (module, _) in experiments.REGISTRY.items():
        package = Path(importlib.util.find_spec(module).origin).parent
        source = "".join(p.read_text() for p in package.glob("*.py") if p.name != "cost.py")
        assert ("run_many" not in source) == (experiment_id in experiments.UNSHARDED), experiment_id
    assert experiments.UNSHARDED <= set(experiments.REGISTRY)


@pytest.mark.parametrize("shard", ["0/5", "3/2", "x", "1/0", "2"])
def test_bad_shard_is_a_parser_error(tmp_path, toys, capsys, shard):
    with pytest.raises(SystemExit) as exit_info:
        run_all.main(["--shard", shard, "--out", str(tmp_path)])
    assert exit_info.value.code == 2 and "--shard" in capsys.readouterr().err


_DONE = (
    r"\[\d/2\] {} done in \d+\.\ds \(units: {} computed, {} cached\): \d+ pass, \d+ miss, \d+ info"
)


@pytest.mark.slow  # run_all in subprocesses
def test_output_in_a_log_is_one_line_per_experiment_and_verbose_adds_the_unit_lines(
    tmp_path, data_dir
):
    """stderr captured (no terminal, as in CI): no progress-bar carriage returns, one line per
    experiment with its unit counts; --verbose adds the experiments' lines per unit of work."""
    out = tmp_path / "r"
    args = (
        "--profile",
        "smoke",
        "--only",
        "wang2026_table2,hu2024_table1",
        "--out",
        str(out),
        "--data-dir",
        str(data_dir),
    )
    first = _run_all(*args)
    assert first.returncode == 0, first.stderr[-4000:]
    assert "\r" not in first.stderr
    lines = first.stderr.splitlines()
    assert len(lines) == 4, first.stderr
    assert lines[0].startswith("profile smoke -> ") and lines[3].startswith("report: ")
    assert re.fullmatch(_DONE.format("wang2026_table2", 9, 0), lines[1]), lines[1]
    assert re.fullmatch(_DONE.format("hu2024_table1", 0, 0), lines[2]), lines[2]

    again = _run_all(*args, "--verbose")
    assert again.returncode == 0 and "\r" not in again.stderr
    lines = again.stderr.splitlines()
    assert "==> [1/2] wang2026_table2 (profile smoke)" in lines
    assert any(
        re.fullmatch(r"\[wang2026_table2 +\d+\.\ds\] synthetic m_s 5/5: 80", line) for line in lines
    )
    assert any(re.fullmatch(_DONE.format("wang2026_table2", 0, 9), line) for line in lines), (
        again.stderr
    )

    alone = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.wang2026_table2",
            "--profile",
            "smoke",
            "--out",
            str(out),
            "--data-dir",
            str(data_dir),
            "--verbose",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert alone.returncode == 0, alone.stderr[-4000:]
    assert "synthetic m_s 5/5" in alone.stderr and "\r" not in alone.stderr


def test_one_line_per_experiment_counts_units_computed_and_cached(tmp_path, toys, capsys):
    out = tmp_path / "r"
    assert run_all.main(["--out", str(out)]) == 0
    lines = capsys.readouterr().err.splitlines()
    # 10 grid units + 1
    assert len(lines) == 4 and re.fullmatch(_DONE.format("toy_a", 11, 0), lines[1])
    assert re.fullmatch(_DONE.format("toy_b", 5, 0), lines[2])
    (out / "toy_a" / ".units").rename(tmp_path / "lost")
    assert run_all.main(["--out", str(out)]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert re.fullmatch(_DONE.format("toy_a", 11, 0), lines[1]) and re.fullmatch(
        _DONE.format("toy_b", 0, 5), lines[2]
    )


def test_dp_accounting_convergence_warnings_only_with_verbose(tmp_path, toys, caplog, capsys):
    """dp-accounting's per-order "failed to converge" warnings (dozens per calibration) become
    one summary of the experiment, shown with --verbose only; other warnings still show."""
    run = toys["toy_b"].run

    def noisy(ctx):
        for alpha in (1.1, 1.2):
            logging.getLogger("absl").warning(
                "_compute_log_a_frac failed to converge after %d iterations with q=%f, "
                "sigma=%f, alpha=%f. Excluding this order from the epsilon computation.",
                1000,
                0.1,
                1.0,
                alpha,
            )
        logging.getLogger("absl").warning("another warning")
        return run(ctx)

    toys["toy_b"].run = noisy
    for verbose in ([], ["--verbose"]):
        caplog.clear()
        assert run_all.main(["--out", str(tmp_path), "--only", "toy_b", *verbose]) == 0
        messages = [r.getMessage() for r in caplog.records if r.name == "absl"]
        assert messages == ["another warning"]
        err = capsys.readouterr().err
        assert ("did not converge 2 times (orders 1.1 to 1.2" in err) == bool(verbose)
    assert not logging.getLogger("absl").filters  # the filter is removed after the run
    assert not logging.getLogger("dpprep").handlers
