"""``python -m experiments.wang2026_checks``: run this experiment alone."""

from experiments import main_for

main_for("wang2026_checks")
