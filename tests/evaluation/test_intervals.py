"""Bootstrap intervals (seeded, reproducible, moving with the seed and the data), the paired verdicts (PRM vs ORM or
majority vote, the stored threshold vs 0.5) in each of their wordings, the first-error threshold calibration and
the advice when a PRM flags no step."""
from __future__ import annotations

import numpy as np
import pytest

from rewards.evaluation import Pool, best_of_n
from rewards.evaluation.intervals import (
    best_of_n_intervals,
    crossfit_hits,
    no_flag_advice,
    step_level_intervals,
    threshold_verdict,
    verdict,
)
from rewards.evaluation.step_metrics import calibrate_threshold, centre_on_threshold, processbench_metrics


def _pools(seed: int, problems: int = 30, size: int = 16, prm_signal: float = 0.5) -> list[Pool]:
    """Problems whose PRM scores lean towards the right candidates (by ``prm_signal``), ORM scores at random."""
    rng = np.random.default_rng(seed)
    pools = []
    for index in range(problems):
        right = rng.random(size) < 0.3
        answers = ["42" if ok else str(int(v)) for ok, v in zip(right, rng.integers(0, 6, size), strict=True)]
        pools.append(Pool.from_arrays(answers, list(right), list(right * prm_signal + rng.random(size)),
                                      list(rng.random(size)), problem=f"p{index}"))
    return pools


def test_best_of_n_intervals_are_seeded_and_hold_the_mean() -> None:
    pools = _pools(0)
    first = best_of_n(pools, trials=100, seed=3)
    again = best_of_n(pools, trials=100, seed=3)
    assert first["intervals"] == again["intervals"]
    other_seed = best_of_n(pools, trials=100, seed=4)
    other_data = best_of_n(_pools(1), trials=100, seed=3)
    assert other_seed["intervals"]["methods"] != first["intervals"]["methods"]
    assert other_data["intervals"]["methods"] != first["intervals"]["methods"]
    for method in ("prm", "orm", "majority", "pass"):
        for n in map(str, first["ns"]):
            bounds, mean = first["intervals"]["methods"][method][n], first["methods"][method][n]["mean"]
            assert bounds["low"] <= mean <= bounds["high"], (method, n)
    assert first["intervals"]["unit"] == "problems" and first["intervals"]["problems"] == 30
    paired = first["intervals"]["paired"]["prm-orm"]["16"]
    means = first["methods"]
    assert paired["diff"] == pytest.approx(means["prm"]["16"]["mean"] - means["orm"]["16"]["mean"])


def test_paired_interval_uses_the_same_draws() -> None:
    """Two methods that differ by a constant on every problem: the paired interval is that constant exactly,
    however much the problems themselves vary (an unpaired one would be wide)."""
    rng = np.random.default_rng(0)
    base = rng.random((40, 2))
    per_problem = {"prm": base + 0.1, "orm": base, "majority": base}
    doc = best_of_n_intervals(per_problem, [1, 2], draws=500, seed=0)
    for n in ("1", "2"):
        assert doc["paired"]["prm-orm"][n]["low"] == pytest.approx(0.1)
        assert doc["paired"]["prm-orm"][n]["high"] == pytest.approx(0.1)
    assert doc["methods"]["prm"]["1"]["high"] - doc["methods"]["prm"]["1"]["low"] > 0.1


def _pair(diff: float, low: float, high: float) -> dict[str, float]:
    return {"diff": diff, "low": low, "high": high}


def test_verdict_wordings() -> None:
    ahead = verdict({"prm-orm": {"4": _pair(0.02, -0.01, 0.05), "16": _pair(0.061, 0.020, 0.103)}})
    assert ahead == ["PRM ahead of ORM at N = 16 by 6.1 points (95 % CI 2.0–10.3)"]
    behind = verdict({"prm-orm": {"4": _pair(-0.08, -0.12, -0.03), "16": _pair(-0.02, -0.06, 0.01)}})
    # the largest N leads, the Ns where one is ahead follow
    assert behind == ["PRM vs ORM at N = 16, the largest: no difference this data can show (-2.0 points, 95 % CI "
                      "-6.0 to 1.0); ORM ahead of PRM at N = 4 (at N = 4 by 8.0 points, 95 % CI 3.0–12.0)"]
    flips = verdict({"prm-majority": {"2": _pair(0.05, 0.01, 0.09), "4": _pair(0.0, -0.03, 0.03),
                                      "8": _pair(-0.06, -0.1, -0.02), "11": _pair(-0.07, -0.12, -0.02)}})
    assert flips == ["majority vote ahead of PRM at N = 11 by 7.0 points (95 % CI 2.0–12.0); PRM ahead of majority "
                     "vote at N = 2 (at N = 2 by 5.0 points, 95 % CI 1.0–9.0); the lead changes sign between N = 2 "
                     "and N = 8"]
    none = verdict({"prm-majority": {"1": _pair(0.0, -0.01, 0.01), "16": _pair(0.01, -0.03, 0.05)}})
    assert none == ["PRM vs majority vote: no difference this data can show at N ≤ 16 "
                    "(at N = 16: +1.0 points, 95 % CI -3.0 to 5.0)"]
    both = verdict({"prm-orm": {"2": _pair(0.1, 0.05, 0.15)}, "prm-majority": {"2": _pair(-0.1, -0.2, -0.05)}})
    assert both == ["PRM ahead of ORM at N = 2 by 10.0 points (95 % CI 5.0–15.0)",
                    "majority vote ahead of PRM at N = 2 by 10.0 points (95 % CI 5.0–20.0)"]
    assert verdict({}) == []


def test_verdict_from_a_real_evaluation() -> None:
    strong = best_of_n(_pools(0, problems=60, prm_signal=2.0), trials=100, seed=0)
    sentences = verdict(strong["intervals"]["paired"])
    assert sentences[0].startswith("PRM ahead of ORM at N = 16 by ")
    weak = best_of_n(_pools(0, problems=8, prm_signal=0.0), trials=50, seed=0)
    assert "no difference this data can show" in verdict(weak["intervals"]["paired"])[0]


def test_calibrated_threshold_finds_errors_that_half_misses() -> None:
    """Scores all above 0.5 (rare negatives, so P(correct) stays high), wrong steps lower than right ones: at
    0.5 no step is flagged (F1 0); the calibrated threshold finds the first errors."""
    rng = np.random.default_rng(0)
    rows, labels = [], []
    for index in range(60):
        steps = 0.9 + 0.09 * rng.random(5)
        label = int(rng.integers(0, 5)) if index % 2 else -1
        if label != -1:
            steps[label] = 0.6 + 0.05 * rng.random()
        rows.append(list(steps))
        labels.append(label)
    result = calibrate_threshold(labels, rows)
    assert result["f1_at_default"] == 0.0
    wrong = max(row[label] for row, label in zip(rows, labels, strict=True) if label != -1)
    assert wrong < result["threshold"] <= 0.9 and result["f1_calibrated"] == 1.0  # between wrong and right steps
    assert processbench_metrics(labels, step_scores=rows, threshold=result["threshold"])["f1"] == 1.0
    assert calibrate_threshold([-1, -1], [[0.9], [0.8]])["threshold"] is None  # no erroneous solution to find


def test_step_level_intervals_and_the_no_flag_advice() -> None:
    rng = np.random.default_rng(1)
    ratings = [[1, 1, -1] if i % 2 else [1, 1, 1] for i in range(80)]
    scores = [[0.95 + 0.04 * rng.random() - (0.2 if r == -1 else 0.0) for r in rated] for rated in ratings]
    first = step_level_intervals(scores, ratings, draws=300, seed=0)
    assert first == step_level_intervals(scores, ratings, draws=300, seed=0)
    assert first != step_level_intervals(scores, ratings, draws=300, seed=1)
    assert first["unit"] == "solutions" and first["solutions"] == 80
    auroc = first["step_auroc"]
    assert auroc["low"] <= auroc["value"] <= auroc["high"] and auroc["value"] > 0.9
    assert first["first_error_f1"]["value"] == 0.0 and first["flags_no_step"]
    assert first["first_error_f1_calibrated"]["value"] == 1.0 and first["threshold_source"] == "held-out"
    advice = no_flag_advice(first)
    assert advice is not None and advice.startswith("At the fixed threshold 0.5 this PRM flags no step")
    assert f"the calibrated threshold ({first['threshold']:.3f}) gives first-error F1 1.000" in advice
    assert "more labels" in advice and "a larger training budget" in advice
    flagged = step_level_intervals([[0.2, 0.9, 0.9]] + scores[1:], ratings, threshold=0.5, draws=100, seed=0)
    assert not flagged["flags_no_step"] and no_flag_advice(flagged) is None


def test_step_level_intervals_draw_a_problems_solutions_together() -> None:
    # 12 problems, 15 rated alternatives each after one shared prefix: a problem's solutions move together (on
    # some problems the PRM sees the wrong alternatives, on others it does not), so they are one draw, not fifteen
    rng = np.random.default_rng(2)
    scores, ratings, groups = [], [], []
    for problem in range(12):
        level, seen = rng.random(), problem % 2 == 0
        for alternative in range(15):
            wrong = alternative % 3 == 0
            drop = (0.3 if seen else -0.05) if wrong else 0.0
            scores.append([0.6 + 0.3 * level, 0.5 + 0.4 * level - drop + 0.01 * rng.random()])
            ratings.append([1, -1 if wrong else 1])
            groups.append(f"p{problem}")
    by_problem = step_level_intervals(scores, ratings, groups=groups, draws=400, seed=0)
    by_solution = step_level_intervals(scores, ratings, draws=400, seed=0)
    assert by_problem == step_level_intervals(scores, ratings, groups=groups, draws=400, seed=0)
    assert by_problem["unit"] == "problems" and by_problem["problems"] == 12 and by_problem["solutions"] == 180
    assert by_solution["unit"] == "solutions" and by_solution["problems"] is None
    for name in ("step_auroc", "first_error_f1_calibrated"):
        wide, narrow = by_problem[name], by_solution[name]
        assert wide["value"] == narrow["value"]  # the figure is the same; only its uncertainty differs
        assert wide["high"] - wide["low"] > 1.5 * (narrow["high"] - narrow["low"])

    # one problem per solution draws exactly what the solution bootstrap draws
    singletons = step_level_intervals(scores, ratings, groups=[str(i) for i in range(180)], draws=200, seed=4)
    plain = step_level_intervals(scores, ratings, draws=200, seed=4)
    assert {k: v for k, v in singletons.items() if k not in ("unit", "problems")} == \
        {k: v for k, v in plain.items() if k not in ("unit", "problems")}
    with pytest.raises(ValueError, match="179 groups for 180 solutions"):
        step_level_intervals(scores, ratings, groups=groups[1:])


def test_the_cross_fitted_f1_calibrates_on_other_problems() -> None:
    # scores that carry no signal: a threshold chosen on the same solutions finds a lucky F1, one chosen on other
    # problems cannot
    rng = np.random.default_rng(5)
    ratings = [[1] * 4 + ([-1] if i % 2 else [1]) for i in range(200)]
    noise = [list(rng.random(5)) for _ in ratings]
    groups = [f"p{i // 4}" for i in range(200)]
    figures = step_level_intervals(noise, ratings, groups=groups, draws=200, seed=0)
    crossfit, in_sample = figures["first_error_f1_crossfit"], figures["first_error_f1_calibrated"]
    assert figures["crossfit_folds"] == 5 and crossfit["low"] <= crossfit["value"] <= crossfit["high"]
    assert crossfit["value"] < in_sample["value"] - 0.02  # 0.162 against 0.201
    assert figures == step_level_intervals(noise, ratings, groups=groups, draws=200, seed=0)

    # a threshold that holds on every problem: the cross-fitted F1 finds it as the in-sample one does
    clean = [[0.9] * 4 + ([0.3] if i % 2 else [0.9]) for i in range(200)]
    figures = step_level_intervals(clean, ratings, groups=groups, draws=200, seed=0)
    assert figures["first_error_f1_crossfit"]["value"] == figures["first_error_f1_calibrated"]["value"] == 1.0

    # each fold's threshold comes from the other folds: a fold alone would pick its own
    first_errors = np.array([4 if i % 2 else -1 for i in range(200)])
    rows = [np.asarray(r) for r in noise]
    units = [np.arange(u * 4, u * 4 + 4) for u in range(50)]
    hits = crossfit_hits(first_errors, rows, units, seed=0)
    assert hits is not None and hits.shape == (200,)
    few = crossfit_hits(first_errors[:12], rows[:12], units[:3], seed=0)  # three problems: three folds
    assert few is not None and few.shape == (12,)
    assert crossfit_hits(first_errors[:4], rows[:4], units[:1], seed=0) is None  # one problem: nothing to calibrate on


def test_centre_on_threshold_keeps_order_and_moves_the_cut() -> None:
    assert centre_on_threshold(0.8, 0.8) == 0.5
    assert centre_on_threshold(0.79, 0.8) < 0.5 < centre_on_threshold(0.81, 0.8)
    assert centre_on_threshold(0.0, 0.8) == 0.0 and centre_on_threshold(1.0, 0.8) == 1.0
    assert centre_on_threshold(0.3, 0.5) == pytest.approx(0.3)


def _gain(value: float, low: float, high: float, source: str = "model") -> dict[str, object]:
    return {"threshold": 0.406, "threshold_source": source,
            "first_error_f1_gain": {"value": value, "low": low, "high": high}}


def test_threshold_verdict_wordings() -> None:
    assert threshold_verdict(_gain(0.031, 0.005, 0.057)) == (
        "First-error F1 at the threshold stored with the PRM (40.6 %) beats 0.5 by 3.1 points (95 % CI 0.5–5.7)")
    assert threshold_verdict(_gain(-0.02, -0.035, -0.004)) == (
        "First-error F1 at 0.5 beats the threshold stored with the PRM (40.6 %) by 2.0 points (95 % CI 0.4–3.5)")
    assert threshold_verdict(_gain(-0.013, -0.04, 0.015)) == (
        "First-error F1 at the threshold stored with the PRM (40.6 %) vs 0.5: no difference this data can show "
        "(-1.3 points, 95 % CI -4.0 to 1.5)")
    assert threshold_verdict(_gain(-0.013, -0.04, 0.015), fractions=True) == (
        "First-error F1 at the threshold stored with the PRM (0.406) vs 0.5: no difference this data can show "
        "(-0.013, 95 % CI -0.040 to 0.015)")
    assert threshold_verdict(_gain(0.031, 0.005, 0.057, source="held-out")).startswith(
        "First-error F1 at the threshold calibrated on these solutions (40.6 %) beats 0.5")
    assert threshold_verdict({}) is None
    assert threshold_verdict(_gain(0.0, 0.0, 0.0) | {"first_error_f1_gain": {"value": None}}) is None


def test_the_gain_of_the_stored_threshold_over_half_is_paired() -> None:
    """Problems differ in how high the PRM scores them (wrong steps 0.12 under the right ones), so either F1 moves
    a lot with the problems drawn. On every problem the threshold 0.56 finds at least the first errors 0.5 finds
    and flags no right step, so drawn from the same problems the gain is never negative, although the two
    intervals overlap."""
    rng = np.random.default_rng(3)
    scores, ratings, groups = [], [], []
    for problem in range(12):
        level = 0.57 + 0.4 * rng.random()  # this problem's right steps score around here
        for solution in range(6):
            rated = [1, 1, -1 if solution % 2 == 0 else 1, 1]
            scores.append([level + 0.02 * rng.random() - (0.12 if r == -1 else 0.0) for r in rated])
            ratings.append(rated)
            groups.append(f"p{problem}")
    figures = step_level_intervals(scores, ratings, groups=groups, threshold=0.56, draws=400, seed=0)
    at_default, at_chosen = figures["first_error_f1"], figures["first_error_f1_calibrated"]
    gain = figures["first_error_f1_gain"]
    assert gain["value"] == pytest.approx(at_chosen["value"] - at_default["value"]) and gain["value"] > 0
    assert at_chosen["low"] < at_default["high"]  # drawn apart, the difference could be negative
    assert 0 <= gain["low"] <= gain["value"] <= gain["high"]
    assert gain["high"] - gain["low"] < (at_default["high"] - at_default["low"]) / 2
    assert threshold_verdict(figures) == (
        f"First-error F1 at the threshold stored with the PRM (56.0 %) vs 0.5: no difference this data can show "
        f"(+{100 * gain['value']:.1f} points, 95 % CI {100 * gain['low']:.1f} to {100 * gain['high']:.1f})")
    assert figures == step_level_intervals(scores, ratings, groups=groups, threshold=0.56, draws=400, seed=0)
    no_error = step_level_intervals(scores, [[1] * len(r) for r in ratings], groups=groups, threshold=0.56, draws=50)
    assert no_error["first_error_f1_gain"]["value"] is None and threshold_verdict(no_error) is None
