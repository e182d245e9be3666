"""Table 1 as printed, with the spec §10 corrections applied and flagged: the rows of
:data:`dpprep.preprocess.privacy.table1.TABLE1_ROWS` rendered as markdown and LaTeX."""

from __future__ import annotations

from dpprep.preprocess.privacy import table1

from .config import COLUMNS, HEADERS, TEX_HEADERS


def markdown_table() -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    for row in table1.TABLE1_ROWS:
        lines.append("| " + " | ".join(row[c][0].replace("|", "\\|") for c in COLUMNS) + " |")
    return (
        "# Table 1 (Hu, Sanyal, Schölkopf 2024): RDP and Smooth RDP of six mechanisms\n\n"
        "ε is the mechanism's own privacy parameter (noise level); τ an L12 distance budget; "
        "each correction of the printed table is named in the last column (the statements of"
        " Theorems 9-14 against their proofs, App. A.2).\n\n" + "\n".join(lines) + "\n"
    )


def latex_table() -> str:
    body = [" & ".join(row[c][1] for c in COLUMNS) + r" \\" for row in table1.TABLE1_ROWS]
    return (
        "\\begin{tabular}{llllll}\n\\toprule\n"
        + " & ".join(TEX_HEADERS)
        + " \\\\\n\\midrule\n"
        + "\n".join(body)
        + "\n\\bottomrule\n\\end{tabular}\n"
    )
