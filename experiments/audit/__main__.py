"""``python -m experiments.audit``: run this experiment alone."""

from experiments import main_for

main_for("audit")
