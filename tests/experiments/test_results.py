"""The results helpers: atomic writes, resumable units, comparisons, provenance."""

from __future__ import annotations

import io
import json
import os
import re
import stat
import sys
import time
import types
import warnings
from pathlib import Path

import pytest

from experiments import results
from experiments.results import identity
from experiments.results import progress as progress_module
from experiments.results import (
    Comparison,
    UnitStore,
    atomic_write_text,
    comparisons_frame,
    package_versions,
)


def test_unit_store_computes_once_and_resumes(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return {"accuracy": 0.9, "seed": 3}

    store = UnitStore(tmp_path / "units")
    assert store.run("method=a/eps=1/seed=3", compute) == {"accuracy": 0.9, "seed": 3}
    # A new store on the same directory (a restarted run) finds the finished unit.
    again = UnitStore(tmp_path / "units").run("method=a/eps=1/seed=3", compute)
    assert again == {"accuracy": 0.9, "seed": 3} and len(calls) == 1
    # fresh=True recomputes.
    UnitStore(tmp_path / "units", fresh=True).run("method=a/eps=1/seed=3", compute)
    assert len(calls) == 2


def test_unit_store_keys_do_not_collide_after_slugging(tmp_path):
    store = UnitStore(tmp_path)
    store.save("a/b", {"v": 1})
    store.save("a_b", {"v": 2})
    assert store.load("a/b") == {"v": 1} and store.load("a_b") == {"v": 2}


def test_atomic_write_leaves_no_partial_file(tmp_path, monkeypatch):
    target = tmp_path / "table.csv"
    atomic_write_text(target, "old")

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        atomic_write_text(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"]


def test_numeric_comparison_pass_and_miss():
    assert Comparison.numeric("x", 12.2, 12.2004, rel_tol=1e-4).status == "pass"
    assert Comparison.numeric("x", 12.2, 12.3, rel_tol=1e-4).status == "miss"
    assert Comparison.numeric("x", 1.0, float("nan"), abs_tol=1.0).status == "miss"
    with pytest.raises(ValueError):
        Comparison.numeric("x", 1.0, 1.0)
    frame = comparisons_frame([Comparison.info("y", "3 rows")])
    assert list(frame.columns) == ["quantity", "paper", "measured", "tolerance", "status", "note"]


def test_package_versions_records_the_stack():
    versions = package_versions()
    for name in (
        "python",
        "jax",
        "numpy",
        "dp-accounting",
        "jax-privacy",
        "scikit-learn",
        "dpprep",
    ):
        assert name in versions
    json.dumps(versions)


def test_tree_digest_reads_relative_paths_and_content_only(tmp_path):
    for copy in ("a", "b"):
        (tmp_path / copy / "dpprep" / "sub").mkdir(parents=True)
        (tmp_path / copy / "dpprep" / "sub" / "m.py").write_text("X = 2.0\n")
        (tmp_path / copy / "experiments").mkdir()
        (tmp_path / copy / "experiments" / "e.py").write_text("Y = 1\n")
    # Same tree elsewhere (a fresh clone) and with other mtimes: same digest.
    os.utime(tmp_path / "b" / "experiments" / "e.py", (0, 0))
    assert results.tree_digest(tmp_path / "a") == results.tree_digest(tmp_path / "b")
    # An edit to library code, or a moved file, changes it.
    (tmp_path / "b" / "dpprep" / "sub" / "m.py").write_text("X = 3.0\n")
    assert results.tree_digest(tmp_path / "a") != results.tree_digest(tmp_path / "b")
    (tmp_path / "b" / "dpprep" / "sub" / "m.py").write_text("X = 2.0\n")
    (tmp_path / "b" / "dpprep" / "sub" / "m.py").rename(tmp_path / "b" / "dpprep" / "m.py")
    assert results.tree_digest(tmp_path / "a") != results.tree_digest(tmp_path / "b")


def test_tree_digest_keys_on_code_not_on_its_documentation(tmp_path):
    source = (
        '"""Module."""\n\n\nclass A:\n    """Doc."""\n\n    def f(self, x):\n        """Doc."""\n  '
        "      return x * 2.0  # why\n"
    )
    variants = {
        "same": source,
        "docstrings reworded, comment edited, lines re-wrapped": (
            '"""Other words."""\nclass A:\n    """More."""\n    def f(self,\n          x):\n'
            '        """Reworded."""\n        return (x\n                * 2.0)  # because\n'
        ),
        "a docstring-only function": source.replace("return x * 2.0  # why", "pass"),
    }
    digests = {}
    for name, text in {
        **variants,
        "constant edited": source.replace("2.0", "3.0"),
        "operator edited": source.replace("x * 2.0", "x + 2.0"),
        "a string that is not a docstring": source.replace(
            "return x * 2.0", "y = 'a'\n        return x * 2.0"
        ),
        "not Python": "def (:\n",
    }.items():
        (tmp_path / name / "dpprep").mkdir(parents=True)
        (tmp_path / name / "dpprep" / "m.py").write_text(text)
        digests[name] = results.tree_digest(tmp_path / name)
    # Documentation, comments and layout do not decide what a unit computes: its digest stays.
    assert digests["same"] == digests["docstrings reworded, comment edited, lines re-wrapped"]
    # Every edit to code changes it, a body emptied to its docstring included.
    for name in (
        "a docstring-only function",
        "constant edited",
        "operator edited",
        "a string that is not a docstring",
        "not Python",
    ):
        assert digests[name] != digests["same"], name
    # A file that does not parse is keyed on its bytes: any edit to it changes the digest.
    (tmp_path / "not Python" / "dpprep" / "m.py").write_text("def (:  \n")
    assert results.tree_digest(tmp_path / "not Python") != digests["not Python"]


def test_unit_store_recomputes_units_of_other_code_and_keeps_their_provenance(
    tmp_path, monkeypatch
):
    calls = []

    def compute():
        calls.append(1)
        return {"l2": 2.0 * len(calls)}

    store = UnitStore(tmp_path)
    assert store.run("unit", compute) == {"l2": 2.0}
    computed = store.provenance("unit")
    assert (
        computed["source"] == results.source_digest() and computed["versions"] == package_versions()
    )
    # A later process reads the unit back with the provenance of its computation, not today's.
    epoch = time.gmtime(0)
    monkeypatch.setattr(identity.time, "gmtime", lambda *a: epoch)
    again = UnitStore(tmp_path)
    assert again.run("unit", compute) == {"l2": 2.0} and len(calls) == 1
    assert again.provenance("unit") == computed
    # Rows name the code that computed them (the time stays in the unit file).
    assert json.loads(results.provenance_json(again.provenance("unit"))) == {
        k: v for k, v in computed.items() if k not in ("computed", "seconds")
    }
    # After an edit to the package (another source digest) the unit is stale: recomputed.
    monkeypatch.setattr(identity, "source_digest", lambda: "edited")
    edited = UnitStore(tmp_path)
    assert edited.run("unit", compute) == {"l2": 4.0} and len(calls) == 2
    assert edited.provenance("unit")["source"] == "edited"
    assert edited.provenance("unit")["computed"] == "1970-01-01T00:00:00Z"
    # So does an upgrade of a dependency.
    monkeypatch.setattr(identity, "package_versions", lambda: {"jax": "9.9"})
    assert UnitStore(tmp_path).run("unit", compute) == {"l2": 6.0} and len(calls) == 3


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: text[: len(text) // 2],  # truncated
        lambda text: "\x00\xff\xfe binary",  # not text
        # edited
        lambda text: text.replace('"l2":2.0', '"l2":2.5').replace('"l2": 2.0', '"l2": 2.5'),
    ],
    ids=["truncated", "binary", "edited"],
)
def test_damaged_unit_is_named_and_recomputed(tmp_path, damage):
    store = UnitStore(tmp_path)
    store.run("unit", lambda: {"l2": 2.0})
    (path,) = tmp_path.glob("*.json")
    damaged = damage(path.read_bytes().decode("latin-1"))
    assert damaged != path.read_bytes().decode("latin-1")
    path.write_bytes(damaged.encode("latin-1"))
    with pytest.warns(UserWarning, match=re.escape(str(path))):
        assert UnitStore(tmp_path).run("unit", lambda: {"l2": 3.0}) == {"l2": 3.0}
    # Repaired: the next run uses the recomputed unit without a warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert UnitStore(tmp_path).run("unit", lambda: {"l2": 4.0}) == {"l2": 3.0}


@pytest.mark.parametrize("empty", [True, False])
def test_directory_in_place_of_a_unit_is_named_and_recomputed(tmp_path, empty):
    """Issue 21: a directory where a unit file should be raised IsADirectoryError."""
    store = UnitStore(tmp_path)
    store.run("unit", lambda: {"l2": 2.0})
    (path,) = tmp_path.glob("*.json")
    path.unlink()
    path.mkdir()
    if not empty:
        (path / "something").write_text("kept")
    with pytest.warns(
        UserWarning, match=re.escape(f"unit file {path} is a directory, not a unit; moved it to ")
    ):
        assert UnitStore(tmp_path).run("unit", lambda: {"l2": 3.0}) == {"l2": 3.0}
    # the recomputed unit took its place; the directory was moved aside, not deleted
    assert path.is_file()
    (aside,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert aside.name.startswith(path.name + ".not-a-unit-") and empty == (not any(aside.iterdir()))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert UnitStore(tmp_path).run("unit", lambda: {"l2": 4.0}) == {"l2": 3.0}
    with pytest.raises(results.CorruptUnit, match="unreadable .*IsADirectoryError"):
        results.read_unit(aside)


def test_a_failed_write_names_its_file(tmp_path, monkeypatch):
    import errno

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError) as info:
        atomic_write_text(tmp_path / "table.csv", "x")
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(tmp_path / "table.csv")


def test_outputs_honour_the_umask(tmp_path):
    import matplotlib.pyplot as plt

    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "REPORT.md", "x")
        fig = plt.figure()
        results.save_figure(fig, tmp_path / "fig.png")
        plt.close(fig)
        os.umask(0o027)
        results.write_csv(comparisons_frame([]), tmp_path / "t.csv")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "REPORT.md").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "fig.png").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "t.csv").stat().st_mode) == 0o640


def test_run_many_shards_a_grid_and_reports_what_is_left(tmp_path):
    items = [(f"point={i}", lambda i=i: {"i": i}) for i in range(7)]
    assert UnitStore(tmp_path / "plain").run_many(items) == [{"i": i} for i in range(7)]
    with pytest.raises(ValueError, match="distinct"):
        UnitStore(tmp_path / "plain").run_many(items + items[:1])
    owners = UnitStore(tmp_path).shard_of([k for k, _ in items], 3)
    assert owners == UnitStore(tmp_path).shard_of([k for k, _ in reversed(items)], 3)  # order-free
    with pytest.raises(results.UnitsElsewhere) as pending:
        UnitStore(tmp_path / "s", shard=(2, 3)).run_many(items)
    assert pending.value.pending == {k: list(owners.values()).count(k) for k in (1, 3)}
    assert len(list((tmp_path / "s").glob("*.json"))) == list(owners.values()).count(2)
    with pytest.raises(results.MissingUnits, match=r"\(shard [13]/3\)"):
        UnitStore(tmp_path / "s", merge=3).run_many(items)
    for bad in ({"shard": (0, 3)}, {"shard": (4, 3)}, {"merge": 0}, {"shard": (1, 2), "merge": 2}):
        with pytest.raises(ValueError):
            UnitStore(tmp_path, **bad)


def test_units_keep_key_order_and_rows_carry_no_time(tmp_path, monkeypatch):
    """Tables built from unit values keep their column order after a reload, and the provenance a
    row carries names the code, not the clock, so regenerating an unchanged table is byte-identical.
    """
    value = {"step": "impute", "mechanism": "dp_gd", "epsilon": 1.5}
    assert list(UnitStore(tmp_path).run("u", lambda: dict(value))) == list(value)
    again = UnitStore(tmp_path)
    assert list(again.run("u", lambda: {})) == list(value)
    first = results.provenance_json(again.provenance("u"))
    assert "computed" not in json.loads(first) and "computed" in again.provenance("u")
    # Recomputed at another time by the same code: the row's provenance is byte-identical.
    then = time.gmtime(10**9)
    monkeypatch.setattr(identity.time, "gmtime", lambda *a: then)
    later = UnitStore(tmp_path, fresh=True)
    later.run("u", lambda: dict(value))
    assert later.provenance("u")["computed"] != again.provenance("u")["computed"]
    assert results.provenance_json(later.provenance("u")) == first == results.provenance_json()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_off_a_terminal_prints_no_bar_and_counts_units(tmp_path):
    """Not a terminal (CI log, pipe, capture): no carriage return; details only when verbose; the
    bar's steps are the outermost loop's items, the counts every unit computed or loaded."""
    for verbose in (False, True):
        stream = io.StringIO()
        progress = results.Progress("exp", stream=stream, verbose=verbose)
        store = UnitStore(tmp_path / str(verbose), progress=progress)
        store.run("lone", lambda: {"v": 0})  # outside any loop: a step of its own
        for i in progress.track(range(3), "cell"):
            # nested: no steps
            store.run_many([(f"{i}/{j}", lambda j=j: {"v": j}) for j in range(2)])
        store.run_many([("0/0", lambda: {"v": 9}), ("new", lambda: {"v": 1})])
        assert (progress.done, progress.total) == (6, 6)
        assert (progress.computed, progress.cached) == (
            8,
            1,
        ) and progress.counts() == "8 computed, 1 cached"
        text = stream.getvalue()
        assert "\r" not in text
        lines = text.splitlines()
        assert lines == (
            []
            if not verbose
            else [ln for ln in lines if re.fullmatch(r"\[exp +\d+\.\ds\] cell \d/3: \d", ln)]
        )
        assert len(lines) == (3 if verbose else 0)


class _Clock:
    """A fake clock: the estimates are tested on times the test sets, not on how busy the machine
    is."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _eta_lines(text: str) -> list[str]:
    lines = text.replace("\r", "\n").splitlines()
    for line in lines:  # one estimate per line, never two that disagree
        assert line.count("ETA") + line.count("≈") <= 1, line
    return lines


def test_progress_on_a_terminal_draws_a_tqdm_bar_with_done_total_and_our_eta(tmp_path):
    stream, clock = _Terminal(), _Clock()
    progress = results.Progress("exp", stream=stream, verbose=False, label="[1/2] exp", clock=clock)
    store = UnitStore(tmp_path, progress=progress)
    store.run_many([(str(i), lambda i=i: {"v": i}) for i in range(3)])
    text = stream.getvalue()
    assert "\r" in text and "[1/2] exp" in text
    # done/total [elapsed, counts
    assert re.search(r"3/3 \[\d\d:\d\d, 3 computed, 0 cached\]", text), text
    assert "<" not in text  # not tqdm's own ETA (steps/s), which ignores how steps differ in cost
    progress.close()
    assert stream.getvalue().endswith("\r")  # the bar is cleared (the caller prints one line)
    progress("a detail")  # not verbose: not shown
    progress.note("a note")  # notes still print, as plain lines, once the bar is gone
    assert (
        re.search(r"\r\[exp +\d+\.\ds\] a note\n$", stream.getvalue())
        and "a detail" not in stream.getvalue()
    )
    # Mid-grid the bar shows our estimate: 1 of 3 equal steps took 10 s.
    stream = _Terminal()
    progress = results.Progress("exp", stream=stream, verbose=False, clock=clock)
    with progress.grid(3):
        clock.now += 10
        progress.step(computed=True, seconds=10.0)
    assert re.search(r"1/3 \[\d\d:\d\d, ETA ~20 s\]", stream.getvalue()), stream.getvalue()
    _eta_lines(stream.getvalue())


def test_progress_estimate_weights_steps_by_their_stated_cost():
    """A grid whose units differ in size: the first (small) unit's time per unit of cost, times
    the cost left; without sizes the estimate assumes equal steps and says so."""
    clock = _Clock()
    progress = results.Progress("exp", stream=io.StringIO(), verbose=False, clock=clock)
    with progress.grid(4, costs=[1, 10, 10, 1]):
        clock.now += 2
        progress.step(computed=True, seconds=2.0, remaining=[10, 10, 1])
        assert progress.time_left() == (42.0, "from 1 computed unit, weighted by size")
        clock.now += 5  # half way through the second (cost 10 at 2 s per cost: 20 s)
        assert progress.time_left()[0] == pytest.approx(37.0)
        clock.now += 15
        progress.step(computed=True, seconds=20.0, remaining=[10, 1])  # the rate: 22 s / 11
        assert progress.time_left() == (
            pytest.approx(22.0),
            "from 2 computed units, weighted by size",
        )
        # loaded, not computed: the rate stays
        progress.step(computed=False, seconds=0.0, remaining=[1])
        assert progress.time_left()[0] == pytest.approx(2.0)
    assert progress.time_left() is None  # between grids: nothing to estimate
    progress = results.Progress("exp", stream=io.StringIO(), verbose=False, clock=clock)
    with progress.grid(4):
        clock.now += 2
        progress.step(computed=True, seconds=2.0, remaining=3)
        assert progress.time_left() == (6.0, "from 1 computed unit, assuming equal cost")
    with pytest.raises(ValueError, match="costs must be 2 positive"):
        with progress.grid(2, costs=[1.0, 0.0]):
            pass


def test_progress_status_line_is_the_grid_estimate_not_the_elapsed_time_per_step():
    """As sun2024_table1: quick lone units (calibrations) first, then a grid whose first unit's
    sweep reports chunks. The note and the status line give the same, single estimate; the lone
    units do not make the rest look fast (the old `elapsed / done × left` said 12 s here)."""
    clock, stream = _Clock(), io.StringIO()
    progress = results.Progress(
        "exp", stream=stream, verbose=False, interval=0.0, clock=clock, long_after=30.0
    )
    for _ in range(20):
        progress.unit(cached=False, seconds=0.0)
    assert progress.time_left() is None  # lone units: no grid, no estimate
    with progress.grid(2, costs=[1.0, 1.0]):
        progress.chunk(0, 10)
        clock.now += 60  # the first chunk also compiles
        progress.chunk(1, 10)
        clock.now += 60
        # 8 chunks × 60 s left in this unit, which takes 600 s, and one more unit
        progress.chunk(2, 10)
        assert progress.time_left() == (1080.0, "from the first unit's chunks, weighted by size")
        clock.now += 30
        progress.chunk(2, 10)
        lines = _eta_lines(stream.getvalue())
        notes = [line for line in lines if "≈" in line]
        assert notes == [notes[0]] and notes[0].endswith(
            "] 2 of 2 units left ≈ 18.0 min (from the first unit's chunks, weighted by size)"
        ), lines
        assert lines[-1].endswith(
            "20/22 units (20 computed, 0 cached, chunk 2/10), ETA ~17.5 min"
        ), lines
        clock.now += 450
        progress.step(computed=True, seconds=600.0, remaining=[1.0])
        assert progress.time_left() == (600.0, "from 1 computed unit, weighted by size")
    # one note per grid
    assert len([line for line in _eta_lines(stream.getvalue()) if "≈" in line]) == 1


def test_progress_plain_lines_are_rate_limited_and_say_what_is_left():
    stream, clock = io.StringIO(), _Clock()
    progress = results.Progress("exp", stream=stream, verbose=False, interval=0.0, clock=clock)
    for _ in progress.track(range(4), "cell"):
        clock.now += 1
    lines = _eta_lines(stream.getvalue())
    assert "\r" not in stream.getvalue()
    assert any(re.search(r"\] 2/4 units, ETA ~2\.0 s$", line) for line in lines), lines
    quiet_stream = io.StringIO()
    progress = results.Progress("exp", stream=quiet_stream, verbose=False, interval=3600.0)
    for _ in progress.track(range(4), "cell"):
        pass
    assert quiet_stream.getvalue() == ""


def test_progress_estimates_a_long_grid_from_its_first_unit(tmp_path):
    """One line before the rest of a long grid: how many of its units are still to compute and the
    time they will take, with the estimate's basis."""

    def grid(store, costs=None):
        return store.run_many(
            [(f"u{i}", lambda i=i: time.sleep(0.02) or {"v": i}) for i in range(5)], costs=costs
        )

    stream = io.StringIO()
    grid(
        UnitStore(
            tmp_path,
            progress=results.Progress("exp", stream=stream, verbose=False, long_after=0.05),
        )
    )
    (line,) = stream.getvalue().splitlines()
    assert re.search(
        r"\] 4 of 5 units left ≈ \d+\.\d s \(from 1 computed unit, assuming equal cost\)$", line
    ), line
    # The same grid, 3 of 5 units finished earlier: only the 1 unit still missing after the first
    # computed one counts.
    for key in ("u0", "u2", "u4"):
        UnitStore(tmp_path / "part").save(key, {"v": 0})
    stream = io.StringIO()
    grid(
        UnitStore(
            tmp_path / "part",
            progress=results.Progress("exp", stream=stream, verbose=False, long_after=0.001),
        )
    )
    assert "] 1 of 5 units left ≈ " in stream.getvalue()
    # Stated costs: the first unit (cost 1) takes 0.01 s on the test's clock, so the other four
    # (cost 40) are estimated at 0.4 s; the store times the units on the progress's clock.
    stream, clock = io.StringIO(), _Clock()
    progress = results.Progress("exp", stream=stream, verbose=False, long_after=0.001, clock=clock)
    store = UnitStore(tmp_path / "sized", progress=progress)
    costs = [1, 10, 10, 10, 10]

    def unit(i):
        clock.now += 0.01 * costs[i]
        return {"v": i}

    store.run_many([(f"u{i}", lambda i=i: unit(i)) for i in range(5)], costs=costs)
    assert (
        "] 4 of 5 units left ≈ 0.4 s (from 1 computed unit, weighted by size)" in stream.getvalue()
    )
    # A short grid says nothing.
    stream = io.StringIO()
    grid(
        UnitStore(
            tmp_path / "short", progress=results.Progress("exp", stream=stream, verbose=False)
        )
    )
    assert stream.getvalue() == ""


def test_progress_track_names_its_steps_and_counts_what_is_left():
    """A loop of 12 cells (sun2024_counterexample's E2) after 72 lone units: the note counts the
    loop's cells left (11 of 12), not the bar's steps."""
    clock, stream = _Clock(), io.StringIO()
    progress = results.Progress(
        "exp", stream=stream, verbose=False, interval=3600.0, clock=clock, long_after=30.0
    )
    for _ in range(72):
        progress.unit(cached=False, seconds=0.1)
    for _ in progress.track(range(12), "E2 cell"):
        clock.now += 10
    (note,) = stream.getvalue().splitlines()
    assert note.endswith(
        "] 11 of 12 E2 cells left ≈ 1.8 min (from 1 computed E2 cell, assuming equal cost)"
    ), note
    # With sizes, a loop weights by them too.
    stream = io.StringIO()
    progress = results.Progress(
        "exp", stream=stream, verbose=False, interval=3600.0, clock=clock, long_after=30.0
    )
    for size in progress.track([1, 3, 3], "cell", costs=[1, 3, 3]):
        clock.now += 10 * size
    (note,) = stream.getvalue().splitlines()
    assert note.endswith("] 2 of 3 cells left ≈ 60 s (from 1 computed cell, weighted by size)"), (
        note
    )


def test_progress_estimates_a_long_sweep_from_its_second_chunk():
    stream, clock = io.StringIO(), _Clock()
    progress = results.Progress(
        "exp", stream=stream, verbose=False, long_after=0.05, interval=3600.0, clock=clock
    )
    for done in range(11):
        progress.chunk(done, 10)
        clock.now += 5 if done else 50  # the first chunk also compiles
    (line,) = stream.getvalue().splitlines()
    assert line.endswith(
        "] 8 of 10 chunks left ≈ 40 s (this unit, from its chunks after the first)"
    ), line
    # that lone unit is done: the next lone sweep gets its own line
    progress.unit(cached=False, seconds=95.0)
    for done in range(4):
        progress.chunk(done, 3)
        clock.now += 50
    assert (
        stream.getvalue()
        .splitlines()[-1]
        .endswith("] 1 of 3 chunks left ≈ 50 s (this unit, from its chunks after the first)")
    )


def test_progress_quiet_prints_nothing_and_notebook_kernels_without_widgets_get_lines(monkeypatch):
    stream = _Terminal()
    progress = results.Progress("exp", stream=stream, quiet=True)
    progress("detail")
    progress.note("note")
    for _ in progress.track(range(2), "x"):
        pass
    assert stream.getvalue() == "" and progress.done == 2
    # A Jupyter kernel's stderr is no terminal: without ipywidgets, plain lines (no tqdm warning).
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    monkeypatch.setattr(progress_module, "_notebook_widgets", lambda: False)
    stream = io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        progress = results.Progress("exp", stream=stream)
        for _ in progress.track(range(2), "x"):
            pass
    assert progress._mode == "lines" and "\r" not in stream.getvalue()


@pytest.mark.parametrize("widgets", [False, True], ids=["without_ipywidgets", "with_ipywidgets"])
def test_progress_in_a_jupyter_kernel_draws_a_widget_or_prints_plain_lines(widgets):
    """In a real kernel stderr is no terminal: with ipywidgets the bar is tqdm's widget, without
    them plain lines; the details come out clean either way (no carriage return)."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    if widgets:
        pytest.importorskip("ipywidgets")
    repo = Path(__file__).resolve().parents[1]
    source = "\n".join(
        [
            "import tempfile",
            "from experiments.results import Progress, UnitStore, progress",
            # the kernel without ipywidgets, whether or not this environment has them
            *([] if widgets else ["progress._notebook_widgets = lambda: False"]),
            "p = Progress('nb', verbose=True)",
            (
                "UnitStore(tempfile.mkdtemp(), progress=p).run_many([(str(i), lambda i=i: {'v': i})"
                " for i in range(3)])"
            ),
            "for _ in p.track(range(2), 'x'): pass",
            "p.close()",
            "print(p.counts())",
        ]
    )
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    nbclient.NotebookClient(
        notebook, timeout=120, resources={"metadata": {"path": str(repo)}}
    ).execute()
    outputs = notebook.cells[0].outputs
    drawn = [o for o in outputs if o.get("output_type") == "display_data"]
    assert bool(drawn) == widgets, outputs
    assert all("application/vnd.jupyter.widget-view+json" in o["data"] for o in drawn)
    text = "".join(o["text"] for o in outputs if o.get("output_type") == "stream")
    assert "\r" not in text and "x 2/2: 1" in text and "3 computed, 0 cached" in text


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_experiment_sources_follow_its_imports_and_skip_the_runner(tmp_path):
    _tree(
        tmp_path,
        {
            "dpprep/core.py": "X = 1\n",
            "experiments/__init__.py": "RUNNER = 1\n",
            "experiments/results.py": "import json\n",
            "experiments/shared.py": "from . import results\n",  # relative, transitive
            "experiments/a.py": "from experiments import RunContext, shared\n",
            # inside a function
            "experiments/b.py": ("def f():\n    import experiments.results as r\n    return r\n"),
            "experiments/other.py": "Y = 2\n",
        },
    )
    assert results.experiment_sources("experiments.a", tmp_path) == (
        "dpprep",
        "experiments/a.py",
        "experiments/results.py",
        "experiments/shared.py",
    )
    assert results.experiment_sources("experiments.b", tmp_path) == (
        "dpprep",
        "experiments/b.py",
        "experiments/results.py",
    )
    with pytest.raises(ValueError, match="no experiment module"):
        results.experiment_sources("experiments.missing", tmp_path)

    def digest(module):
        return results.tree_digest(tmp_path, results.experiment_sources(module, tmp_path))

    before = {m: digest(m) for m in ("experiments.a", "experiments.b")}
    _tree(tmp_path, {"experiments/other.py": "Y = 3\n", "experiments/__init__.py": "RUNNER = 2\n"})
    assert {
        m: digest(m) for m in before
    } == before  # another experiment or the runner: units stay valid
    _tree(tmp_path, {"experiments/shared.py": "from . import results  # a comment: not code\n"})
    assert {m: digest(m) for m in before} == before  # a comment (or docstring) computes nothing
    _tree(tmp_path, {"experiments/shared.py": "from . import results\nEDITED = True\n"})
    after = {m: digest(m) for m in before}
    assert (
        after["experiments.a"] != before["experiments.a"]
        and after["experiments.b"] == before["experiments.b"]
    )
    _tree(tmp_path, {"dpprep/core.py": "X = 2\n"})
    assert all(digest(m) != after[m] for m in before)  # the package: every experiment


def test_a_package_experiment_is_keyed_on_what_computes_its_units(tmp_path):
    _tree(
        tmp_path,
        {
            "dpprep/core.py": "X = 1\n",
            "experiments/__init__.py": "RUNNER = 1\n",
            "experiments/results.py": "import json\n",
            "experiments/plotting.py": "from experiments.results import json\n",
            "experiments/c/__init__.py": "from . import compute, plots\n",
            "experiments/c/__main__.py": "import experiments\n",
            "experiments/c/compute.py": "from .config import GRID\n",
            "experiments/c/config.py": "GRID = (1, 2)\n",
            "experiments/c/plots.py": "from experiments import plotting\n",
            "experiments/c/cost.py": "from experiments.c.config import GRID\n",
            "experiments/c/targets.csv": "paper\n1.0\n",
            "experiments/d/__init__.py": "from experiments.c.config import GRID\n",
        },
    )
    assert results.experiment_sources("experiments.c", tmp_path) == (
        "dpprep",
        "experiments/c/__init__.py",
        "experiments/c/compute.py",
        "experiments/c/config.py",
    )
    # importing a submodule imports its package too
    assert results.experiment_sources("experiments.d", tmp_path) == (
        "dpprep",
        "experiments/c/__init__.py",
        "experiments/c/compute.py",
        "experiments/c/config.py",
        "experiments/d/__init__.py",
    )

    def digest():
        return results.tree_digest(tmp_path, results.experiment_sources("experiments.c", tmp_path))

    before = digest()
    for edit in (
        {"experiments/c/plots.py": "from experiments import plotting\nDPI = 90\n"},
        {"experiments/plotting.py": "WIDTH = 4\n"},
        {"experiments/c/cost.py": "FLOPS = 10\n"},
        {"experiments/c/targets.csv": "paper\n2.0\n"},
        {"experiments/c/__main__.py": "import experiments  # run alone\nX = 1\n"},
    ):
        _tree(tmp_path, edit)
        assert digest() == before, edit  # figures, cost models, targets: units stay valid
    _tree(tmp_path, {"experiments/c/config.py": "GRID = (1, 2, 3)\n"})
    assert digest() != before


def test_units_are_keyed_on_the_store_source(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return {"n": len(calls)}

    assert UnitStore(tmp_path, source="one").run("u", compute) == {"n": 1}
    assert UnitStore(tmp_path, source="one").run("u", compute) == {"n": 1}  # same code: reused
    assert UnitStore(tmp_path, source="two").run("u", compute) == {"n": 2}  # other code: recomputed
    store = UnitStore(tmp_path, source="two")
    assert store.run("u", compute) == {"n": 2} and store.provenance("u")["source"] == "two"


def test_run_all_keys_each_experiment_on_its_own_sources(tmp_path):
    import experiments

    module = experiments.REGISTRY["hu2024_pipeline_demo"][0]
    sources = results.experiment_sources(module)
    assert sources[0] == "dpprep" and {
        "experiments/hu2024_pipeline_demo/__init__.py",
        "experiments/hu2024_table3/__init__.py",  # imported by the demo
        "experiments/results/store.py",
    } <= set(sources)
    folders = {Path(s).parts[1] for s in sources[1:]}
    assert folders <= {"hu2024_pipeline_demo", "hu2024_table3", "results", "targets.py"}, folders
    assert not any(Path(s).name in results.NOT_KEYED for s in sources)
    assert (
        experiments.unit_source("hu2024_pipeline_demo")
        == results.experiment_digest(module)
        != results.source_digest()
    )


def test_a_unit_records_its_computing_time_and_rows_leave_it_out(tmp_path):
    store = UnitStore(tmp_path)
    store.run("u", lambda: (time.sleep(0.02), {"v": 1})[1])
    recorded = store.provenance("u")
    assert 0.02 <= recorded["seconds"] < 5
    assert UnitStore(tmp_path).run("u", lambda: {"v": 2}) == {
        "v": 1
    }  # the time does not make it stale
    assert "seconds" not in json.loads(results.provenance_json(recorded))
