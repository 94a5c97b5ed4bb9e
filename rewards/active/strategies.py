"""Selection strategies for the next labeling generation (one class per strategy, a registry by name).

PRM800K phase 2 labeled *convincing wrong-answer* solutions: ones the current PRM rates highly although
their final answer is wrong, so every label hits a mistake the PRM does not yet see. The strategies here
rank a scored candidate pool; none of them ever returns a candidate that is already labeled.

Ordering is deterministic (ties broken by candidate id), so a generation can be recomputed and tested
exactly; ``random`` is seeded and independent of the pool's order.
"""
from __future__ import annotations

import difflib
import math
import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar


class StrategyConfigError(ValueError):
    """A bad strategy name or option; the message names the key."""


class SelectionError(ValueError):
    """A pool or batch size the strategy cannot work with; the message names the candidate or argument."""


@dataclass(frozen=True)
class ScoredCandidate:
    """One unlabeled-or-labeled solution in the pool.

    ``score`` is the current PRM's solution score (P(all steps correct)); ``is_correct`` the graded final
    answer (None: ungraded); ``already_labeled`` marks solutions that have labels in the campaign.
    """

    id: str
    problem_id: str
    score: float | None
    is_correct: bool | None
    already_labeled: bool = False


@dataclass(frozen=True)
class Selection:
    """A chosen candidate, its position in the batch and why it was chosen (a bucket name)."""

    candidate: ScoredCandidate
    rank: int
    reason: str


# --- option parsing -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Option:
    default: Any
    parse: Callable[[str, Any], Any]
    help: str


def _integer(minimum: int, *, optional: bool = False) -> Callable[[str, Any], Any]:
    def parse(key: str, value: Any) -> int | None:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            allowed = f"an integer >= {minimum}" + (" or null" if optional else "")
            raise StrategyConfigError(f"config key '{key}' must be {allowed}, got {value!r}")
        return value

    return parse


def _fraction(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise StrategyConfigError(f"config key '{key}' must be a number in [0, 1], got {value!r}")
    return float(value)


def _validate_score(candidate: ScoredCandidate) -> float:
    score = candidate.score
    if score is None:
        raise SelectionError(f"candidate {candidate.id!r} has no PRM score (score the pool first)")
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score) \
            or not 0 <= score <= 1:
        raise SelectionError(f"candidate {candidate.id!r} has score {score!r}; expected a probability in [0, 1]")
    return float(score)


# --- strategies ---------------------------------------------------------------------------------------


class Strategy(ABC):
    """Base class: validated options, the eligibility rule and the per-problem cap.

    Subclasses set ``name``, ``needs_scores``, ``options`` and implement ``_rank`` (the eligible
    candidates, best first, each with its reason).
    """

    name: ClassVar[str]
    needs_scores: ClassVar[bool] = True
    options: ClassVar[dict[str, _Option]] = {}

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        config = dict(config or {})
        known = tuple(self.options)
        for key in config:
            if key not in self.options:
                close = difflib.get_close_matches(str(key), known, n=1)
                hint = f"; did you mean '{close[0]}'?" if close else (
                    f"; known keys: {', '.join(known)}" if known else f"; strategy '{self.name}' takes no options")
                raise StrategyConfigError(f"config key '{key}' is unknown for strategy '{self.name}'{hint}")
        self.config: dict[str, Any] = {
            key: option.parse(key, config.get(key, option.default)) for key, option in self.options.items()
        }
        self._check()

    def _check(self) -> None:  # noqa: B027 — an optional hook: most strategies have no cross-key rule to check
        """Cross-key validation (e.g. shares summing to one)."""

    def provenance(self) -> dict[str, Any]:
        """What each selected solution stores about how it was chosen."""
        return {"strategy": self.name, "strategy_config": dict(self.config)}

    def select(self, pool: Sequence[ScoredCandidate], batch_size: int) -> list[Selection]:
        """The next batch: at most ``batch_size`` unlabeled candidates, best first."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise SelectionError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        seen: set[str] = set()
        for candidate in pool:
            if candidate.id in seen:
                raise SelectionError(f"candidate {candidate.id!r} appears twice in the pool")
            seen.add(candidate.id)
        eligible = sorted((c for c in pool if not c.already_labeled), key=lambda c: c.id)
        if self.needs_scores:
            for candidate in eligible:
                _validate_score(candidate)
        chosen = self._rank(eligible, batch_size)
        return [Selection(candidate=c, rank=i, reason=reason) for i, (c, reason) in enumerate(chosen)]

    @abstractmethod
    def _rank(self, eligible: list[ScoredCandidate], batch_size: int) -> list[tuple[ScoredCandidate, str]]:
        """At most ``batch_size`` of ``eligible`` (sorted by id, never labeled), in batch order."""

    def _capped(self, ordered: Iterable[ScoredCandidate], limit: int, taken: dict[str, int],
                chosen_ids: set[str]) -> list[ScoredCandidate]:
        """Take from ``ordered`` up to ``limit``, skipping chosen ones and problems at ``max_per_problem``."""
        cap: int | None = self.config.get("max_per_problem")
        out: list[ScoredCandidate] = []
        for candidate in ordered:
            if len(out) >= limit:
                break
            if candidate.id in chosen_ids:
                continue
            if cap is not None and taken.get(candidate.problem_id, 0) >= cap:
                continue
            out.append(candidate)
            chosen_ids.add(candidate.id)
            taken[candidate.problem_id] = taken.get(candidate.problem_id, 0) + 1
        return out


def _by_score_desc(candidates: Iterable[ScoredCandidate]) -> list[ScoredCandidate]:
    # Stable sort of id-sorted input: equal scores keep id order.
    return sorted(candidates, key=lambda c: -float(c.score or 0.0))


def _shuffled(candidates: Sequence[ScoredCandidate], seed: int) -> list[ScoredCandidate]:
    order = list(candidates)
    random.Random(seed).shuffle(order)
    return order


STRATEGIES: dict[str, type[Strategy]] = {}


def register(cls: type[Strategy]) -> type[Strategy]:
    """Add a strategy class to the registry under its ``name``."""
    STRATEGIES[cls.name] = cls
    return cls


@register
class ConvincingWrongStrategy(Strategy):
    """Top PRM score among wrong-answer solutions, at most ``max_per_problem`` per problem.

    Ungraded candidates (``is_correct`` None) are not wrong as far as anyone knows, so they are skipped.
    """

    name = "convincing_wrong"
    options = {"max_per_problem": _Option(2, _integer(1), "at most this many solutions of one problem")}

    def _rank(self, eligible: list[ScoredCandidate], batch_size: int) -> list[tuple[ScoredCandidate, str]]:
        wrong = _by_score_desc(c for c in eligible if c.is_correct is False)
        return [(c, self.name) for c in self._capped(wrong, batch_size, {}, set())]


@register
class MixedStrategy(Strategy):
    """The paper's mix: shares of convincing wrong-answer, convincing (top score, any answer) and random.

    Bucket sizes are the shares of the batch rounded by largest remainder. A bucket that runs short passes
    its remainder on (convincing-wrong → convincing → random), so the batch is full whenever the pool allows.
    """

    name = "mixed"
    options = {
        "convincing_wrong_share": _Option(0.8, _fraction, "share of convincing wrong-answer solutions"),
        "convincing_share": _Option(0.2, _fraction, "share of top-scored solutions whatever their answer"),
        "random_share": _Option(0.0, _fraction, "share of uniformly random solutions"),
        "max_per_problem": _Option(2, _integer(1), "at most this many solutions of one problem"),
        "seed": _Option(0, _integer(0), "seed of the random share"),
    }
    BUCKETS = ("convincing_wrong", "convincing", "random")

    def _check(self) -> None:
        total = sum(self.config[f"{bucket}_share"] for bucket in self.BUCKETS)
        if not math.isclose(total, 1.0, abs_tol=1e-9):
            raise StrategyConfigError(
                "config keys 'convincing_wrong_share' + 'convincing_share' + 'random_share' must sum to 1, "
                f"got {total:g}")

    def quotas(self, batch_size: int) -> dict[str, int]:
        """Bucket sizes for a batch (largest remainder; ties go to the earlier bucket)."""
        exact = {b: self.config[f"{b}_share"] * batch_size for b in self.BUCKETS}
        counts = {b: math.floor(v) for b, v in exact.items()}
        rest = batch_size - sum(counts.values())
        for bucket in sorted(self.BUCKETS, key=lambda b: -(exact[b] - counts[b]))[:rest]:
            counts[bucket] += 1
        return counts

    def _rank(self, eligible: list[ScoredCandidate], batch_size: int) -> list[tuple[ScoredCandidate, str]]:
        quotas = self.quotas(batch_size)
        orders = {
            "convincing_wrong": _by_score_desc(c for c in eligible if c.is_correct is False),
            "convincing": _by_score_desc(eligible),
            "random": _shuffled(eligible, self.config["seed"]),
        }
        taken: dict[str, int] = {}
        chosen_ids: set[str] = set()
        out: list[tuple[ScoredCandidate, str]] = []
        carry = 0
        for bucket in self.BUCKETS:
            want = quotas[bucket] + carry
            picked = self._capped(orders[bucket], want, taken, chosen_ids)
            out.extend((c, bucket) for c in picked)
            carry = want - len(picked)
        return out


@register
class UncertainStrategy(Strategy):
    """Scores nearest ``target`` (0.5: the PRM cannot tell), at most ``max_per_problem`` per problem."""

    name = "uncertain"
    options = {
        "target": _Option(0.5, _fraction, "the score the PRM is least sure about"),
        "max_per_problem": _Option(None, _integer(1, optional=True), "cap per problem; null: none"),
    }

    def _rank(self, eligible: list[ScoredCandidate], batch_size: int) -> list[tuple[ScoredCandidate, str]]:
        target = self.config["target"]
        ordered = sorted(eligible, key=lambda c: abs(float(c.score or 0.0) - target))
        return [(c, self.name) for c in self._capped(ordered, batch_size, {}, set())]


@register
class RandomStrategy(Strategy):
    """The uniform baseline (seeded; the pool's order does not matter). Needs no scores."""

    name = "random"
    needs_scores = False
    options = {
        "seed": _Option(0, _integer(0), "random seed"),
        "max_per_problem": _Option(None, _integer(1, optional=True), "cap per problem; null: none"),
    }

    def _rank(self, eligible: list[ScoredCandidate], batch_size: int) -> list[tuple[ScoredCandidate, str]]:
        ordered = _shuffled(eligible, self.config["seed"])
        return [(c, self.name) for c in self._capped(ordered, batch_size, {}, set())]


def make_strategy(name: Any, config: Mapping[str, Any] | None = None) -> Strategy:
    """A configured strategy by registry name; bad names and options raise ``StrategyConfigError``."""
    if name not in STRATEGIES:
        close = difflib.get_close_matches(str(name), tuple(STRATEGIES), n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise StrategyConfigError(
            f"config key 'strategy' is {name!r}, not one of {', '.join(STRATEGIES)}{hint}")
    if config is not None and not isinstance(config, Mapping):
        raise StrategyConfigError(f"config for strategy '{name}' must be an object, got {type(config).__name__}")
    return STRATEGIES[name](config)
