"""Input forms of the campaign admin workspace: shape and range checks, each error naming its field."""
from __future__ import annotations

from django import forms
from django.conf import settings

from .models import Campaign, ImportKind, Role
from .steps import SPLIT_RULES


def _share(name: str) -> dict[str, str]:
    return {"min_value": f"{name} must be between 0 and 1.", "max_value": f"{name} must be between 0 and 1.",
            "invalid": f"{name} must be a number between 0 and 1.", "required": f"{name} is required."}


class CampaignForm(forms.ModelForm):
    qc_rate = forms.FloatField(min_value=0, max_value=1, error_messages=_share("qc_rate"))
    screening_pass_threshold = forms.FloatField(min_value=0, max_value=1,
                                                error_messages=_share("screening_pass_threshold"))
    quality_threshold = forms.FloatField(min_value=0, max_value=1, error_messages=_share("quality_threshold"))
    overlap = forms.IntegerField(min_value=1, max_value=50, error_messages={
        "min_value": "overlap must be at least 1.", "max_value": "overlap must be at most 50.",
        "invalid": "overlap must be a whole number.", "required": "overlap is required."})
    lease_minutes = forms.IntegerField(min_value=1, max_value=7 * 24 * 60, error_messages={
        "min_value": "lease_minutes must be at least 1.", "max_value": "lease_minutes must be at most a week.",
        "invalid": "lease_minutes must be a whole number.", "required": "lease_minutes is required."})

    class Meta:
        model = Campaign
        fields = ["name", "slug", "mode", "instructions", "overlap", "qc_rate", "screening_pass_threshold",
                  "lease_minutes", "export_interval_minutes", "quality_threshold", "quality_min_items",
                  "pause_below_threshold"]
        widgets = {"instructions": forms.Textarea(attrs={"rows": 10})}


class MemberForm(forms.Form):
    username = forms.CharField(max_length=150, error_messages={"required": "username is required."})
    role = forms.ChoiceField(choices=Role.choices, error_messages={
        "invalid_choice": "role must be labeler, admin or researcher, not %(value)s."})


class MemberStateForm(forms.Form):
    action = forms.ChoiceField(choices=[("deactivate", "deactivate"), ("activate", "activate"),
                                        ("pause", "pause"), ("unpause", "unpause")], error_messages={
        "required": "action is required.",
        "invalid_choice": "action must be deactivate, activate, pause or unpause, not %(value)s."})


class UploadForm(forms.Form):
    kind = forms.ChoiceField(choices=ImportKind.choices, error_messages={
        "required": "kind is required.",
        "invalid_choice": "kind must be problems, solutions or prm800k, not %(value)s."})
    file = forms.FileField(error_messages={"required": "file is required.", "empty": "file is empty."})
    skip_invalid = forms.BooleanField(required=False, label="Skip invalid lines (import the valid ones)")
    split_rule = forms.ChoiceField(choices=[(r, r) for r in SPLIT_RULES], initial="auto", required=False,
                                   error_messages={"invalid_choice": "split_rule must be one of "
                                                   + ", ".join(SPLIT_RULES) + ", not %(value)s."})
    generation = forms.IntegerField(required=False, error_messages={"invalid": "generation must be a whole number."})

    def clean_file(self):  # type: ignore[no-untyped-def]
        upload = self.cleaned_data["file"]
        if upload.size > settings.STEPLAB_UPLOAD_MAX_BYTES:
            raise forms.ValidationError(f"file is larger than {settings.STEPLAB_UPLOAD_MAX_BYTES} bytes.")
        return upload

    def clean_split_rule(self) -> str:
        return self.cleaned_data.get("split_rule") or "auto"
