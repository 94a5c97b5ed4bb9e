"""What is labeled: problems (owned by a campaign or the staff bank), solutions, their steps and the candidate
completions at each step."""
from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Any, ClassVar

from django.db import models
from django.db.models import Q

from .campaigns import Campaign


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
