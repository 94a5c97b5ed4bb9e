"""Machine labels shown to labelers, without anchoring them: the campaign's suggestion mode decides.

``hidden`` (the default) never shows them; ``after_rating`` reveals a step's machine labels once the labeler has
rated that step; ``shown`` shows them before. Gold (quality-control) and screening solutions never show them: they
measure the labeler, not the machines. Every registered label-source kind (``annotate.labelsources``: Monte-Carlo,
PRM, imported, an LLM judge's) is shown alike; labels of a kind no module registers any more are not. Each rating
records what its labeler had seen (``Rating.suggestions_seen``), so agreement can be split by it. Stepwise campaigns
only: machine labels are labels of a solution's own steps, which conversational candidates are not.
"""
from __future__ import annotations

from collections.abc import Iterable

from .. import labelsources
from ..models import Campaign, CampaignMode, MachineLabel, Solution, SuggestionMode


def shows_suggestions(campaign: Campaign, solution: Solution) -> bool:
    return (campaign.suggestions != SuggestionMode.HIDDEN and campaign.mode == CampaignMode.STEPWISE
            and not solution.is_quality_control and not solution.is_screening)


def visible(campaign: Campaign, *, rated: bool) -> bool:
    """Whether a step's machine labels are on screen now (``shows_suggestions`` holds)."""
    return campaign.suggestions == SuggestionMode.SHOWN or rated


def step_suggestions(campaign: Campaign, solution: Solution,
                     step_indexes: Iterable[int] | None = None) -> dict[int, list[MachineLabel]]:
    """Step index -> its machine labels (one query, none when the campaign or the solution shows none)."""
    if not shows_suggestions(campaign, solution):
        return {}
    labels = (MachineLabel.objects.filter(solution=solution, kind__in=labelsources.names()).select_related("step")
              .order_by("kind", "source"))
    if step_indexes is not None:
        labels = labels.filter(step__index__in=list(step_indexes))
    result: dict[int, list[MachineLabel]] = {}
    for label in labels:
        result.setdefault(label.step.index, []).append(label)
    return result


def seen_when_rating(campaign: Campaign, *, has_labels: bool, rated_before: bool) -> str:
    """What the labeler had seen of the step's machine labels when giving a rating now: ``before`` (shown,
    or revealed by an earlier rating of the same step), ``after`` (revealed by this rating) or ``none``."""
    if not has_labels or campaign.suggestions == SuggestionMode.HIDDEN:
        return "none"
    return "before" if visible(campaign, rated=rated_before) else "after"
