"""scripts/compare_profiles.py: quick vs paper rows matched and the changes listed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "compare_profiles", REPO / "scripts" / "compare_profiles.py"
)
compare_profiles = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare_profiles)


def _write(directory: Path, experiment_id: str, rows: list[tuple[str, str, str]]) -> None:
    (directory / experiment_id).mkdir(parents=True)
    pd.DataFrame(
        [
            {
                "profile": directory.name,
                "quantity": q,
                "paper": "",
                "measured": m,
                "tolerance": "",
                "status": s,
                "note": "",
            }
            for q, m, s in rows
        ]
    ).to_csv(directory / experiment_id / "comparisons.csv", index=False)


def test_a_changed_status_a_changed_number_and_a_resized_quantity_are_reported(tmp_path):
    quick, paper = tmp_path / "quick", tmp_path / "paper"
    _write(
        quick,
        "hu2024_fig3",
        [
            ("ordering (a) < (c)", "yes", "pass"),
            ("PTR passes at n = 2000", "⊥", "miss"),
            ("excess risk", "0.10", "info"),
            ("same", "1", "pass"),
        ],
    )
    _write(
        paper,
        "hu2024_fig3",
        [
            ("ordering (a) < (c)", "no", "miss"),
            ("PTR passes at n = 10000", "0.2", "pass"),
            ("excess risk", "0.05", "info"),
            ("same", "1", "pass"),
            ("new row", "x", "info"),
        ],
    )
    _write(quick, "audit", [("a", "1", "pass")])
    text = compare_profiles.compare(quick, paper)
    assert "| `hu2024_fig3` | 2 / 1 / 1 | 2 / 1 / 2 | 2 | 3 | 0 | 1 |" in text
    assert "| ordering (a) < (c) | pass: yes | miss: no |" in text
    assert "| PTR passes at n = 2000 → PTR passes at n = 10000 | miss: ⊥ | pass: 0.2 |" in text
    assert "- new row: info, x" in text
    assert "| `audit` | 1 / 0 / 0 | — | not compared: no results in paper |" in text


def test_cli_writes_the_file_and_refuses_a_missing_directory(tmp_path, capsys):
    quick, paper = tmp_path / "quick", tmp_path / "paper"
    _write(quick, "datasets", [("rows", "1", "pass")])
    _write(paper, "datasets", [("rows", "1", "pass")])
    out = tmp_path / "COMPARISON.md"
    assert compare_profiles.main([str(quick), str(paper), "--out", str(out)]) == 0
    assert "| `datasets` | 1 / 0 / 0 | 1 / 0 / 0 | 0 | 0 | 0 | 0 |" in out.read_text()
    try:
        compare_profiles.main([str(quick), str(tmp_path / "absent")])
    except SystemExit as exit_:
        assert exit_.code == 2
    assert "is not a directory" in capsys.readouterr().err
