"""Campaigns and who works in them: the campaign with its settings and domain, memberships and invitations."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from stepcore.graders import DEFAULT_GRADER, GRADER_CHOICES


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
    # The campaign's domain, as plain data (annotate/scales.py, stepcore/graders/, stepcore/steps.py read it).
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
