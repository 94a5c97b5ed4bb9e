"""Steplab's labeling data model: PRM800K's structure, with steps and ratings as rows, one module per domain.

A *solution* is an ordered list of *steps*; each step position holds one or more candidate *completions*
(one in stepwise mode, several in conversational mode). A labeler's pass over a solution is an
*assignment*; each (assignment, completion) has at most one current *rating*, whose earlier values
are kept in ``RatingRevision``. Per step, a ``StepDecision`` records which completion the labeler
continued with (``chosen_completion``) or the step they wrote themselves (``human_completion``).

Django finds the app's models here: every model (and every name the rest of the code imports) is re-exported, so
``from annotate.models import X`` is the one way in.
"""
from __future__ import annotations

from .campaigns import (
    ERROR_CATEGORY_MAX_CHARS,
    RATIONALE_MAX_CHARS,
    AutoTrain,
    Campaign,
    CampaignMode,
    Invitation,
    LeaseOrder,
    Membership,
    Role,
    StepRationale,
    SuggestionMode,
)
from .imports import ImportJob, ImportKind
from .labeling import (
    Assignment,
    AssignmentStatus,
    FinishReason,
    LabelingKey,
    Rating,
    RatingRevision,
    SplitReport,
    StepDecision,
)
from .machine_labels import MachineLabel, says_correct
from .quality import CampaignMetrics, ResolvedLabel
from .solutions import (
    RESPLIT_FROM,
    RESPLIT_INTO,
    Completion,
    PositionedRow,
    Problem,
    Solution,
    Step,
    normalized_problem_text,
    position_meta,
    problem_key,
    text_digest,
)

__all__ = [
    "ERROR_CATEGORY_MAX_CHARS", "RATIONALE_MAX_CHARS", "RESPLIT_FROM", "RESPLIT_INTO", "Assignment",
    "AssignmentStatus", "AutoTrain", "Campaign", "CampaignMetrics", "CampaignMode", "Completion", "FinishReason",
    "ImportJob", "ImportKind", "Invitation", "LabelingKey", "LeaseOrder", "MachineLabel",
    "Membership", "PositionedRow", "Problem", "Rating", "RatingRevision", "ResolvedLabel", "Role", "Solution",
    "SplitReport", "Step", "StepDecision", "StepRationale", "SuggestionMode", "normalized_problem_text",
    "position_meta", "problem_key", "says_correct", "text_digest",
]
