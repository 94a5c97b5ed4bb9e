"""The symbolic reading of a solution's steps (``rewards.training.symbolic``): equalities over variables bound
earlier, numbers from nowhere, a time budget that holds in any thread; and a lexical head saved on the text
features before the symbolic columns still scores with the columns it was fitted on."""
from __future__ import annotations

import math
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from rewards.training.symbolic import NAMES, symbolic_features


def _column(problem: str, steps: list[str], name: str) -> list[float]:
    return [round(math.expm1(v)) if name != "unfounded_share" else float(v)
            for v in symbolic_features(problem, steps)[:, NAMES.index(name)]]


@pytest.mark.parametrize(("problem", "step", "checked", "wrong"), [
    ("Let $x = 3$ and $y=4$.", "Then $x^2 + y^2 = 25$.", 1, 0),
    ("Let $x = 3$ and $y=4$.", "Then $x^2 + y^2 = 26$.", 1, 1),
    ("let n = 12", "So $2n + 1 = 25$ and $3(n+1) = 39$ and $n \\cdot 2 = 24$.", 3, 0),
    ("let n = 12", "So $n \\times 3 = 38$.", 1, 1),
    ("Suppose $a = \\frac{1}{2}$ and $b=4$.", "Then $\\frac{b}{2} = 2$ and $a \\cdot b = 2$ and $2a = 1$.", 3, 0),
    ("Suppose $a = \\frac{1}{2}$.", "Then $3a = 1.5$ and $a^{-1} = 2$.", 2, 0),
    ("Let $x_{1} = 5$ and $\\alpha = 2$.", "So $x_1 \\alpha = 10$.", 1, 0),
    ("Let $x = 1/3$.", "So $x = 0.333$ and $3x = 1$.", 1, 0),  # a rebinding, then a check within rounding
    ("Let $r = 2$.", "The area is $\\pi r^2 = 12.57$.", 1, 0),  # a side shown rounded agrees to its last digit
    ("Let $x = 0.33$.", "So $3x = 1.2$.", 1, 1),  # a rounded binding is let off by a hundredth, not more
])
def test_equalities_over_bound_variables_are_checked(problem: str, step: str, checked: int, wrong: int) -> None:
    assert _column(problem, [step], "bound_checked") == [checked]
    assert _column(problem, [step], "bound_wrong") == [wrong]


def test_a_binding_in_a_step_carries_to_later_steps_and_a_rebinding_replaces_it() -> None:
    steps = ["Let $x = 3$.", "So $2x = 6$.", "Now let $x = 5$.", "So $2x = 10$.", "So $2x = 6$."]
    assert _column("Find x.", steps, "bound_checked") == [0, 1, 0, 1, 1]
    assert _column("Find x.", steps, "bound_wrong") == [0, 0, 0, 0, 1]


@pytest.mark.parametrize("step", [
    "$\\sin x = 0.5$",  # a function the evaluator does not read
    "$f(x) = 7$",  # an unbound name
    "$2x = \\pm 6$",
    "$y = 2x + 1$ so $y = 8$",  # y is bound to 7, then rebound to 8: not an equality to check
    "$2xy = 13$",  # a word, not a product of bound names
    "$x = 5$ cm, so $2x = 10$ cm",  # a quantity with a unit
    "$|x| = 4$",
    "$x! = 7$",
    "So we want to solve $x^2 = 4$.",  # an equation to solve: x is an unknown again, whatever it was
    "We get $x - 3 = -2x - 4$.",  # a name on both sides
])
def test_what_does_not_parse_is_unchecked_never_wrong(step: str) -> None:
    assert _column("Let $x = 3$.", [step], "bound_wrong") == [0]


@pytest.mark.parametrize("first", ["So $x = 2$ or $x = 5$.", "We solve $x^2 = 16$.", "So $-(x-3) = 2x + 4$."])
def test_a_name_bound_to_two_values_or_solved_for_is_unbound_after(first: str) -> None:
    assert _column("Let $x = 3$.", [first, "Then $2x = 4$."], "bound_checked") == [0, 0]


def test_numbers_from_nowhere_are_counted_and_derived_numbers_are_not() -> None:
    problem = "Tom has 12 apples and 17 pears."
    steps = ["So he has 12 + 17 = 29 fruits.", "He eats 29 fruits in 29 days.", "So he has 29 fruits.",
             "Half of the apples are 6.", "He sells 1734 fruits.", "So 41 apples."]
    assert _column(problem, steps, "unfounded_numbers") == [0, 0, 0, 0, 1, 0]  # 41 = 12 + 29
    assert _column(problem, steps, "unfounded_share")[4] == 1.0
    assert _column(problem, ["He sells 1734 and 29 fruits."], "unfounded_share") == [0.5]


def test_a_step_with_no_number_has_no_share_and_no_steps_no_rows() -> None:
    assert symbolic_features("Let $x = 3$.", ["We think."]).tolist() == [[0.0, 0.0, 0.0, 0.0]]
    assert symbolic_features("Let $x = 3$.", []).shape == (0, len(NAMES))


def test_the_budget_holds_in_a_thread_on_pathological_input() -> None:
    """No signal: the budget is counted inside the evaluator and the number search, so a thread can run it."""
    steps = ["$9^9^9^9 = 3$", "$x = " + "(" * 400 + "1" + ")" * 400 + "$",
             "$" + "+".join(["x"] * 5000) + " = 3$", " ".join(str(n) for n in range(10_000)),
             "=".join(["2x"] * 3000)]
    answers: list[np.ndarray] = []
    began = time.monotonic()
    worker = threading.Thread(target=lambda: answers.append(symbolic_features("Let $x = 3$.", steps)))
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive() and time.monotonic() - began < 1.0
    assert answers[0].shape == (len(steps), len(NAMES))
    assert answers[0][0, NAMES.index("bound_wrong")] == 0  # a power out of bounds is unchecked


def test_the_budget_is_counted_not_timed() -> None:
    """A step past its budget is cut at the same place every time, however loaded the machine: the columns a head
    was trained on are the columns it scores."""
    from rewards.training import symbolic

    step = " ".join(str(7 * n + 1000003) for n in range(symbolic.STEP_BUDGET * 2))
    readings = []
    for _ in range(2):
        symbolic._after.cache_clear()
        readings.append(symbolic_features("Let $x = 3$.", [step]))
    unfounded = readings[0][0, NAMES.index("unfounded_numbers")]
    assert np.array_equal(readings[0], readings[1])
    # cut by the budget: fewer numbers judged than the step holds, the rest unchecked
    assert 0 < np.expm1(unfounded) < symbolic.STEP_BUDGET


def test_a_lexical_head_saved_before_the_symbolic_columns_scores_with_its_own(tmp_path: Path) -> None:
    """A head.npz without ``text_features`` was fitted on set 1: the scorer builds those columns for it, and a
    head saved now carries set 2 and scores with the symbolic columns."""
    from rewards.training.heads.features import LEGACY_TEXT_FEATURES, TEXT_FEATURES, step_features
    from rewards.training.heads.lexical import LexicalHead
    from rewards.training.heads.persistence import HEAD_FILE, save_head, text_features_of
    from rewards.training.heads.scorer import HeadScorer
    from rewards.training.heads.spec import Recipe
    from rewards.training.modeling import ModelSpec

    problem = "Let $x = 3$. Tom has 12 apples."
    rows = [[f"So $2x = {6 + (i % 2)}$.", f"He has {12 + 5 * (i % 3)} apples."] for i in range(40)]
    labels = np.array([[1 - (i % 2), int(i % 3 == 0)] for i in range(40)]).ravel()
    texts = [step for row in rows for step in row]
    spec = ModelSpec(kind="prm", separator_token="\n", aggregation="min", neutral="positive", base_model="default",
                     max_length=128, lora=False, method="head", features="lexical")
    scores = {}
    for text_features in (LEGACY_TEXT_FEATURES, TEXT_FEATURES):
        x = np.vstack([step_features(None, problem, row, Recipe.LEXICAL, text_features=text_features)
                       for row in rows])
        head, _ = LexicalHead.fit(x, texts, labels, negative_weight="balanced", iterations=200, seed=0)
        folder = tmp_path / f"set-{text_features}"
        folder.mkdir()
        save_head(head, folder)
        if text_features == LEGACY_TEXT_FEATURES:  # as a head saved before the sets were numbered
            with np.load(folder / HEAD_FILE, allow_pickle=False) as saved:
                np.savez(folder / HEAD_FILE, **{k: saved[k] for k in saved.files if k != "text_features"})
        assert text_features_of(folder) == text_features
        scorer = HeadScorer(folder, spec)
        scores[text_features] = scorer.steps([(problem, row) for row in rows[:4]])
        expected = head.predict(np.vstack([step_features(None, problem, row, Recipe.LEXICAL,
                                                         text_features=text_features) for row in rows[:4]]),
                                texts[:8])
        np.testing.assert_allclose(np.ravel(scores[text_features]), expected, rtol=1e-6)
    widths = [step_features(None, problem, rows[0], Recipe.LEXICAL, text_features=v).shape[1]
              for v in (LEGACY_TEXT_FEATURES, TEXT_FEATURES)]
    assert widths[1] == widths[0] + 2 * len(NAMES)  # the step's own symbolic columns and its previous step's
