"""Input forms: they only shape the request (types, ids resolved within the campaign, the JSON settings); the rules
(and their error messages) live in the services.

Every start form of the dashboard is a :class:`StartForm`: a failed check, the form's own or a service's
``JobInputError``, is one ``(field, message)`` in :attr:`StartForm.problems`, which the page shows next to the form
(``data-error-for``) with a 400.
"""
from __future__ import annotations

import json
from typing import Any

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS

from annotate.models import Campaign
from endpoints.models import Endpoint
from steplab import jsonlimits
from steplab.jsonlimits import MAX_ID

from . import selectors
from .models import BackendKind, Kind, LabelingMethod, PoolPurpose
from .services.comparisons import DEFAULT_MAX_STEPS, DEFAULT_PER_PROBLEM
from .services.machine_labeling import missing_reward_model
from .services.training import JobInputError


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


def _id_field(**kwargs: Any) -> forms.IntegerField:
    return forms.IntegerField(min_value=1, max_value=MAX_ID, **kwargs)


def _endpoint(pk: int | None, campaign: Campaign) -> Endpoint | None:
    """The endpoint an id names (the services check that the user may use it)."""
    endpoint = None if pk is None else Endpoint.objects.filter(pk=pk).first()
    if pk is not None and endpoint is None:
        raise forms.ValidationError(f"no endpoint {pk} you may use in campaign {campaign.slug}")
    return endpoint


class StartForm(forms.Form):
    """A dashboard form that starts work in ``campaign``; ``refuse`` records a service's refusal beside its own."""

    def __init__(self, *args: Any, campaign: Campaign, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.campaign = campaign
        self.refusals: list[tuple[str, str]] = []

    def refuse(self, error: JobInputError) -> None:
        """A service's ``JobInputError``: shown under its field's name (a settings key need not be a form field)."""
        self.refusals.append((error.field, str(error)))

    @property
    def problems(self) -> list[tuple[str, str]]:
        """Every error of the form as (field, message): a field's own first, then the services' refusals."""
        own = [(field, f"{field}: {message}" if field != NON_FIELD_ERRORS else str(message))
               for field, messages in self.errors.items() for message in messages]
        return own + self.refusals


class JsonSettingsField(forms.CharField):
    """A form's optional "More (JSON)" settings: the decoded object ({} when empty), nested and sized within limits."""

    def __init__(self, *, object_only: bool = True, **kwargs: Any) -> None:
        super().__init__(required=False, **kwargs)
        self.object_only = object_only

    def to_python(self, value: Any) -> Any:
        text = super().to_python(value)
        try:
            config = jsonlimits.loads(text) if text else {}
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"is not valid JSON ({exc.msg})") from None
        except ValueError as exc:  # too deep, or a number no column holds
            raise forms.ValidationError(f"is not usable: {exc}") from None
        if self.object_only and not isinstance(config, dict):
            raise forms.ValidationError(f"must be a JSON object, got {type(config).__name__}")
        return config


class CompareForm(StartForm):
    pool = _id_field(required=False)
    max_steps = forms.IntegerField(required=False, initial=DEFAULT_MAX_STEPS)
    per_problem = forms.IntegerField(required=False, initial=DEFAULT_PER_PROBLEM)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        for key in ("max_steps", "per_problem"):  # left empty: the default (the service checks the range)
            if key in data and data[key] is None:
                data[key] = self.fields[key].initial
        return data


class IdListField(forms.Field):
    """Ids ticked in a list of checkboxes (``getlist``): each a positive integer a bigint column holds."""

    widget = forms.MultipleHiddenInput

    def to_python(self, value: Any) -> list[int]:
        values = list(value or [])
        bad = [v for v in values if not (isinstance(v, str) and v.isascii() and v.isdigit() and 0 < int(v) <= MAX_ID)]
        if bad:
            raise forms.ValidationError(f"must be ids, got {bad[0]!r}")
        return [int(v) for v in values]


class ScoreForm(StartForm):
    pool = _id_field()
    models = IdListField(required=False)

    def clean_pool(self) -> Any:
        pool = selectors.campaign_pool(self.campaign, self.cleaned_data["pool"])
        if pool is None:
            raise forms.ValidationError(f"no candidate pool {self.cleaned_data['pool']} in campaign "
                                        f"{self.campaign.slug}")
        return pool

    def clean_models(self) -> Any:
        models = selectors.campaign_reward_models(self.campaign, self.cleaned_data["models"])
        if not models:
            raise forms.ValidationError("choose at least one reward model of this campaign")
        return models


class EvaluateForm(StartForm):
    prm_scoring = _id_field(required=False)
    orm_scoring = _id_field(required=False)
    aggregation = forms.CharField(required=False)

    def clean_aggregation(self) -> str:
        return self.cleaned_data["aggregation"] or "product"


class LabelingRoundForm(StartForm):
    strategy = forms.CharField(required=False, initial="")
    batch_size = forms.IntegerField(initial=64)
    config = JsonSettingsField(object_only=False)
    # a served policy to sample the round's candidates from first (its samples per problem); none: the pool
    endpoint = _id_field(required=False)
    samples = forms.IntegerField(required=False, min_value=1, initial=4)

    def clean_endpoint(self) -> Endpoint | None:
        return _endpoint(self.cleaned_data.get("endpoint"), self.campaign)


class SettingsForm(StartForm):
    """A start form whose own fields, when filled, go on top of its "More (JSON)" settings."""

    config = JsonSettingsField()

    def settings_keys(self) -> tuple[str, ...]:
        """The form's fields that are settings keys."""
        return ()

    def settings(self) -> dict[str, Any]:
        config = dict(self.cleaned_data["config"])
        for key in self.settings_keys():
            if self.cleaned_data.get(key) not in (None, ""):
                config[key] = self.cleaned_data[key]
        return config


class EndpointChoice(SettingsForm):
    """A form whose job may sample from a served endpoint (``endpoint``: its id; the service checks the user may
    use it): the endpoint, or None for a model the job loads itself."""

    endpoint = _id_field(required=False)

    def clean_endpoint(self) -> Endpoint | None:
        return _endpoint(self.cleaned_data.get("endpoint"), self.campaign)


class SamplingForm(EndpointChoice):
    n = forms.IntegerField(required=False, initial=4)
    temperature = forms.FloatField(required=False, initial=0.7)
    max_new_tokens = forms.IntegerField(required=False, initial=512)

    def settings_keys(self) -> tuple[str, ...]:
        return ("n", "temperature", "max_new_tokens")


class MachineLabelsForm(EndpointChoice):
    method = forms.ChoiceField(choices=LabelingMethod.choices, initial=LabelingMethod.MC)
    solutions = forms.IntegerField(initial=3)
    reward_model = _id_field(required=False)
    rollouts = forms.IntegerField(required=False, initial=2)
    strategy = forms.CharField(required=False, initial="binary_search")
    max_new_tokens = forms.IntegerField(required=False, initial=96)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        pk = data.get("reward_model")
        data["reward_model"] = None
        if data.get("method") == LabelingMethod.PRM and pk is not None:
            data["reward_model"] = selectors.reward_model(pk)
            if data["reward_model"] is None:
                self.add_error("reward_model", missing_reward_model(pk, self.campaign))
        return data

    def settings_keys(self) -> tuple[str, ...]:
        """Monte-Carlo reads the rollout keys; a PRM's scores read none of them."""
        return ("rollouts", "max_new_tokens", "strategy") if self.cleaned_data["method"] == LabelingMethod.MC else ()


class PoolUploadForm(StartForm):
    file = forms.FileField(error_messages={"required": "choose a JSONL file to upload"})
    name = forms.CharField(required=False)
    purpose = forms.CharField(required=False)
    split_rule = forms.CharField(required=False)

    def clean_purpose(self) -> str:
        return self.cleaned_data["purpose"] or PoolPurpose.EVALUATION

    def clean_split_rule(self) -> str:
        return self.cleaned_data["split_rule"] or "auto"
