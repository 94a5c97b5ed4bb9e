"""The datasets API's serializers: dataset versions with their files, and the campaign filter of the list."""
from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from annotate.api.serializers import RelatedId
from rewards.models import DatasetVersion
from steplab.jsonlimits import MAX_ID


class DatasetFileSerializer(serializers.Serializer):
    format = serializers.CharField()
    name = serializers.CharField()
    sha256 = serializers.CharField()
    bytes = serializers.IntegerField()
    rows = serializers.IntegerField()
    url = serializers.CharField()


class DatasetVersionSerializer(serializers.ModelSerializer):
    campaign_slug = serializers.CharField(source="campaign.slug", read_only=True)
    campaign = RelatedId("campaign_id")
    files = serializers.SerializerMethodField()

    class Meta:
        model = DatasetVersion
        fields = ["id", "campaign", "campaign_slug", "number", "status", "created_at", "spec", "counts",
                  "content_sha256", "code_version", "folder", "files"]

    @extend_schema_field(DatasetFileSerializer(many=True))
    def get_files(self, version: DatasetVersion) -> list[dict[str, Any]]:
        return [{"format": fmt, "url": f"/api/datasets/{version.pk}/files/{fmt}/", **info}
                for fmt, info in sorted(version.files.items())]


class CampaignFilterSerializer(serializers.Serializer):
    campaign = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID, help_text="campaign id",
                                        error_messages={"invalid": "must be a campaign id (an integer)",
                                                        "max_string_length": "must be a campaign id (an integer)",
                                                        "min_value": "must be a campaign id (an integer >= 1)",
                                                        "max_value": "must be a campaign id (too large)"})
