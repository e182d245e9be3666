"""``python -m experiments.sun2024_table2``: run this experiment alone."""

from experiments import main_for

main_for("sun2024_table2")
