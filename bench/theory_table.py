"""Every rule's theory line for the configurations of issue 20, beside the figures it quotes.

Run by hand (never part of the tests):

    python bench/theory_table.py

Four options, the gold one equally often in each place; voters independent, each right with
its p and otherwise on one of the three wrong options at random (what `demo/oracle@p` plays).
Each line comes from `panel_cli.eval.theory`, the code `panel eval` draws its theory lines
with: exact when the count's states can be listed, else a seeded simulation with its standard
error. No model is called.
"""

from __future__ import annotations

import math
import time

from panel_cli.eval.theory import Alone, Confer, Council, Count, Rule, theory, uniform_places

FOUR = uniform_places(4)
EVEN = (1.0,) * 5
NAMES = ("v1", "v2", "v3", "v4", "v5")


def lines() -> list[tuple[str, tuple[float, ...], Rule, float | None]]:
    """(voters, their accuracies, the rule, the issue's figure if it quotes one)."""
    jury = (0.7,) * 5
    mixed = (0.9, 0.6, 0.6, 0.6, 0.6)
    optimal = tuple(math.log(3 * p / (1 - p)) for p in mixed)
    return [
        ("5 × 0.7", jury, Count("majority", EVEN), 0.837),
        ("5 × 0.7", jury, Count("supermajority", EVEN, threshold=0.667), 0.528),
        ("5 × 0.7", jury, Count("unanimous", EVEN), None),
        ("5 × 0.7", jury, Count("plurality", EVEN), None),
        ("5 × 0.7", jury, Count("plurality", EVEN, tie_break="first"), None),
        ("5 × 0.7", jury, Count("plurality", EVEN, tie_break="leader", leader=0, leader_name="v1"), None),
        ("5 × 0.7", jury, Count("ranked_choice", EVEN), None),
        ("5 × 0.7", jury, Count("ranked_choice", EVEN, rankings="random"), None),
        ("5 × 0.7", jury, Confer("confidence", (80.0,) * 5), 0.910),
        ("5 × 0.7", jury, Confer("log_odds", (80.0,) * 5), None),
        ("5 × 0.7", jury, Council(NAMES), 0.903),
        ("0.9 + 4 × 0.6", mixed, Alone(0, "v1 (the best member)"), 0.900),
        ("0.9 + 4 × 0.6", mixed, Count("majority", EVEN), 0.786),
        ("0.9 + 4 × 0.6", mixed, Count("plurality", EVEN), None),
        ("0.9 + 4 × 0.6", mixed, Count("weighted", optimal), 0.890),
        ("0.9 + 4 × 0.6", mixed, Count("weighted_plurality", optimal), 0.928),
        ("0.9 + 4 × 0.6", mixed, Confer("confidence", (80.0,) * 5), None),
        ("0.9 + 4 × 0.6", mixed, Confer("log_odds", tuple(100 * p for p in mixed)), None),
        ("4 × 0.6 + 0.9", mixed[::-1], Confer("log_odds", tuple(100 * p for p in mixed[::-1])), None),
        ("0.9 + 4 × 0.6", mixed, Council(NAMES), None),
    ]


def main() -> None:
    print(f"{'voters':<14} {'theory':>7} {'how':<11} {'issue':>6}  rule")
    for voters, accuracies, rule, figure in lines():
        started = time.perf_counter()
        line = theory(rule, accuracies, FOUR)
        took = time.perf_counter() - started
        value = "—" if line.accuracy is None else f"{line.accuracy:.4f}"
        how = line.way if line.standard_error is None else f"±{line.standard_error:.4f}"
        quoted = "" if figure is None else f"{figure:.3f}"
        print(f"{voters:<14} {value:>7} {how:<11} {quoted:>6}  {line.rule} [{took:.2f}s]")
    print(
        "\nconfer log_odds here has calibrated confidences (each voter's p × 100). Its K is the block's five answers,"
        "\nnot the four options, so two voters at 0.6 (2 log 6) tie one at 0.9 (log 36): the tie goes to the lowest"
        "\nlabel, which is the 0.9 voter when it is listed first and a 0.6 voter when it is listed last."
    )


if __name__ == "__main__":
    main()
