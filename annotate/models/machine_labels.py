"""Machine labels: one machine source's P(step correct) for a step, beside the human ratings."""
from __future__ import annotations

from django.db import models
from django.db.models import Q

from annotate import labelsources
from annotate.labelsources import says_correct

from .solutions import Solution, Step


class MachineLabel(models.Model):
    """One machine source's label of one step: P(the step is correct) in [0, 1], beside the human ratings.

    A source is ``kind`` + ``source`` (``mc:smollm2``, ``prm:<model>``, ``import:math-shepherd``,
    ``llm:<model>@<template version>``); the kinds are a registry (``annotate.labelsources``); recording
    a source again replaces its labels of those steps. ``rollouts`` is the Monte-Carlo sample size (0 for a
    value inferred from a first-error index), ``provenance`` the model, settings and job that produced it.
    """

    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="machine_labels", db_index=False)
    solution = models.ForeignKey(Solution, on_delete=models.CASCADE, related_name="machine_labels")
    kind = models.CharField(max_length=labelsources.MAX_NAME_CHARS, choices=labelsources.choices)
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
