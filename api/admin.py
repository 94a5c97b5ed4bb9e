from django.contrib import admin

from .models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["prefix", "name", "user", "scope", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["scope"]
    readonly_fields = ["prefix", "key_hash", "created_at", "last_used_at"]
