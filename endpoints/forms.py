"""The register form of the endpoints page; the key field never renders its value back."""
from __future__ import annotations

from django import forms

from .services import MAX_CONCURRENCY, MAX_TIMEOUT_S, MAX_TOKEN_BUDGET


class RegisterForm(forms.Form):
    name = forms.CharField(max_length=100)
    base_url = forms.CharField(max_length=2000, label="Base URL", help_text='e.g. "http://gpu-7:8000/v1"')
    model = forms.CharField(max_length=200, help_text="the model name the server serves")
    api_key = forms.CharField(max_length=1000, required=False, label="API key", strip=True,
                              widget=forms.PasswordInput(render_value=False), help_text="stored encrypted")
    max_concurrency = forms.IntegerField(min_value=1, max_value=MAX_CONCURRENCY, initial=4)
    timeout_s = forms.FloatField(min_value=0.1, max_value=MAX_TIMEOUT_S, initial=60.0, label="Timeout (s)")
    token_budget = forms.IntegerField(min_value=1, max_value=MAX_TOKEN_BUDGET, initial=200_000,
                                      label="Token budget per job")


class ActionForm(forms.Form):
    action = forms.ChoiceField(choices=[("test", "Test connection"), ("delete", "Remove")])
    endpoint = forms.IntegerField(min_value=1)
