"""``python -m experiments.hu2024_fig3_selection``: run this experiment alone."""

from experiments import main_for

main_for("hu2024_fig3_selection")
