"""``python -m experiments.datasets``: run this experiment alone."""

from experiments import main_for

main_for("datasets")
