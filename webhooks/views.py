"""The campaign's webhooks page in the admin workspace: register a receiver (its secret shown once), see the
delivery log. Staff and the campaign's admins only (``campaign_admin_required`` asks annotate.permissions)."""
from __future__ import annotations

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from annotate.models import Campaign
from annotate.views_manage import campaign_admin_required

from .models import Delivery, Event, Webhook
from .services import WebhookRefused, register_webhook

LOG_ROWS = 50


class RegisterForm(forms.Form):
    url = forms.URLField(max_length=2000, assume_scheme="https", label="Receiver URL")
    events = forms.MultipleChoiceField(choices=Event.choices, widget=forms.CheckboxSelectMultiple)


@campaign_admin_required
@require_http_methods(["GET", "POST"])
def campaign_webhooks(request: HttpRequest, campaign: Campaign) -> HttpResponse:
    form = RegisterForm(request.POST or None)
    secret = ""
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                _, secret = register_webhook(campaign=campaign, url=form.cleaned_data["url"],
                                             events=form.cleaned_data["events"], user=request.user)
                form = RegisterForm()
            except WebhookRefused as refused:
                form.add_error(refused.field, str(refused))
        if form.errors:
            status = 400
    return render(request, "webhooks/campaign.html", {
        "campaign": campaign, "form": form, "secret": secret,
        "hooks": Webhook.objects.filter(campaign=campaign),
        "deliveries": Delivery.objects.filter(webhook__campaign=campaign).select_related("webhook")[:LOG_ROWS],
    }, status=status)
