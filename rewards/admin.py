from django.contrib import admin

from .models import DatasetVersion


@admin.register(DatasetVersion)
class DatasetVersionAdmin(admin.ModelAdmin):
    list_display = ["campaign", "number", "status", "created_at", "content_sha256"]
    list_filter = ["status", "campaign"]
    readonly_fields = [f.name for f in DatasetVersion._meta.fields]
