"""Input forms: they only shape the request; the rules (and their error messages) live in the services."""
from __future__ import annotations

from typing import Any

from django import forms

from .models import BackendKind, Kind


class TrainingJobForm(forms.Form):
    dataset_version: forms.ModelChoiceField = forms.ModelChoiceField(queryset=None, empty_label=None)
    kind = forms.ChoiceField(choices=Kind.choices)
    base_model = forms.ChoiceField(choices=())
    backend = forms.ChoiceField(choices=BackendKind.choices, initial=BackendKind.LOCAL)
    max_steps = forms.IntegerField(min_value=1, required=False, help_text="Overrides epochs.")
    epochs = forms.FloatField(min_value=0.01, required=False, initial=1.0)
    learning_rate = forms.FloatField(min_value=1e-8, max_value=1.0, required=False, initial=5e-5)
    batch_size = forms.IntegerField(min_value=1, required=False, initial=8)
    max_length = forms.IntegerField(min_value=16, required=False, initial=512)
    lora = forms.BooleanField(required=False)

    def __init__(self, *args: Any, versions: Any, backbones: dict[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # self.fields holds the base Field type; these two are the ModelChoiceField and ChoiceField declared above.
        self.fields["dataset_version"].queryset = versions  # type: ignore[attr-defined]
        self.fields["base_model"].choices = [(name, name) for name in backbones]  # type: ignore[attr-defined]

    def hyper(self) -> dict[str, Any]:
        keys = ("max_steps", "epochs", "learning_rate", "batch_size", "max_length")
        hyper = {key: self.cleaned_data[key] for key in keys if self.cleaned_data.get(key) is not None}
        if self.cleaned_data.get("lora"):
            hyper["lora"] = True
        return hyper
