"""Browser uploads, run by a Celery worker through the importer services."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse

from steplab.jobs import Job

from .campaigns import Campaign


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
