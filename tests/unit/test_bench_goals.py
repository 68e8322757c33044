"""make bench's verdict: a goal it could not measure is not a goal met (docs/benchmarks.md)."""

from bench import measure

GOALS = {"a_ratio": ("<= 1.5", lambda v: v <= 1.5), "a_share": (">= 0.97", lambda v: v >= 0.97)}


def test_every_goal_measured_and_met_is_met() -> None:
    assert measure.goals_met({"a_ratio": 1.2, "a_share": 0.99, "reported_only": 3.0}, GOALS)


def test_a_goal_missed_is_not_met() -> None:
    assert not measure.goals_met({"a_ratio": 1.6, "a_share": 0.99}, GOALS)


def test_a_goal_not_measured_is_not_met_and_shows_in_the_table(capsys) -> None:
    figures = {"a_ratio": 1.2}
    assert not measure.goals_met(figures, GOALS)
    measure.print_table(figures, GOALS)
    row = next(line for line in capsys.readouterr().out.splitlines() if "a_share" in line)
    assert row.split() == ["a_share", "-", ">=", "0.97", "NOT", "MEASURED"]
