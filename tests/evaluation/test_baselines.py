"""The trivial baselines beside every reward model: their rules, their choices made on training solutions only, and
their figures on the same bootstrap draws as the model's (pure Python + NumPy, no Django)."""
from __future__ import annotations

import numpy as np
import pytest

from rewards.evaluation import Pool, best_of_n
from rewards.evaluation.baselines import (
    BASELINES,
    Choice,
    baseline_name,
    baseline_verdicts,
    candidate_scores,
    fit,
    paired_auroc,
    paired_step_figures,
    step_scores,
)
from rewards.evaluation.intervals import step_level_intervals
from rewards.evaluation.step_metrics import auroc


def _solutions(seed: int, count: int = 120, long_is_wrong: bool = True) -> tuple[list[list[str]], list[list[int]],
                                                                                 list[str]]:
    """Solutions whose first error is the first step longer than 60 characters (or, with ``long_is_wrong`` False,
    shorter than 20): a rule the step-length baseline can learn exactly."""
    rng = np.random.default_rng(seed)
    solutions, ratings, groups = [], [], []
    for index in range(count):
        lengths = rng.integers(25, 55, size=int(rng.integers(2, 7)))
        if rng.random() < 0.5:
            at = int(rng.integers(0, lengths.size))
            lengths[at] = 80 if long_is_wrong else 10
        steps = ["x" * int(n) for n in lengths]
        first = next((i for i, n in enumerate(lengths) if (n > 60 if long_is_wrong else n < 20)), -1)
        ratings.append([1] * len(steps) if first == -1 else [1] * first + [-1] + [0] * (len(steps) - first - 1))
        solutions.append(steps)
        groups.append(f"p{index // 3}")
    return solutions, ratings, groups


def test_step_length_learns_the_cut_and_the_direction_on_training_solutions() -> None:
    train, train_ratings, _ = _solutions(0)
    longer = fit("step_length", train, train_ratings)
    assert longer.sign == 1.0 and 54 <= longer.cut < 80  # the longest right step is 54 characters
    scores = step_scores(longer, [["x" * 40, "x" * 90, "x" * 10]])[0]
    assert list(scores < 0.5) == [False, True, False]  # only the step longer than the cut is flagged
    shorter, shorter_ratings, _ = _solutions(1, long_is_wrong=False)
    chosen = fit("step_length", shorter, shorter_ratings)
    assert chosen.sign == -1.0 and 10 <= -chosen.cut < 25  # here shorter is suspect: flagged below the cut
    assert list(step_scores(chosen, [["x" * 40, "x" * 5]])[0] < 0.5) == [False, True]


def test_choices_come_from_the_training_solutions_not_the_judged_ones() -> None:
    train, train_ratings, _ = _solutions(0)
    judged, judged_ratings, _ = _solutions(5, long_is_wrong=False)
    assert fit("step_length", train, train_ratings) != fit("step_length", judged, judged_ratings)
    choice = fit("step_length", train, train_ratings)
    # judged on items whose rule is the opposite, the baseline trained the other way is poor, as it should be
    doc = paired_step_figures(step_scores(choice, judged), judged_ratings, judged, {"step_length": choice})
    assert doc["model"]["first_error_f1"]["value"] < 0.7


def test_paired_figures_share_the_models_bootstrap_draws() -> None:
    solutions, ratings, groups = _solutions(2)
    rng = np.random.default_rng(0)
    model = [rng.random(len(steps)) for steps in solutions]
    choices = {name: fit(name, *_solutions(3)[:2]) for name in BASELINES}
    doc = paired_step_figures(model, ratings, solutions, choices, groups=groups, threshold=0.5, draws=300, seed=4)
    reference = step_level_intervals(model, ratings, groups=groups, threshold=0.5, draws=300, seed=4)
    # the model's step AUROC and F1 at 0.5, with the very intervals step_level_intervals draws
    for mine, theirs in (("step_auroc", "step_auroc"), ("first_error_f1", "first_error_f1")):
        for key in ("value", "low", "high"):
            assert doc["model"][mine][key] == pytest.approx(reference[theirs][key], abs=1e-9)
    assert set(doc["baselines"]) == set(BASELINES)
    step_length = doc["baselines"]["step_length"]
    assert step_length["first_error_f1"]["value"] > 0.9  # the data's own rule
    assert doc["strongest"]["first_error_f1"] == "step_length"
    assert step_length["diff"]["first_error_f1"]["high"] < 0  # a random model is plainly behind it
    sentences = baseline_verdicts(doc)
    assert any(s.startswith("PRM does not beat the strongest baseline on first-error F1: step length is ahead")
               for s in sentences)


def test_a_model_that_reads_the_rule_beats_the_baselines_and_the_verdict_says_so() -> None:
    solutions, ratings, groups = _solutions(2, count=240)
    perfect = [np.array([0.1 if r == -1 else 0.9 for r in rated]) for rated in ratings]
    choices = {name: fit(name, *_solutions(3)[:2]) for name in ("position", "random")}
    doc = paired_step_figures(perfect, ratings, solutions, choices, groups=groups, draws=300)
    assert doc["strongest"]["step_auroc"] in ("position", "random")
    sentences = baseline_verdicts(doc)
    assert sentences[0].startswith("PRM beats the strongest baseline on step AUROC")


def test_random_is_seeded_and_length_and_position_pick_best_of_n_candidates() -> None:
    solutions = [["a" * 10, "b" * 10], ["c" * 100], ["d"] * 5]
    random = Choice(name="random", sign=1.0, solution_sign=1.0, cut=0.5, scale=0.25, seed=7)
    assert np.array_equal(candidate_scores(random, solutions), candidate_scores(random, solutions))
    assert not np.array_equal(candidate_scores(random, solutions),
                              candidate_scores(Choice(**{**random.to_dict(), "seed": 8}), solutions))
    shortest = Choice(name="length", sign=1.0, solution_sign=1.0, cut=0.0, scale=1.0)
    assert int(np.argmax(candidate_scores(shortest, solutions))) == 2  # 5 characters
    fewest = Choice(name="position", sign=1.0, solution_sign=1.0, cut=0.0, scale=1.0)
    assert int(np.argmax(candidate_scores(fewest, solutions))) == 1  # one step
    with pytest.raises(ValueError, match="unknown baseline"):
        fit("words", solutions, [[1, 1], [1], [1] * 5])


def test_best_of_n_gives_each_baseline_its_cells_and_a_paired_interval_against_the_prm() -> None:
    rng = np.random.default_rng(0)
    pools, texts = [], []
    for index in range(24):
        right = rng.random(8) < 0.4
        lengths = np.where(right, 2, 6)  # right answers are shorter: the length baseline picks them
        texts.append([["s"] * int(n) for n in lengths])
        pools.append(Pool.from_arrays(["1" if ok else str(2 + i) for i, ok in enumerate(right)], list(right),
                                      list(rng.random(8)), None, problem=f"p{index}"))
    shortest = Choice(name="length", sign=1.0, solution_sign=1.0, cut=0.0, scale=1.0)
    scores = {"length": [candidate_scores(shortest, solutions) for solutions in texts]}
    doc = best_of_n(pools, ns=[1, 4, 8], trials=50, seed=1, baselines=scores)
    length = doc["baselines"]["length"]
    assert length["8"]["mean"] == pytest.approx(float(np.mean([p.is_correct.any() for p in pools])))
    assert doc["intervals"]["methods"]["length"]["8"]["low"] <= length["8"]["mean"]
    paired = doc["intervals"]["paired"]["prm-length"]["8"]
    assert paired["high"] < 0  # a random PRM is behind the rule that reads the data's own signal
    with pytest.raises(ValueError, match="length"):
        best_of_n(pools, ns=[1], trials=5, baselines={"length": scores["length"][:3]})


def test_a_best_of_n_curve_that_falls_is_named_from_its_paired_interval() -> None:
    """A PRM that ranks a few wrong answers above the right one: the more candidates, the surer it meets them."""
    from rewards.evaluation.intervals import curve_falls

    pools = []
    for index in range(30):
        scores = [0.5] + [1.0] * 4 + [0.0] * 59
        pools.append(Pool.from_arrays(["1"] + [str(2 + i) for i in range(63)], [True] + [False] * 63, scores,
                                      [1.0] + [0.0] * 63, problem=f"p{index}"))
    doc = best_of_n(pools, ns=[1, 8, 64], trials=200, seed=0)
    curve = doc["intervals"]["curve"]
    assert curve["prm"]["to"] == "64" and curve["prm"]["high"] < 0
    assert curve["orm"]["diff"] > 0  # the ORM puts the right answer first: more candidates only help it
    [sentence] = curve_falls(curve)
    assert sentence.startswith("PRM best-of-N falls as N grows: at N = 64 it is ")
    assert best_of_n(pools, ns=[1, 4], trials=20)["intervals"]["curve"] == {}  # no N = 8 to compare with


def test_a_second_choice_of_a_rule_made_elsewhere_is_named_where_in_the_verdict() -> None:
    solutions, ratings, groups = _solutions(2)
    rng = np.random.default_rng(1)
    model = [rng.random(len(steps)) for steps in solutions]
    choices = {"step_length": fit("step_length", *_solutions(5, long_is_wrong=False)[:2]),
               "step_length@dev half": fit("step_length", *_solutions(3)[:2])}
    doc = paired_step_figures(model, ratings, solutions, choices, groups=groups, draws=200)
    assert doc["strongest"]["first_error_f1"] == "step_length@dev half"  # chosen on data like the judged
    assert baseline_name("step_length@dev half") == "step length (chosen on the dev half)"
    assert any("step length (chosen on the dev half) is ahead" in s for s in baseline_verdicts(doc))


def test_the_models_flawed_solution_score_follows_its_aggregation() -> None:
    solutions, ratings, groups = _solutions(4)
    rng = np.random.default_rng(2)
    model = [rng.random(len(steps)) for steps in solutions]
    sound = np.array([-1 not in rated for rated in ratings])
    for how, aggregate in (("min", np.min), ("product", np.prod)):
        doc = paired_step_figures(model, ratings, solutions, {}, groups=groups, draws=50, aggregation=how)
        assert doc["model"]["flawed_auroc"]["value"] == pytest.approx(auroc(np.array([aggregate(r) for r in model]),
                                                                             sound))
    assert paired_step_figures(model, ratings, solutions, {}, draws=50, aggregation="product")["aggregation"] == \
        "product"


def test_paired_auroc_draws_problems_as_the_step_figures_do_and_pairs_the_difference() -> None:
    solutions, ratings, groups = _solutions(2)
    sound = np.array([-1 not in rated for rated in ratings])
    rng = np.random.default_rng(3)
    good = sound + rng.normal(0, 0.5, sound.size)  # reads the truth through noise
    noise = rng.random(sound.size)
    doc = paired_auroc(good, noise, sound, groups=groups, draws=300, seed=4)
    assert doc["model"]["value"] == pytest.approx(auroc(good, sound))
    assert doc["other"]["value"] == pytest.approx(auroc(noise, sound))
    low = doc["diff"]["low"]
    assert low is not None and low > 0  # clearly ahead, and the paired interval says so
    # the model side is the flawed AUROC paired_step_figures draws for the same scores, units and seed
    rows = [np.full(len(steps), value) for steps, value in zip(solutions, good, strict=True)]
    steps = paired_step_figures(rows, ratings, solutions, {}, groups=groups, draws=300, seed=4)
    for key in ("value", "low", "high"):
        assert doc["model"][key] == pytest.approx(steps["model"]["flawed_auroc"][key])
    same = paired_auroc(good, good, sound, groups=groups, draws=100)
    assert same["diff"] == {"value": 0.0, "low": 0.0, "high": 0.0}
