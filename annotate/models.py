"""Steplab's labeling data model: PRM800K's structure, with steps and ratings as rows.

A *solution* is an ordered list of *steps*; each step position holds one or more candidate *completions*
(one in stepwise mode, several in conversational mode). A labeler's pass over a solution is an
*assignment*; each (assignment, completion) has at most one current *rating*, whose earlier values
are kept in ``RatingRevision``. Per step, a ``StepDecision`` records which completion the labeler
continued with (``chosen_completion``) or the step they wrote themselves (``human_completion``).

Why one module of ~600 lines: Django finds an app's models in ``models.py``, and these form one schema whose
foreign keys point every which way; a package of model modules would only move the imports around.
"""
from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Any, ClassVar

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse

from steplab.jobs import Job

from .graders import DEFAULT_GRADER, GRADER_CHOICES
from .scales import RATING_MAX, RATING_MIN


class CampaignMode(models.TextChoices):
    # The labels say what a labeler does, not a PRM800K phase: a campaign's imported history may come from
    # either phase whatever mode it labels in now.
    STEPWISE = "stepwise", "Stepwise (rate pre-generated steps, stop at the first error)"
    CONVERSATIONAL = "conversational", "Conversational (pick among alternative completions per step)"


class SuggestionMode(models.TextChoices):
    """When the labeling workspace shows a step's machine labels (MC estimates, PRM scores, imported labels)."""

    HIDDEN = "hidden", "Hidden (labelers never see machine labels)"
    AFTER_RATING = "after_rating", "Revealed after the labeler rates the step"
    SHOWN = "shown", "Shown before rating"


class LeaseOrder(models.TextChoices):
    IN_ORDER = "in_order", "In import order"
    DISAGREEMENT_FIRST = "disagreement_first", "Where machine label sources disagree first"


class AutoTrain(models.TextChoices):
    """Whether new labels start a PRM and an ORM training on their own (``rewards.jobs.services.training``)."""

    ON = "on", "On: train once enough new labeled solutions are snapshotted"
    OFF = "off", "Off: only people start training"


class StepRationale(models.TextChoices):
    OFF = "off"
    OPTIONAL = "optional", "Optional: a labeler may give a one-line reason for a −1"
    REQUIRED = "required", "Required: a pass with a −1 is submitted only with its reason"


#: a rationale is one line (generative verifiers read it beside the step), at most this many characters
RATIONALE_MAX_CHARS = 500
#: an error category's name as a rating stores it (``Rating.error_category``); every input path checks this bound
ERROR_CATEGORY_MAX_CHARS = 64


class Campaign(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    instructions = models.TextField(blank=True, help_text="Markdown; math in $…$ is rendered with KaTeX.")
    mode = models.CharField(max_length=20, choices=CampaignMode.choices, default=CampaignMode.STEPWISE)
    overlap = models.PositiveSmallIntegerField(default=1, help_text="k: distinct labelers per solution.")
    qc_rate = models.FloatField(default=0.0, help_text="Share of served solutions that are gold QC questions.")
    screening_pass_threshold = models.FloatField(
        default=0.7, help_text="Agreement with gold on the screening set needed for regular work."
    )
    lease_minutes = models.PositiveIntegerField(default=30)
    export_interval_minutes = models.PositiveIntegerField(
        default=60, help_text="How often Celery beat snapshots this campaign's labels (0 = never)."
    )
    is_active = models.BooleanField(default=True)
    # Labelers whose agreement with gold falls below this are flagged (and paused if asked).
    quality_threshold = models.FloatField(
        default=0.6, help_text="Gold first-error agreement below which a labeler is flagged (0–1)."
    )
    quality_min_items = models.PositiveIntegerField(
        default=5, help_text="Gold items a labeler must have done before the threshold applies."
    )
    pause_below_threshold = models.BooleanField(default=False, help_text="Also pause flagged labelers.")
    suggestions = models.CharField(
        max_length=16, choices=SuggestionMode.choices, default=SuggestionMode.HIDDEN,
        help_text="Machine step labels in the workspace; gold and screening solutions never show them.")
    lease_order = models.CharField(
        max_length=24, choices=LeaseOrder.choices, default=LeaseOrder.IN_ORDER,
        help_text="Which regular solution a labeler gets next.")
    step_rationale = models.CharField(
        max_length=10, choices=StepRationale.choices, default=StepRationale.OFF, db_default=StepRationale.OFF,
        help_text="A one-line reason on a −1 step: off, optional, or required before the pass is submitted.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # The campaign's domain, as plain data (annotate/scales.py, annotate/graders/, annotate/steps.py read it).
    step_scale = models.JSONField(default=dict, blank=True,
                                  help_text="The step label scale (annotate/scales.py); empty: PRM800K's −1/0/+1.")
    error_categories = models.JSONField(default=list, blank=True,
                                        help_text="Optional kinds of error a labeler may name on an error step.")
    grader = models.CharField(max_length=32, choices=GRADER_CHOICES, default=DEFAULT_GRADER,
                              help_text="How a solution's final answer is graded (annotate/graders/).")
    grader_config = models.JSONField(default=dict, blank=True, help_text="The grader's settings (plain data).")
    step_rule = models.CharField(max_length=200, default="auto",
                                 help_text="How responses are cut into steps: auto, newline, paragraph, sentence, "
                                           "regex:PATTERN.")
    auto_train = models.CharField(max_length=8, choices=AutoTrain.choices, default=AutoTrain.ON)
    auto_train_max_steps = models.PositiveIntegerField(
        default=24, help_text="Budget of each automatic training job: optimizer steps per model.")

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(overlap__gte=1), name="campaign_overlap_positive"),
            models.CheckConstraint(condition=Q(qc_rate__gte=0) & Q(qc_rate__lte=1), name="campaign_qc_rate_0_1"),
        ]

    def __str__(self) -> str:
        return self.slug

    @property
    def is_stepwise(self) -> bool:
        return self.mode == CampaignMode.STEPWISE


class Role(models.TextChoices):  # labels: Django's, from the names ("Labeler", …)
    LABELER = "labeler"
    ADMIN = "admin"
    RESEARCHER = "researcher"


class Membership(models.Model):
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.LABELER)
    is_active = models.BooleanField(default=True)
    # Screening outcome for labelers: None = not yet decided.
    passed_screening = models.BooleanField(null=True, blank=True)
    is_paused = models.BooleanField(default=False, help_text="Paused labelers get no new work.")
    # Set when the labeler's agreement with gold fell below the campaign's quality threshold.
    quality_flagged_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["campaign", "user"], name="membership_unique_user")]

    def __str__(self) -> str:
        return f"{self.user} in {self.campaign} as {self.role}"


class Invitation(models.Model):
    """An admin's offer of a role in a campaign, waiting for the invited user: nobody (staff neither) becomes a
    member without saying yes. Accepting makes the membership; declining removes the offer."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="invitations")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="invitations")
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.LABELER)
    invited_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["campaign", "user"], name="invitation_unique_user")]

    def __str__(self) -> str:
        return f"{self.user} invited to {self.campaign} as {self.role}"


def text_digest(text: str) -> str:
    """SHA-256 of the exact text (the train/test split of exports hashes it: it never changes)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_WHITESPACE = re.compile(r"\s+")


def normalized_problem_text(text: str) -> str:
    """The text problems are joined on: Unicode NFC, surrounding whitespace stripped, every run of whitespace
    (spaces, tabs, newlines) collapsed to one space. Copies of a problem that differ only in spacing are one row."""
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFC", text)).strip()


def problem_key(text: str) -> str:
    """SHA-256 of :func:`normalized_problem_text`: a problem's identity within its campaign."""
    return text_digest(normalized_problem_text(text))


class Problem(models.Model):
    """A math problem with its ground truth, owned by one campaign.

    Problems are isolated per campaign: a campaign admin's imports only ever read or write the problems of
    that campaign, so nothing they do changes what another campaign's labelers, exports or models see.
    ``campaign`` NULL is the staff-only bank (``manage.py import_problems`` without ``--campaign``): a bank
    problem is copied into a campaign the first time one of its imports references it, and never changes there
    afterwards when the bank does.
    """

    campaign = models.ForeignKey(Campaign, null=True, blank=True, on_delete=models.CASCADE, related_name="problems",
                                 help_text="Owner; empty = the staff-only problem bank.")
    text = models.TextField()
    text_sha256 = models.CharField(max_length=64, editable=False, help_text="SHA-256 of the exact text.")
    key_sha256 = models.CharField(max_length=64, editable=False,
                                  help_text="SHA-256 of the normalised text: the join key within the campaign.")
    # NULL is "no ground truth" (not graded), which an empty string would blur with an empty answer.
    answer = models.TextField(null=True, blank=True, help_text="Ground-truth final answer.")  # noqa: DJ001
    solution = models.TextField(null=True, blank=True, help_text="Ground-truth worked solution.")  # noqa: DJ001
    subject = models.CharField(max_length=100, blank=True)
    level = models.PositiveSmallIntegerField(null=True, blank=True)
    source_id = models.CharField(max_length=200, blank=True, help_text="e.g. MATH unique_id")
    created_at = models.DateTimeField(auto_now_add=True)
    # NULL: not a multiple-choice problem (an empty list would read as a question with no options).
    options = models.JSONField(null=True, blank=True, help_text="Multiple choice: the option texts, A first.")

    class Meta:
        constraints = [
            # One problem is one row per owner, on the normalised text and on `unique_id` (import_solutions'
            # `problem_id` references); NULL campaigns are not equal in SQL, so the bank has its own pair.
            models.UniqueConstraint(fields=["campaign", "key_sha256"], condition=Q(campaign__isnull=False),
                                    name="problem_unique_text_per_campaign"),
            models.UniqueConstraint(fields=["key_sha256"], condition=Q(campaign__isnull=True),
                                    name="problem_unique_text_in_bank"),
            models.UniqueConstraint(fields=["campaign", "source_id"],
                                    condition=Q(campaign__isnull=False) & ~Q(source_id=""),
                                    name="problem_unique_source_id_per_campaign"),
            models.UniqueConstraint(fields=["source_id"], condition=Q(campaign__isnull=True) & ~Q(source_id=""),
                                    name="problem_unique_source_id_in_bank"),
        ]

    def __str__(self) -> str:
        return self.source_id or self.text[:60]

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.set_digests()
        super().save(*args, **kwargs)

    def set_digests(self) -> None:
        self.text_sha256 = text_digest(self.text)
        self.key_sha256 = problem_key(self.text)


#: provenance keys linking a solution re-split after it was labeled and the solution that took its new steps
RESPLIT_FROM, RESPLIT_INTO = "resplit_from", "resplit_into"


class Solution(models.Model):
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="solutions")
    problem = models.ForeignKey(Problem, on_delete=models.PROTECT, related_name="solutions")
    generator = models.CharField(max_length=200, blank=True)
    sample_index = models.IntegerField(null=True, blank=True)
    # NULL is "the solution reached no answer", exported as PRM800K's null, not as an empty answer.
    final_answer = models.TextField(null=True, blank=True,  # noqa: DJ001
                                    help_text="The solution's own answer (pre_generated_answer).")
    is_correct = models.BooleanField(null=True, blank=True, help_text="Grader verdict against the ground truth.")
    verifier_score = models.FloatField(null=True, blank=True, help_text="pre_generated_verifier_score")
    generation = models.IntegerField(null=True, blank=True, help_text="Labeling generation; -1 = screening set.")
    is_quality_control = models.BooleanField(default=False)
    is_screening = models.BooleanField(default=False)
    # Gold first-error step index for QC/screening: -1 = no error; None = no gold.
    gold_first_error = models.IntegerField(null=True, blank=True)
    pre_generated_steps = models.JSONField(null=True, blank=True)
    provenance = models.JSONField(default=dict, blank=True, help_text="How this solution was made or chosen.")
    # Unmodelled PRM800K keys and values that differ from the relational ones, so export is lossless.
    source_extra = models.JSONField(default=dict, blank=True)
    content_sha256 = models.CharField(max_length=64, blank=True, help_text="Groups labelings of the same steps.")
    # Kept by annotate.services.machine_labels whenever a machine label of the solution is recorded; NULL = no
    # machine label yet. No index: only campaigns leasing "disagreement first" sort on it, and an index would be
    # one more write per imported solution for every campaign.
    machine_disagreement = models.FloatField(
        null=True, blank=True, help_text="How much the machine label sources disagree on this solution (0–2).")
    label_count = models.PositiveSmallIntegerField(default=0, help_text="Assignments leased (open or finished).")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            # lease_next_solution: regular work still short of its overlap, by generation.
            models.Index(
                fields=["campaign", "generation", "label_count", "id"],
                name="solution_leasable_idx",
                condition=Q(is_quality_control=False, is_screening=False),
            ),
            models.Index(fields=["campaign", "content_sha256"], name="solution_content_idx"),
        ]

    def __str__(self) -> str:
        return f"solution {self.pk} of {self.problem}"


class PositionedRow(models.Model):
    """A row at a position (``index``, from 0) within its parent: a step in a solution, a completion at a step, a
    problem in a candidate pool, a candidate of a pool problem. ``noun`` names the row and ``parent`` is its
    foreign key to the parent, for ``__str__`` ("step 3 of solution 12")."""

    index = models.PositiveIntegerField()

    noun: ClassVar[str]
    parent: ClassVar[str]

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.noun} {self.index} of {self.parent.replace('_', ' ')} {getattr(self, f'{self.parent}_id')}"


def position_meta(parent: str, *, order_by: str, constraint: str) -> Any:  # a Meta class, as Django reads it
    """The ``Meta`` of a ``PositionedRow`` with one row per position: rows read in the parent's order
    (``order_by``: the parent's column or, through its own ordering, the parent) and then by position."""

    class Meta:
        ordering = [order_by, "index"]
        constraints = [models.UniqueConstraint(fields=[parent, "index"], name=constraint)]

    return Meta


class Step(PositionedRow):
    noun, parent = "step", "solution"
    # No index of its own: the unique constraint's index, which starts with this column, serves its lookups (a
    # second index is one more write per imported row, for a million rows per table).
    solution = models.ForeignKey(Solution, on_delete=models.CASCADE, related_name="steps", db_index=False)

    Meta = position_meta("solution", order_by="solution_id", constraint="step_unique_index")


class Completion(PositionedRow):
    """One candidate text at a step position (index 0 is the pre-generated step in stepwise mode)."""

    noun, parent = "completion", "step"
    # Indexed on its own although the unique constraint's index starts with it: without it, the export's generic
    # plan for "completions of these steps" (a prepared statement) read 5x slower.
    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="completions")
    text = models.TextField()

    Meta = position_meta("step", order_by="step_id", constraint="completion_unique_index")

    def __str__(self) -> str:
        return self.text[:60]


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


# --- Machine labels ----------------------------------------------------------------------------------------

class LabelSourceKind(models.TextChoices):
    MC = "mc", "Monte-Carlo estimate (share of sampled continuations that reach the answer)"
    PRM = "prm", "A registered PRM's step score"
    IMPORT = "import", "Imported from a file (external, named)"


def says_correct(kind: str, value: float) -> bool:
    """A source's hard label of a step. A Monte-Carlo estimate says "correct" when any sampled continuation
    reached the answer (Math-Shepherd's hard estimate, ``value > 0``); a PRM score or an imported label when
    ``value >= 0.5``."""
    return value > 0 if kind == LabelSourceKind.MC else value >= 0.5


class MachineLabel(models.Model):
    """One machine source's label of one step: P(the step is correct) in [0, 1], beside the human ratings.

    A source is ``kind`` + ``source`` (``mc:smollm2``, ``prm:<model>``, ``import:math-shepherd``); recording
    a source again replaces its labels of those steps. ``rollouts`` is the Monte-Carlo sample size (0 for a
    value inferred from a first-error index), ``provenance`` the model, settings and job that produced it.
    """

    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="machine_labels", db_index=False)
    solution = models.ForeignKey(Solution, on_delete=models.CASCADE, related_name="machine_labels")
    kind = models.CharField(max_length=8, choices=LabelSourceKind.choices)
    source = models.CharField(max_length=200, help_text="The source's name: a model, an import's name.")
    value = models.FloatField(help_text="P(step correct), 0–1.")
    rollouts = models.PositiveIntegerField(null=True, blank=True, help_text="Monte-Carlo continuations sampled.")
    provenance = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            # its index (step first) serves the workspace's "labels of these steps" and the replace-on-record
            models.UniqueConstraint(fields=["step", "kind", "source"], name="machinelabel_unique_per_source"),
            models.CheckConstraint(condition=Q(value__gte=0) & Q(value__lte=1), name="machinelabel_value_0_1"),
        ]

    def __str__(self) -> str:
        return f"{self.kind}:{self.source} {self.value:.2f} on step {self.step_id}"

    @property
    def source_key(self) -> str:
        return f"{self.kind}:{self.source}"

    @property
    def says_correct(self) -> bool:
        return says_correct(self.kind, self.value)


# --- Campaign admin and quality ---------------------------------------------------------------------------

class ImportKind(models.TextChoices):
    PROBLEMS = "problems", "Problems (MATH-style JSONL)"
    SOLUTIONS = "solutions", "Solutions (generator samples JSONL)"
    PRM800K = "prm800k", "PRM800K labels (JSONL)"
    MACHINE_LABELS = "machine_labels", "Machine step labels (JSONL: soft labels, first error or PRM800K rows)"


class ImportJob(Job):
    """A browser upload run by a Celery worker through the same importer services as the commands."""

    task_name = "annotate.run_import_job"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="import_jobs")
    kind = models.CharField(max_length=20, choices=ImportKind.choices)
    file = models.FileField(upload_to="imports/%Y/%m/")
    original_name = models.CharField(max_length=255)
    skip_invalid = models.BooleanField(default=False)
    split_rule = models.CharField(max_length=200, default="auto")
    generation = models.IntegerField(null=True, blank=True)
    phase = models.CharField(max_length=20, blank=True)
    label_source = models.CharField(max_length=200, blank=True, help_text="Machine labels: the source's name.")
    progress = models.FloatField(default=0.0, help_text="0–1")
    total_lines = models.PositiveIntegerField(default=0)
    lines = models.PositiveIntegerField(default=0)
    imported = models.PositiveIntegerField(default=0)
    rejected_count = models.PositiveIntegerField(default=0)
    rejected = models.JSONField(default=list, blank=True, help_text="[{line, field, message}] (first 1,000)")
    created = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")

    class Meta(Job.Meta):
        constraints = [
            models.CheckConstraint(condition=Q(progress__gte=0) & Q(progress__lte=1), name="importjob_progress_0_1"),
        ]
        indexes = [  # the dispatcher's query: queued jobs whose task never reached the broker
            models.Index(fields=["created_at"], name="importjob_undispatched_idx",
                         condition=Q(status="queued", dispatched_at__isnull=True)),
        ]

    def __str__(self) -> str:
        return f"import {self.pk} ({self.kind}, {self.status})"

    @property
    def percent(self) -> int:
        return round(self.progress * 100)

    def get_absolute_url(self) -> str:
        return reverse("manage:import", args=[self.campaign.slug, self.pk])

    def progress_words(self) -> str:
        return f"{self.lines} of {self.total_lines} lines" if self.total_lines else f"{self.percent} % done"


class ResolvedLabel(models.Model):
    """A reviewer's adjudicated rating of one step, kept beside the labelers' raw ratings (never replacing them)."""

    step = models.OneToOneField(Step, on_delete=models.CASCADE, related_name="resolved_label")
    solution = models.ForeignKey(Solution, on_delete=models.CASCADE, related_name="resolved_labels")
    rating = models.SmallIntegerField()
    note = models.TextField(blank=True)
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(rating__gte=RATING_MIN, rating__lte=RATING_MAX),
                                   name="resolved_rating_range"),
        ]

    def __str__(self) -> str:
        return f"resolved {self.rating} on step {self.step_id}"


class CampaignMetrics(models.Model):
    """Quality metrics too slow for a page view, precomputed by a Celery task (latest row per campaign)."""

    campaign = models.OneToOneField(Campaign, on_delete=models.CASCADE, related_name="metrics")
    data = models.JSONField(default=dict)
    computed_at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"metrics of {self.campaign_id} at {self.computed_at:%Y-%m-%d %H:%M}"


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
