"""The consensus export: the steps on which the chosen label sources agree (consensus filtering).

Sources are ``human`` (the finished passes of a solution: +1 → 1, 0 → 0.5, −1 → 0, averaged over its labelers)
and the campaign's machine sources (``mc:<model>``, ``prm:<model>``, ``import:<name>``). A row is one solution
in TRL stepwise form: it keeps the longest prefix of steps that at least two of the chosen sources label
(``MIN_SOURCES``; with two sources chosen, both) and on which the hard labels of all that label it agree
(``annotate.models.says_correct``; a human value ≥ 0.5 is "correct", the neutral-as-correct rule), ending at the
first step they agree is wrong. Its fields: ``labels`` (bool, as in ``trl-stepwise``), ``soft_labels`` (the
mean of the sources' values per step) and ``label_sources`` (per step, each source's value), with the usual
``prompt``, ``completions``, ``split``, ``problem_id`` and ``solution_id``.

That is the ``prefix`` rule. The ``first_error`` rule filters as Qwen2.5-Math-PRM did: it keeps a whole solution
when at least two chosen sources judge all of it (every step up to their first error) and all name the same one
(a judge's ``llm:`` source and a Monte-Carlo ``mc:`` source, typically), labeled up to that step (every step when
they agree there is none), and drops the solution otherwise. The counts report both rules side by side: solutions
and steps each kept, and how often the kept labels agree with the human labels where a labeler rated the step.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from annotate import labelsources, models
from annotate.services.machine_labels import HUMAN, labels_by_solution

from .exports import ExportOptions, split_of

HUMAN_VALUES = {1: 1.0, 0: 0.5, -1: 0.0}
#: a consensus is at least two sources: one source alone agrees with itself
MIN_SOURCES = 2
PREFIX, FIRST_ERROR = "prefix", "first_error"
RULES = (PREFIX, FIRST_ERROR)
#: a kept step: (hard label, soft label, each source's value)
Kept = list[tuple[bool, float, dict[str, float]]]


@dataclass
class RuleCounts:
    """What one rule kept, and how its kept labels compare with the human labels of the same steps."""

    solutions: int = 0
    steps: int = 0
    steps_with_human: int = 0
    agree_with_human: int = 0

    def add(self, kept: Kept, human: dict[int, float]) -> None:
        if not kept:
            return
        self.solutions += 1
        self.steps += len(kept)
        for index, (label, _, _) in enumerate(kept):
            if index in human:
                self.steps_with_human += 1
                self.agree_with_human += (human[index] >= 0.5) == label

    def as_dict(self) -> dict[str, Any]:
        share = self.agree_with_human / self.steps_with_human if self.steps_with_human else None
        return {"solutions": self.solutions, "steps": self.steps, "steps_with_human": self.steps_with_human,
                "agreement_with_human": share}


@dataclass
class ConsensusCounts:
    """What the export kept: per source, steps it labels; all steps some chosen source labels; those kept."""

    sources: tuple[str, ...] = ()
    solutions: int = 0
    rows: int = 0
    steps_labeled: int = 0
    steps_kept: int = 0
    per_source_steps: dict[str, int] = field(default_factory=dict)
    rule: str = PREFIX
    rules: dict[str, RuleCounts] = field(default_factory=lambda: {rule: RuleCounts() for rule in RULES})

    @property
    def share_kept(self) -> float | None:
        return self.steps_kept / self.steps_labeled if self.steps_labeled else None

    def as_dict(self) -> dict[str, Any]:
        return {"sources": list(self.sources), "solutions": self.solutions, "rows": self.rows,
                "steps_labeled": self.steps_labeled, "steps_kept": self.steps_kept, "share_kept": self.share_kept,
                "per_source_steps": self.per_source_steps, "rule": self.rule,
                "rules": {name: counts.as_dict() for name, counts in self.rules.items()}}


def campaign_sources(campaign: models.Campaign) -> list[str]:
    """``human`` and every machine source of the campaign."""
    machine = (models.MachineLabel.objects.filter(solution__campaign=campaign).values_list("kind", "source")
               .distinct().order_by("kind", "source"))
    return [HUMAN, *(f"{kind}:{source}" for kind, source in machine)]


def human_values(solution_ids: Sequence[int], options: ExportOptions) -> dict[int, dict[int, float]]:
    """solution id -> step index -> the mean of its labelers' ratings of the step (finished labeled passes)."""
    sums: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    ratings = models.Rating.objects.filter(
        assignment__solution_id__in=list(solution_ids), assignment__status=models.AssignmentStatus.SUBMITTED,
        assignment__finish_reason__in=options.finish_reasons, assignment__is_gold=False, completion__index=0,
        rating__isnull=False,
    ).values_list("assignment__solution_id", "completion__step__index", "rating")
    for solution_id, index, rating in ratings.iterator(chunk_size=20000):
        if rating is not None:  # the filter's, repeated for the type checker: the column is nullable
            sums[solution_id][index].append(HUMAN_VALUES[rating])
    return {sid: {index: sum(v) / len(v) for index, v in by_step.items()} for sid, by_step in sums.items()}


def _hard(key: str, value: float) -> bool:
    return value >= 0.5 if key == HUMAN else labelsources.says_correct(labelsources.kind_of(key), value)


def consensus_prefix(by_source: dict[str, dict[int, float]], sources: Sequence[str], step_count: int) -> Kept:
    """(label, soft label, each source's value) of the steps kept: at least two sources label each, and all
    that label it agree."""
    kept = []
    for index in range(step_count):
        values = {key: by_source[key][index] for key in sources if index in by_source.get(key, {})}
        if len(values) < MIN_SOURCES:
            break
        verdicts = {_hard(key, value) for key, value in values.items()}
        if len(verdicts) > 1:
            break
        label = verdicts.pop()
        kept.append((label, sum(values.values()) / len(values), values))
        if not label:
            break
    return kept


def source_first_error(key: str, values: dict[int, float], step_count: int) -> int | None:
    """The first step ``key`` does not call correct, -1 when it calls every step correct; None when its labels do
    not reach that far (a gap before its first error, or a "no error" over part of the steps)."""
    for index in range(step_count):
        if index not in values:
            return None
        if not _hard(key, values[index]):
            return index
    return -1


def consensus_first_error(by_source: dict[str, dict[int, float]], sources: Sequence[str], step_count: int) -> Kept:
    """The solution up to its first error (all of it when there is none) when at least two of the chosen sources
    judge it whole and all of those name the same first error; nothing otherwise."""
    firsts = {key: source_first_error(key, by_source[key], step_count) for key in sources if by_source.get(key)}
    judged = {key: first for key, first in firsts.items() if first is not None}
    if len(judged) < MIN_SOURCES or len(set(judged.values())) > 1:
        return []
    first = next(iter(judged.values()))
    end = step_count if first < 0 else first + 1
    kept: Kept = []
    for index in range(end):
        values = {key: by_source[key][index] for key in judged}
        kept.append((index != first, sum(values.values()) / len(values), values))
    return kept


RULE_FUNCTIONS = {PREFIX: consensus_prefix, FIRST_ERROR: consensus_first_error}


def iter_consensus_rows(campaign: models.Campaign, options: ExportOptions, sources: Sequence[str] | None,
                        counts: ConsensusCounts | None = None, *, rule: str = PREFIX) -> Iterator[dict[str, Any]]:
    """One row per regular solution with consensus steps under ``rule``; ``counts`` (if given) is filled while
    iterating, with both rules' figures."""
    if rule not in RULE_FUNCTIONS:
        raise ValueError(f"unknown consensus rule {rule!r}; the rules: {', '.join(RULES)}")
    available = campaign_sources(campaign)
    chosen = tuple(sources) if sources else tuple(available)
    unknown = [key for key in chosen if key not in available]
    if unknown:
        raise ValueError(f"unknown label source(s) {', '.join(unknown)}; this campaign has: {', '.join(available)}")
    if len(chosen) < MIN_SOURCES:
        raise ValueError(f"a consensus needs at least two label sources; this campaign has: {', '.join(available)}")
    counts = counts if counts is not None else ConsensusCounts()
    counts.sources, counts.rule = chosen, rule
    machine_labeled = models.MachineLabel.objects.filter(
        solution__campaign=campaign, solution__is_quality_control=False, solution__is_screening=False)
    solution_ids = list(machine_labeled.values_list("solution_id", flat=True).distinct().order_by("solution_id"))
    machine = labels_by_solution(solution_ids)
    human = human_values(solution_ids, options)
    texts: dict[int, list[str]] = defaultdict(list)
    for solution_id, text in (models.Completion.objects.filter(step__solution_id__in=solution_ids, index=0)
                              .order_by("step__solution_id", "step__index")
                              .values_list("step__solution_id", "text").iterator(chunk_size=5000)):
        texts[solution_id].append(text)
    solutions = models.Solution.objects.filter(pk__in=solution_ids).select_related("problem").order_by("pk")
    for solution in solutions.iterator(chunk_size=500):
        humans = human.get(solution.pk, {})
        by_source = {**machine.get(solution.pk, {}), HUMAN: humans}
        by_source = {key: values for key, values in by_source.items() if key in chosen}
        steps_labeled: set[int] = set().union(*(values.keys() for values in by_source.values()))
        if not steps_labeled:
            continue
        counts.solutions += 1
        counts.steps_labeled += len(steps_labeled)
        for key, values in by_source.items():
            counts.per_source_steps[key] = counts.per_source_steps.get(key, 0) + len(values)
        steps = texts[solution.pk]
        by_rule = {name: function(by_source, chosen, len(steps)) for name, function in RULE_FUNCTIONS.items()}
        for name, rule_kept in by_rule.items():
            counts.rules[name].add(rule_kept, humans)
        kept = by_rule[rule]
        if not kept:
            continue
        counts.rows += 1
        counts.steps_kept += len(kept)
        problem = solution.problem
        yield {
            "prompt": problem.text,
            "completions": steps[:len(kept)],
            "labels": [label for label, _, _ in kept],
            "soft_labels": [round(soft, 6) for _, soft, _ in kept],
            "label_sources": [values for _, _, values in kept],
            "split": split_of(problem.text_sha256, options.seed, options.test_fraction),
            "problem_id": problem.source_id or problem.text_sha256[:16],
            "solution_id": solution.pk,
        }
