"""Selection strategies on a hand-built scored pool: exact picks, never a labeled one, config errors."""
from __future__ import annotations

import random
from collections import Counter

import pytest

from rewards.active import (
    STRATEGIES,
    MixedStrategy,
    ScoredCandidate,
    SelectionError,
    StrategyConfigError,
    make_strategy,
)

# id, problem, PRM score, final answer correct, already labeled
POOL = [
    ScoredCandidate("c01", "p1", 0.95, False),
    ScoredCandidate("c02", "p1", 0.90, False),
    ScoredCandidate("c03", "p1", 0.85, False),
    ScoredCandidate("c04", "p2", 0.80, True),
    ScoredCandidate("c05", "p2", 0.70, False),
    ScoredCandidate("c06", "p3", 0.99, False, already_labeled=True),  # the most convincing wrong one, but labeled
    ScoredCandidate("c07", "p3", 0.52, True),
    ScoredCandidate("c08", "p4", 0.45, False),
    ScoredCandidate("c09", "p4", 0.60, None),  # ungraded
    ScoredCandidate("c10", "p5", 0.10, False),
]
UNLABELED = {c.id for c in POOL if not c.already_labeled}


def ids(selections):
    return [s.candidate.id for s in selections]


def test_registry_names() -> None:
    assert set(STRATEGIES) == {"convincing_wrong", "mixed", "uncertain", "random"}


def test_convincing_wrong_takes_top_wrong_answers_capped_per_problem() -> None:
    strategy = make_strategy("convincing_wrong", {"max_per_problem": 2})
    assert ids(strategy.select(POOL, 4)) == ["c01", "c02", "c05", "c08"]
    assert ids(make_strategy("convincing_wrong", {"max_per_problem": 1}).select(POOL, 10)) == \
        ["c01", "c05", "c08", "c10"]
    # uncapped by batch: every unlabeled wrong answer, none correct or ungraded
    assert ids(make_strategy("convincing_wrong", {"max_per_problem": 5}).select(POOL, 10)) == \
        ["c01", "c02", "c03", "c05", "c08", "c10"]


def test_convincing_wrong_is_independent_of_pool_order() -> None:
    shuffled = list(POOL)
    random.Random(3).shuffle(shuffled)
    strategy = make_strategy("convincing_wrong")
    assert ids(strategy.select(shuffled, 4)) == ids(strategy.select(POOL, 4))


def test_mixed_paper_default_is_80_20() -> None:
    strategy = make_strategy("mixed")
    assert strategy.quotas(5) == {"convincing_wrong": 4, "convincing": 1, "random": 0}
    chosen = strategy.select(POOL, 5)
    # c03 is the next most convincing, but p1 already has two
    assert ids(chosen) == ["c01", "c02", "c05", "c08", "c04"]
    assert [s.reason for s in chosen] == ["convincing_wrong"] * 4 + ["convincing"]
    assert [s.rank for s in chosen] == [0, 1, 2, 3, 4]


def test_mixed_with_a_random_share() -> None:
    config = {"convincing_wrong_share": 0.5, "convincing_share": 0.25, "random_share": 0.25, "max_per_problem": 1}
    chosen = make_strategy("mixed", config).select(POOL, 4)
    # cw: c01 (p1), c05 (p2); convincing: c01/c02/c03/c04/c05 blocked by the cap -> c09 (p4);
    # random: the only candidates whose problem is still open are c07 (p3) and c10 (p5)
    assert ids(chosen)[:3] == ["c01", "c05", "c09"]
    assert [s.reason for s in chosen] == ["convincing_wrong", "convincing_wrong", "convincing", "random"]
    assert ids(chosen)[3] in {"c07", "c10"}


def test_mixed_passes_a_short_bucket_on() -> None:
    config = {"convincing_wrong_share": 1.0, "convincing_share": 0.0, "random_share": 0.0}
    chosen = make_strategy("mixed", config).select(POOL, 8)
    assert ids(chosen) == ["c01", "c02", "c05", "c08", "c10", "c04", "c09", "c07"]
    assert Counter(s.reason for s in chosen) == {"convincing_wrong": 5, "convincing": 3}


def test_mixed_quotas_round_by_largest_remainder() -> None:
    strategy = MixedStrategy({"convincing_wrong_share": 0.6, "convincing_share": 0.3, "random_share": 0.1})
    assert strategy.quotas(7) == {"convincing_wrong": 4, "convincing": 2, "random": 1}
    assert sum(strategy.quotas(13).values()) == 13


def test_uncertain_takes_scores_nearest_the_target() -> None:
    assert ids(make_strategy("uncertain").select(POOL, 3)) == ["c07", "c08", "c09"]
    assert ids(make_strategy("uncertain", {"target": 0.1}).select(POOL, 3)) == ["c10", "c08", "c07"]
    assert ids(make_strategy("uncertain", {"max_per_problem": 1}).select(POOL, 3)) == ["c07", "c08", "c05"]


def test_random_is_seeded_order_free_and_never_labeled() -> None:
    strategy = make_strategy("random", {"seed": 7})
    first = ids(strategy.select(POOL, 5))
    shuffled = list(POOL)
    random.Random(1).shuffle(shuffled)
    assert ids(strategy.select(shuffled, 5)) == first
    assert len(set(first)) == 5 and set(first) <= UNLABELED
    assert set(ids(strategy.select(POOL, 100))) == UNLABELED


def test_random_is_roughly_uniform_and_needs_no_scores() -> None:
    pool = [ScoredCandidate(f"s{i}", f"p{i}", None, None) for i in range(10)]
    picks = Counter(ids(make_strategy("random", {"seed": seed}).select(pool, 1))[0] for seed in range(400))
    assert set(picks) == {c.id for c in pool}
    assert max(picks.values()) < 80  # expected 40 each


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_no_strategy_selects_a_labeled_candidate(name: str) -> None:
    pool = [ScoredCandidate(f"x{i}", f"p{i % 3}", i / 20, i % 2 == 0, already_labeled=i % 3 == 0) for i in range(20)]
    chosen = make_strategy(name, {"max_per_problem": 20}).select(pool, 20)
    assert chosen, name
    assert not any(s.candidate.already_labeled for s in chosen)
    assert len({s.candidate.id for s in chosen}) == len(chosen)


def test_provenance_names_the_strategy_and_its_config() -> None:
    assert make_strategy("convincing_wrong", {"max_per_problem": 3}).provenance() == \
        {"strategy": "convincing_wrong", "strategy_config": {"max_per_problem": 3}}


@pytest.mark.parametrize(("name", "config", "message"), [
    ("convincing_wrog", None, "config key 'strategy' is 'convincing_wrog', not one of"),
    ("convincing_wrong", {"max_per_problm": 2}, "config key 'max_per_problm' is unknown for strategy "
                                                "'convincing_wrong'; did you mean 'max_per_problem'?"),
    ("convincing_wrong", {"max_per_problem": 0}, "config key 'max_per_problem' must be an integer >= 1, got 0"),
    ("convincing_wrong", {"max_per_problem": True}, "config key 'max_per_problem' must be an integer"),
    ("mixed", {"convincing_wrong_share": 0.5}, "must sum to 1, got 0.7"),
    ("mixed", {"random_share": "a lot"}, "config key 'random_share' must be a number in [0, 1], got 'a lot'"),
    ("mixed", {"convincing_share": 1.5}, "config key 'convincing_share' must be a number in [0, 1]"),
    ("uncertain", {"target": -0.1}, "config key 'target' must be a number in [0, 1]"),
    ("random", {"seed": -1}, "config key 'seed' must be an integer >= 0"),
    ("random", {"sede": 1}, "did you mean 'seed'?"),
])
def test_config_errors_name_the_key(name: str, config: dict | None, message: str) -> None:
    with pytest.raises(StrategyConfigError) as error:
        make_strategy(name, config)
    assert message in str(error.value)


def test_config_must_be_an_object() -> None:
    with pytest.raises(StrategyConfigError, match="must be an object"):
        make_strategy("random", [1, 2])  # type: ignore[arg-type]


@pytest.mark.parametrize(("pool", "batch", "message"), [
    (POOL, 0, "batch_size must be an integer >= 1, got 0"),
    (POOL + [ScoredCandidate("c01", "p9", 0.5, False)], 3, "candidate 'c01' appears twice"),
    ([ScoredCandidate("a", "p", None, False)], 1, "candidate 'a' has no PRM score"),
    ([ScoredCandidate("a", "p", 1.5, False)], 1, "candidate 'a' has score 1.5; expected a probability in [0, 1]"),
    ([ScoredCandidate("a", "p", float("nan"), False)], 1, "candidate 'a' has score nan"),
])
def test_selection_errors(pool: list[ScoredCandidate], batch: int, message: str) -> None:
    with pytest.raises(SelectionError) as error:
        make_strategy("convincing_wrong").select(pool, batch)
    assert message in str(error.value)


def test_a_labeled_candidate_without_a_score_is_ignored() -> None:
    pool = [ScoredCandidate("a", "p", None, False, already_labeled=True), ScoredCandidate("b", "p", 0.3, False)]
    assert ids(make_strategy("convincing_wrong").select(pool, 2)) == ["b"]
