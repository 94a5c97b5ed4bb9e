"""Input forms of the campaign admin workspace: shape and range checks, each error naming its field."""
from __future__ import annotations

import json
from typing import Any

from django import forms
from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import models

from stepcore.graders import DEFAULT_GRADER, GRADER_CHOICES, GRADERS
from stepcore.steprules import MAX_RULE_CHARS, STEP_RULE_DETAIL

from .models import AutoTrain, Campaign, ImportKind, LeaseOrder, Role, StepRationale, SuggestionMode
from .scales import NAMED, ScaleError, scale_from_data
from .step_rule_validation import validate_step_rule


def scale_text(scale: dict[str, Any]) -> str:
    """A campaign's scale as the settings form shows it: a built-in scale's name, a custom one as JSON."""
    if not scale:
        return "pm1"
    return scale["name"] if scale.get("values") is None else json.dumps(scale)


def _share(name: str) -> dict[str, str]:
    between = f"{name} must be between 0 and 100 %%."  # %% : Django formats these messages with their limit
    return {"min_value": between, "max_value": between,
            "invalid": f"{name} must be a number of percent between 0 and 100.", "required": f"{name} is required."}


class PercentField(forms.FloatField):
    """A share the model stores as 0–1, shown and typed in percent, as every page writes shares (70 %)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(min_value=0, max_value=100, **kwargs)

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, float | int) and not isinstance(value, bool):
            return f"{value * 100:.10g}"  # 0.07 * 100 is 7.000000000000001
        return value

    def clean(self, value: Any) -> float | None:
        if isinstance(value, str):
            value = value.strip().removesuffix("%").strip()
        percent = super().clean(value)
        return None if percent is None else percent / 100


def _number(field: forms.IntegerField, *, step: str, help_text: str) -> forms.IntegerField:
    """A number field that shows its range and step in the browser and one line of help under it."""
    field.widget.attrs.update({"min": field.min_value, "max": field.max_value, "step": step})
    field.help_text = help_text
    return field


def _whole(name: str, low: int, high: int, high_text: str) -> dict[str, str]:
    return {"min_value": f"{name} must be at least {low}.", "max_value": f"{name} must be at most {high_text}.",
            "invalid": f"{name} must be a whole number.", "required": f"{name} is required."}


def _setting(choices: type[models.TextChoices], name: str, label: str, help_text: str) -> forms.ChoiceField:
    """A campaign setting picked from ``choices``; left out of a POST, the campaign keeps its value."""
    values = [value for value, _ in choices.choices]
    return forms.ChoiceField(
        choices=choices.choices, required=False, initial=values[0], label=label, help_text=help_text,
        error_messages={"invalid_choice": f"{name} must be {', '.join(values[:-1])} or {values[-1]}, "
                                          "not %(value)s."})


class CampaignForm(forms.ModelForm):
    """Every field starts at the model's default (a new campaign works as it is) and says its range."""

    overlap = _number(
        forms.IntegerField(min_value=1, max_value=50, initial=1, label="Labelers per solution (overlap k)",
                           error_messages=_whole("overlap", 1, 50, "50")),
        step="1", help_text="1–50. How many different labelers rate each solution; 1 for speed, 3 to measure "
                            "agreement.")
    qc_rate = _number(
        PercentField(initial=0.0, label="Gold QC rate (%)", error_messages=_share("qc_rate")),
        step="0.1", help_text="0–100 %. Share of served solutions that are gold QC questions, e.g. 10 = one in ten.")
    screening_pass_threshold = _number(
        PercentField(initial=0.7, label="Screening pass mark (%)", error_messages=_share("screening_pass_threshold")),
        step="0.1", help_text="0–100 %. Agreement with gold on the screening questions a new labeler needs before "
                               "regular work.")
    lease_minutes = _number(
        forms.IntegerField(min_value=1, max_value=7 * 24 * 60, initial=30, label="Lease (minutes)",
                           error_messages=_whole("lease_minutes", 1, 7 * 24 * 60, "a week")),
        step="1", help_text="1–10080 (a week). How long a labeler holds a solution before it goes back to the queue.")
    quality_threshold = _number(
        PercentField(initial=0.6, label="Quality threshold (%)", error_messages=_share("quality_threshold")),
        step="0.1", help_text="0–100 %. Gold first-error agreement below which a labeler is flagged.")

    step_rationale = _setting(
        StepRationale, "step_rationale", "Reason on a −1 step",
        "A one-line reason on a −1 step, exported beside the step (for generative verifiers). Off; optional; or "
        "required: a pass with a −1 is submitted only with its reason.")
    suggestions = _setting(
        SuggestionMode, "suggestions", "Machine labels",
        "Machine step labels (Monte-Carlo estimates, PRM scores, imported labels) in the workspace. Hidden by "
        "default, so they cannot anchor labelers; gold and screening solutions never show them.")
    lease_order = _setting(
        LeaseOrder, "lease_order", "Which solution next",
        "“Disagreement first” serves first the solutions where machine label sources disagree (consensus routing).")
    auto_train = _setting(
        AutoTrain, "auto_train", "Automatic training",
        "Start a PRM and an ORM training on their own once enough new labeled solutions are snapshotted (the "
        "job's page says why it started). Off: only people start training.")
    auto_train_max_steps = _number(
        forms.IntegerField(min_value=1, max_value=100_000, initial=24, required=False,
                           label="Automatic training budget (steps)",
                           error_messages=_whole("auto_train_max_steps", 1, 100_000, "100000")),
        step="1", help_text="1–100000. Optimizer steps of each automatic PRM and ORM job; 24 is a few minutes on "
                            "a CPU, a full pass over 30,000 labeled solutions is thousands (hours on a CPU).")
    grader = forms.ChoiceField(
        choices=GRADER_CHOICES, required=False, initial=DEFAULT_GRADER, label="Outcome grader",
        help_text="How a solution's final answer is graded: math-verify (math), the chosen letter of the problem's "
                  "options (multiple choice), exact or regex match, or by the labelers (human: they rate the final "
                  "answer, which becomes the outcome label).",
        error_messages={"invalid_choice": f"grader must be one of {', '.join(GRADERS)}, not %(value)s."})
    step_rule = forms.CharField(
        required=False, max_length=MAX_RULE_CHARS, initial="auto", label="Step rule", validators=[validate_step_rule],
        help_text=f"How imported responses are cut into steps: {STEP_RULE_DETAIL}.")
    step_scale = forms.CharField(
        required=False, label="Label scale", widget=forms.Textarea(attrs={"rows": 3, "data-scale": ""}),
        help_text="pm1 (−1 / 0 / +1, PRM800K), binary (incorrect / correct), or a custom scale as JSON: "
                  '{"name": "four", "values": [{"value": -2, "label": "Wrong", "key": "1", "colour": "#c62828", '
                  '"is_error": true, "positive": false}, …]} — 2 to 5 values, lowest first.')
    error_categories = forms.CharField(
        required=False, max_length=700, label="Error categories",
        help_text="Optional, comma-separated kinds of error a labeler may name on an error step (number keys after "
                  "the error key), e.g. factual error, misread the question, invalid inference, calculation.")
    KEPT_WHEN_LEFT_OUT = ("step_rationale", "suggestions", "lease_order", "auto_train", "auto_train_max_steps",
                          "grader", "step_rule")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        scale, categories = self.instance.step_scale, self.instance.error_categories
        self.initial.setdefault("step_scale", scale_text(scale))
        self.initial.setdefault("error_categories", ", ".join(categories or []))

    def clean_step_scale(self) -> dict[str, Any] | None:
        """None: left out of the POST (the campaign keeps its scale)."""
        if "step_scale" not in self.data:
            return None
        text = (self.cleaned_data.get("step_scale") or "").strip() or "pm1"
        if text in NAMED:
            return {} if text == "pm1" else {"name": text}
        try:
            data = json.loads(text)
            scale_from_data(data)
        except json.JSONDecodeError as error:
            raise forms.ValidationError(f"step_scale: pm1, binary or a JSON object, not valid JSON ({error}).") \
                from None
        except ScaleError as error:
            raise forms.ValidationError(f"step_scale: {error}") from None
        return dict(data)

    def clean_error_categories(self) -> list[str] | None:
        if "error_categories" not in self.data:
            return None
        return [part.strip() for part in (self.cleaned_data.get("error_categories") or "").split(",") if part.strip()]

    def clean(self) -> dict[str, Any]:
        """A setting left out of a POST (a form from before that setting) keeps the campaign's value."""
        super().clean()
        cleaned = self.cleaned_data
        for name in self.KEPT_WHEN_LEFT_OUT:
            if not cleaned.get(name):
                cleaned[name] = getattr(self.instance, name) or self.fields[name].initial
        for name in ("step_scale", "error_categories"):
            if cleaned.get(name) is None:
                cleaned[name] = getattr(self.instance, name)
        return cleaned

    class Meta:
        model = Campaign
        fields = ["name", "slug", "mode", "instructions", "overlap", "qc_rate", "screening_pass_threshold",
                  "lease_minutes", "export_interval_minutes", "quality_threshold", "quality_min_items",
                  "pause_below_threshold", "suggestions", "lease_order",
                  "step_rationale", "auto_train", "auto_train_max_steps", "grader", "step_rule"]
        error_messages = {"slug": {"unique": "A campaign with this short name already exists: choose another."}}
        widgets = {"instructions": forms.Textarea(attrs={"rows": 10}),
                   "export_interval_minutes": forms.NumberInput(attrs={"min": 0, "step": 1}),
                   "quality_min_items": forms.NumberInput(attrs={"min": 0, "step": 1})}
        help_texts = {
            "name": "Shown to labelers, e.g. “Algebra, round 2”.",
            "slug": "Letters, digits and dashes; part of every address of this campaign (/c/<slug>/). "
                    "Cannot be reused.",
            "mode": "Stepwise: rate pre-generated steps, stop at the first −1 (PRM800K phase 2). "
                    "Conversational: pick among candidate steps or write one.",
            "instructions": "Markdown; math between dollar signs is rendered. Labelers see this above every problem.",
            "export_interval_minutes": "0 or more. How often a dataset version of the labels is snapshotted "
                                       "(0 = never).",
            "quality_min_items": "0 or more. Gold items a labeler must have done before the quality threshold applies.",
            "pause_below_threshold": "Also pause labelers flagged below the quality threshold (an admin "
                                     "unpauses them).",
        }
        labels = {"slug": "Short name (slug)", "export_interval_minutes": "Snapshot every (minutes)",
                  "quality_min_items": "Gold items before flagging", "pause_below_threshold": "Pause flagged labelers"}


class ResplitForm(forms.Form):
    steps = forms.CharField(strip=False, widget=forms.Textarea(attrs={"rows": 20, "data-resplit-steps": ""}),
                            max_length=settings.STEPLAB_MAX_STEP_CHARS, error_messages={
        "required": "steps is required: the solution's steps, separated by blank lines.",
        "max_length": "steps is too long (at most %(limit_value)d characters)."},
                            help_text="One step per block; separate steps by a blank line. A step may span "
                                      "several lines.")


class MemberForm(forms.Form):
    username = forms.CharField(max_length=150, error_messages={"required": "username is required."})
    role = forms.ChoiceField(choices=Role.choices, error_messages={
        "invalid_choice": "role must be labeler, admin or researcher, not %(value)s."})


class NewAccountForm(forms.Form):
    """A new account for someone who has none, a member of this campaign at once (``services.accounts``)."""

    username = forms.CharField(max_length=150, label="User name",
                               error_messages={"required": "username is required."})
    email = forms.CharField(max_length=254, required=False, label="E-mail (optional)")
    role = forms.ChoiceField(choices=Role.choices, initial=Role.LABELER, error_messages={
        "invalid_choice": "role must be labeler, admin or researcher, not %(value)s."})
    password = forms.CharField(required=False, strip=False, max_length=128, widget=forms.PasswordInput,
                               label="Password (empty: generate one, shown once)")


class MemberStateForm(forms.Form):
    action = forms.ChoiceField(choices=[("deactivate", "deactivate"), ("activate", "activate"),
                                        ("pause", "pause"), ("unpause", "unpause")], error_messages={
        "required": "action is required.",
        "invalid_choice": "action must be deactivate, activate, pause or unpause, not %(value)s."})


SPLIT_HELP = f"Solutions given as text: how to cut them into steps (empty: the campaign's rule). {STEP_RULE_DETAIL}."


class UploadForm(forms.Form):
    kind = forms.ChoiceField(choices=ImportKind.choices, error_messages={
        "required": "kind is required.",
        "invalid_choice": "kind must be problems, solutions, prm800k or machine_labels, not %(value)s."})
    file = forms.FileField(error_messages={"required": "file is required.", "empty": "file is empty."},
                           help_text="A .jsonl file (UTF-8, one JSON object per line).")
    skip_invalid = forms.BooleanField(required=False, label="Skip invalid lines (import the valid ones)")
    split_rule = forms.CharField(initial="", required=False, max_length=MAX_RULE_CHARS, label="Split rule",
                                 help_text=SPLIT_HELP, validators=[validate_step_rule],
                                 widget=forms.TextInput(attrs={"placeholder": "the campaign's step rule"}))
    generation = forms.IntegerField(required=False, error_messages={"invalid": "generation must be a whole number."},
                                    help_text="Solutions only: the round these samples belong to, for rows without "
                                              "their own `generation` (empty = none).")
    label_source = forms.CharField(required=False, max_length=200, label="Machine label source",
                                   help_text="Machine labels only: the source's name, e.g. math-shepherd-7b "
                                             "(labels are stored as import:<name>, beside the human ratings).")

    def clean_file(self) -> UploadedFile:
        upload = self.cleaned_data["file"]
        if upload.size > settings.STEPLAB_UPLOAD_MAX_BYTES:
            raise forms.ValidationError(f"file is larger than {settings.STEPLAB_UPLOAD_MAX_BYTES} bytes.")
        return upload

    def clean_split_rule(self) -> str:
        return self.cleaned_data.get("split_rule") or ""


class ReviewForm(forms.Form):
    """The review page's resolved labels: ``step-<index>`` (a value of the campaign's scale, or empty to clear it)
    with its ``note-<index>``, for whichever steps the page posts; the service checks each value against the scale."""

    def clean(self) -> dict[str, Any]:
        values: dict[int, int | None] = {}
        notes: dict[int, str] = {}
        errors = []
        for key in self.data:
            if not key.startswith("step-"):
                continue
            raw = self.data.get(key) or ""
            number, value = key.removeprefix("step-"), raw.strip().removeprefix("-")
            if not (number.isascii() and number.isdigit() and (raw == "" or (value.isascii() and value.isdigit()))):
                errors.append(forms.ValidationError(
                    f"{key}: rating must be a value of the campaign's scale or empty, got {raw!r}"))
                continue
            values[int(number)] = None if raw == "" else int(raw)
            notes[int(number)] = self.data.get(f"note-{number}", "")
        if errors:
            raise forms.ValidationError(errors)
        return {"values": values, "notes": notes}
