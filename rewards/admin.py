from django.contrib import admin

from .models import ApiToken, DatasetVersion


@admin.register(DatasetVersion)
class DatasetVersionAdmin(admin.ModelAdmin):
    list_display = ["campaign", "number", "status", "created_at", "content_sha256"]
    list_filter = ["status", "campaign"]
    readonly_fields = [f.name for f in DatasetVersion._meta.fields]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["prefix", "name", "user", "scope", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["scope"]
    readonly_fields = ["prefix", "key_hash", "created_at", "last_used_at"]
