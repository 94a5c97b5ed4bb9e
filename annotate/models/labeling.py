"""A labeler's work on a solution: the assignment (lease, then finished pass), its ratings and their revisions,
the per-step decisions, bad-split reports and the client keys of whole-solution labelings."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from ..scales import RATING_MAX, RATING_MIN
from .campaigns import ERROR_CATEGORY_MAX_CHARS, RATIONALE_MAX_CHARS
from .solutions import Completion, Solution, Step


class AssignmentStatus(models.TextChoices):
    LEASED = "leased", "Leased (in progress)"
    SUBMITTED = "submitted"
    EXPIRED = "expired", "Lease expired"


class FinishReason(models.TextChoices):
    SOLUTION = "solution", "Every step rated, no error"
    FOUND_ERROR = "found_error", "Found an error"
    BAD_PROBLEM = "bad_problem", "Bad problem"
    GIVE_UP = "give_up", "Gave up"


class Assignment(models.Model):
    """One labeler's pass over one solution: the lease while open, the PRM800K `label` once finished."""

    solution = models.ForeignKey(Solution, on_delete=models.CASCADE, related_name="assignments")
    labeler = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="assignments"
    )
    status = models.CharField(max_length=20, choices=AssignmentStatus.choices, default=AssignmentStatus.LEASED)
    leased_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # NULL is "not finished yet" (PRM800K's null finish_reason), not one of the choices.
    finish_reason = models.CharField(max_length=20, choices=FinishReason.choices, null=True, blank=True)  # noqa: DJ001
    finish_reason_text = models.TextField(blank=True)
    total_time_ms = models.BigIntegerField(null=True, blank=True)
    is_gold = models.BooleanField(default=False, help_text="This labeling is the gold answer of a QC solution.")
    # PRM800K `timestamp` exactly as imported (exports reproduce it byte for byte).
    source_timestamp = models.CharField(max_length=64, blank=True)
    source_extra = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Human-graded campaigns: the labeler's verdict on the final answer (None: not rated, or not asked).
    outcome_correct = models.BooleanField(null=True, blank=True,
                                          help_text="The labeler's rating of the final answer (human grader).")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["solution", "labeler"],
                condition=Q(status="leased"),
                name="assignment_one_open_per_labeler",
            ),
            models.CheckConstraint(
                condition=Q(status="leased") | Q(finish_reason__isnull=False) | Q(status="expired"),
                name="assignment_submitted_has_reason",
            ),
            models.CheckConstraint(condition=Q(total_time_ms__gte=0) | Q(total_time_ms__isnull=True),
                                   name="assignment_time_non_negative"),
        ]
        indexes = [
            # The labeler's resume lookup and the lease reaper.
            models.Index(fields=["labeler", "status"], name="assignment_labeler_status_idx"),
            models.Index(fields=["lease_expires_at"], condition=Q(status="leased"), name="assignment_open_expiry_idx"),
            # Periodic exports: "changed since the last version".
            models.Index(fields=["updated_at"], name="assignment_updated_idx"),
            # The campaign dashboard's labels per hour over the last day.
            models.Index(fields=["finished_at"], condition=Q(status="submitted"), name="assignment_finished_idx"),
        ]

    def __str__(self) -> str:
        return f"assignment {self.pk} ({self.status})"

    @property
    def is_open(self) -> bool:
        return self.status == AssignmentStatus.LEASED


class Rating(models.Model):
    """The current rating of one completion in one assignment.

    ``rating`` is None for a completion that was shown but not rated (PRM800K keeps those).
    """

    # No index of its own: the unique constraint's index, which starts with this column, serves its lookups (a
    # second index is one more write per imported row, for a million rows per table).
    assignment = models.ForeignKey(Assignment, on_delete=models.CASCADE, related_name="ratings", db_index=False)
    completion = models.ForeignKey(Completion, on_delete=models.CASCADE, related_name="ratings")
    rating = models.SmallIntegerField(null=True, blank=True)
    flagged = models.BooleanField(null=True, blank=True)
    time_ms = models.BigIntegerField(null=True, blank=True, help_text="Time spent on this step before rating.")
    # What the labeler had seen of the step's machine labels when giving this rating (anchoring is measurable).
    # A database default: the PRM800K importer writes ratings with COPY and names only the columns it knows.
    suggestions_seen = models.CharField(max_length=8, choices=[
        ("none", "No machine label shown"), ("before", "Shown before this rating"),
        ("after", "Revealed only after this rating")], default="none", db_default="none")
    # db_default: the PRM800K importer COPYs ratings with an explicit column list.
    rationale = models.CharField(max_length=RATIONALE_MAX_CHARS, blank=True, default="", db_default="",
                                 help_text="The labeler's one-line reason for a −1 (empty: none).")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # db_default: the PRM800K importer COPYs ratings with an explicit column list.
    error_category = models.CharField(max_length=ERROR_CATEGORY_MAX_CHARS, blank=True, default="", db_default="",
                                      help_text="The campaign's error category named on an error step (empty: none).")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["assignment", "completion"], name="rating_unique_per_completion"),
            models.CheckConstraint(condition=Q(rating__gte=RATING_MIN, rating__lte=RATING_MAX) | Q(rating__isnull=True),
                                   name="rating_range"),
        ]

    def __str__(self) -> str:
        return f"{self.rating} on completion {self.completion_id}"


class RatingRevision(models.Model):
    """A value a rating had before it was changed: ratings are never silently overwritten.

    A rating removed from its pass (a step after a new first −1) leaves its last value here with
    ``removed_from_pass``; ``rating`` is then null, and ``assignment``/``completion`` still say whose it was.
    """

    rating = models.ForeignKey(Rating, null=True, blank=True, on_delete=models.SET_NULL, related_name="revisions")
    assignment = models.ForeignKey(Assignment, null=True, blank=True, on_delete=models.CASCADE,
                                   related_name="rating_revisions")
    completion = models.ForeignKey(Completion, null=True, blank=True, on_delete=models.CASCADE,
                                   related_name="rating_revisions")
    previous_rating = models.SmallIntegerField(null=True, blank=True)
    previous_flagged = models.BooleanField(null=True, blank=True)
    previous_rationale = models.CharField(max_length=RATIONALE_MAX_CHARS, blank=True, default="", db_default="")
    removed_from_pass = models.BooleanField(default=False)
    changed_at = models.DateTimeField(auto_now_add=True)
    changed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        ordering = ["changed_at", "id"]

    def __str__(self) -> str:
        return f"revision {self.pk}: was {self.previous_rating} on completion {self.completion_id}"


class StepDecision(models.Model):
    """Per (assignment, step): the completion the labeler continued with, or the step they wrote."""

    # No index of its own: the unique constraint's index, which starts with this column, serves its lookups (a
    # second index is one more write per imported row, for a million rows per table).
    assignment = models.ForeignKey(Assignment, on_delete=models.CASCADE, related_name="decisions", db_index=False)
    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="decisions")
    chosen_completion = models.IntegerField(null=True, blank=True)
    # PRM800K's value as is: null, a string, or {"text", "rating", "source", "flagged"}.
    human_completion = models.JSONField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["assignment", "step"], name="decision_unique_per_step"),
            models.CheckConstraint(condition=Q(chosen_completion__gte=0) | Q(chosen_completion__isnull=True),
                                   name="decision_chosen_non_negative"),
        ]

    def __str__(self) -> str:
        return f"decision on step {self.step_id} of assignment {self.assignment_id}"

    @property
    def is_decided(self) -> bool:
        """The pass continues past this step: with a chosen completion or the labeler's own text."""
        return self.chosen_completion is not None or self.human_completion is not None

    @property
    def human_text(self) -> str | None:
        value = self.human_completion
        if isinstance(value, dict):
            return value.get("text")
        return value if isinstance(value, str) else None


class SplitReport(models.Model):
    """A labeler's "bad split" flag on one step of their pass: the step boundaries look wrong (two steps in one,
    a step cut in half). Admins see the reported solutions and may re-split them (``services/resplit.py``)."""

    assignment = models.ForeignKey(Assignment, on_delete=models.CASCADE, related_name="split_reports",
                                   db_index=False)
    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="split_reports")
    note = models.CharField(max_length=RATIONALE_MAX_CHARS, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["step__solution_id", "step__index", "pk"]  # a solution's reports together, in step order
        constraints = [models.UniqueConstraint(fields=["assignment", "step"], name="split_report_unique_per_step")]

    def __str__(self) -> str:
        return f"bad split reported on step {self.step_id} in assignment {self.assignment_id}"


class LabelingKey(models.Model):
    """The client key of a whole-solution labeling: a retried request with the same key answers the labeling the
    first one made instead of applying it again (the unique constraint settles concurrent retries)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    client_key = models.CharField(max_length=100)
    assignment = models.ForeignKey(Assignment, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "client_key"], name="labelingkey_user_key_unique")]

    def __str__(self) -> str:
        return f"key {self.client_key!r} of user {self.user_id} (assignment {self.assignment_id})"
