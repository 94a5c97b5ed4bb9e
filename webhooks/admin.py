"""Webhooks in the Django admin: register one (its secret shown once), see every delivery and its attempts."""
from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest

from .models import Delivery, Event, Webhook
from .services import WebhookRefused, check_receiver_url, register_webhook


class WebhookForm(forms.ModelForm):
    url = forms.URLField(max_length=2000, assume_scheme="https")
    events = forms.MultipleChoiceField(choices=Event.choices, widget=forms.CheckboxSelectMultiple)

    class Meta:
        model = Webhook
        fields = ["campaign", "url", "events", "is_active"]

    def clean_url(self) -> str:
        url: str = self.cleaned_data["url"]
        try:
            check_receiver_url(url)
        except WebhookRefused as refused:
            raise forms.ValidationError(str(refused)) from None
        return url


LOG_COLUMNS = ("created_at", "event", "status", "attempts", "last_status_code", "last_error")


class DeliveryInline(admin.TabularInline):
    model = Delivery
    fields = LOG_COLUMNS
    readonly_fields = LOG_COLUMNS
    extra = 0
    max_num = 0
    show_change_link = True
    ordering = ["-created_at"]


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    form = WebhookForm
    list_display = ["url", "campaign", "events", "is_active", "disabled_reason", "created_at"]
    list_filter = ["is_active", "campaign"]
    readonly_fields = ["disabled_reason"]
    inlines = [DeliveryInline]

    def save_model(self, request: HttpRequest, obj: Webhook, form: Any, change: bool) -> None:
        if change:
            if obj.is_active:
                obj.disabled_reason = ""  # turned on again with a URL the form checked
            super().save_model(request, obj, form, change)
            return
        hook, secret = register_webhook(campaign=obj.campaign, url=obj.url, events=obj.events, user=request.user)
        obj.pk, obj.secret, obj.created_at = hook.pk, hook.secret, hook.created_at
        obj._state.adding = False
        messages.warning(request, f"Signing secret of this webhook (shown only now, copy it): {secret}")


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ["created_at", "event", "webhook", "status", "attempts", "last_status_code"]
    list_filter = ["status", "event"]
    readonly_fields = ["webhook", "event", "payload", "status", "attempts", "last_status_code", "last_error",
                       "attempts_log", "created_at", "delivered_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
