"""Tokens (hashed, prefixed, scoped, revocable, last-used), downloads with ranges, filters, write endpoints."""
from __future__ import annotations

import hashlib
import json
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from annotate.models import Assignment, Membership, Rating, Role, Solution
from api.models import ApiToken, hash_token

from .conftest import token_client

pytestmark = pytest.mark.django_db


def test_token_is_stored_hashed_with_a_visible_prefix_and_tracks_last_use(people) -> None:
    client, raw = token_client(people["researcher"])
    token = ApiToken.objects.get()
    assert raw.startswith("stp_") and token.prefix == raw[:12] and token.key_hash == hash_token(raw)
    assert raw not in json.dumps(list(ApiToken.objects.values()), default=str)
    assert token.last_used_at is None
    assert client.get("/api/campaigns/").status_code == 200
    token.refresh_from_db()
    assert token.last_used_at is not None


def test_read_scope_cannot_write_and_revoked_tokens_stop_working(people, math500_campaign) -> None:
    reader, _ = token_client(people["owner"], "read")
    response = reader.post(f"/api/campaigns/{math500_campaign.pk}/lease/")
    assert response.status_code == 403 and "read-only" in response.json()["detail"]
    writer, _ = token_client(people["owner"], "write")
    assert writer.post(f"/api/campaigns/{math500_campaign.pk}/lease/").status_code == 200
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION="Bearer stp_not-a-real-token")
    assert bad.get("/api/campaigns/").status_code == 401


def test_profile_page_creates_shows_once_and_revokes(people) -> None:
    client = APIClient()
    client.force_login(people["researcher"])
    page = client.post("/api/tokens/", {"name": "training script", "scope": "read"})
    html = page.content.decode()
    token = ApiToken.objects.get()
    raw = html.split('data-new-token="')[1].split('"')[0]
    assert hash_token(raw) == token.key_hash
    assert raw not in client.get("/api/tokens/").content.decode(), "the raw token is shown only once"
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert api.get("/api/campaigns/").status_code == 200
    assert client.post("/api/tokens/", {"name": "", "scope": "read"}).status_code == 400
    assert "scope: must be one of" in client.post("/api/tokens/", {"name": "x", "scope": "admin"}).content.decode()
    intruder = APIClient()
    intruder.force_login(people["outsider"])
    assert intruder.post(f"/api/tokens/{token.pk}/revoke/").status_code == 404
    assert api.get("/api/campaigns/").status_code == 200, "nobody else can revoke my token"
    client.post(f"/api/tokens/{token.pk}/revoke/")
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert api.get("/api/campaigns/").status_code == 401
    assert 'data-token-active="false"' in client.get("/api/tokens/").content.decode()


def test_download_streams_whole_file_and_ranges_with_sha256(people, version, storage_dirs) -> None:
    client, _ = token_client(people["researcher"])
    url = f"/api/datasets/{version.pk}/files/trl-stepwise-parquet/"
    data = (storage_dirs["media"] / version.file_name("trl-stepwise-parquet")).read_bytes()
    whole = client.get(url)
    assert whole.status_code == 200 and whole.streaming
    body = b"".join(whole.streaming_content)
    assert body == data and whole["X-Content-SHA256"] == hashlib.sha256(data).hexdigest()
    assert whole["Accept-Ranges"] == "bytes" and int(whole["Content-Length"]) == len(data)
    part = client.get(url, HTTP_RANGE="bytes=10-99")
    assert part.status_code == 206 and b"".join(part.streaming_content) == data[10:100]
    assert part["Content-Range"] == f"bytes 10-99/{len(data)}"
    tail = client.get(url, HTTP_RANGE="bytes=-16")
    assert b"".join(tail.streaming_content) == data[-16:]
    beyond = client.get(url, HTTP_RANGE=f"bytes={len(data)}-")
    assert beyond.status_code == 416 and beyond["Content-Range"] == f"bytes */{len(data)}"
    assert client.get(url, HTTP_RANGE="pages=1-2").status_code == 416
    assert client.get(f"/api/datasets/{version.pk}/files/nope/").status_code == 404


def test_pagination_and_filters(people, math500_campaign) -> None:
    client, _ = token_client(people["researcher"])
    first = client.get(f"/api/solutions/?campaign={math500_campaign.pk}&limit=10").json()
    assert first["count"] == 24 and len(first["results"]) == 10 and first["next"]
    second = client.get(first["next"]).json()
    ids = [r["id"] for r in first["results"] + second["results"]]
    assert ids == sorted(ids) and len(set(ids)) == 20, "stable id order across pages"
    assert first["results"][0]["steps"][0]["completions"][0]["text"]
    gen2 = client.get("/api/solutions/?generation=2").json()
    assert gen2["count"] == 12 and all(r["generation"] == 2 for r in gen2["results"])
    labels = client.get("/api/labels/?generation=2&limit=1").json()
    assert labels["count"] == 12 and labels["results"][0]["ratings"][-1]["rating"] == -1
    cutoff = timezone.now() + timedelta(seconds=1)
    assert client.get("/api/labels/", {"updated_since": cutoff.isoformat()}).json()["count"] == 0
    edited = Assignment.objects.order_by("pk").first()
    before = timezone.now().isoformat()  # taken after every other labeling was written, so only the edit is newer
    edited.save()
    assert client.get("/api/labels/", {"updated_since": before}).json()["count"] == 1


def test_labeling_through_the_api_uses_the_labeling_rules(people, math500_campaign, shared_data, tmp_path) -> None:
    owner, _ = token_client(people["owner"], "write")
    rows = [{"problem_id": s.problem.source_id, "steps": ["First step.", "Second step.", "The answer is $\\boxed{3}$."],
             "answer": "3", "generation": 7} for s in math500_campaign.solutions.select_related("problem")[:2]]
    upload = tmp_path / "new.jsonl"
    upload.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"steps": []}\n')
    with upload.open("rb") as handle:
        refused = owner.post(f"/api/campaigns/{math500_campaign.pk}/import-solutions/", {"file": handle},
                             format="multipart")
    assert refused.status_code == 400 and refused.json()["rejected"][0]["line"] == 3
    assert refused.json()["rejected"][0]["field"] == "problem_id"
    assert not Solution.objects.filter(generation=7).exists()
    with upload.open("rb") as handle:
        done = owner.post(f"/api/campaigns/{math500_campaign.pk}/import-solutions/",
                          {"file": handle, "skip_invalid": "true"}, format="multipart")
    assert done.status_code == 201 and done.json()["created"]["solutions"] == 2
    researcher, _ = token_client(people["researcher"], "write")
    with upload.open("rb") as handle:
        assert researcher.post(f"/api/campaigns/{math500_campaign.pk}/import-solutions/", {"file": handle},
                               format="multipart").status_code == 403

    labeler, _ = token_client(people["labeler"], "write")
    lease = labeler.post(f"/api/campaigns/{math500_campaign.pk}/lease/").json()
    assignment = lease["assignment"]
    assert assignment and len(assignment["steps"]) == 3
    base = f"/api/assignments/{assignment['id']}"
    out_of_order = labeler.post(f"{base}/rate/", {"step_index": 1, "rating": 1}, format="json")
    assert out_of_order.status_code == 400 and "Rate step 1 first" in out_of_order.json()["detail"]
    assert labeler.post(f"{base}/rate/", {"step_index": 0, "rating": 7}, format="json").json().keys() == {"rating"}
    for index in range(3):
        assert labeler.post(f"{base}/rate/", {"step_index": index, "rating": 1}, format="json").status_code == 200
    assert labeler.post(f"{base}/flag/", {"step_index": 1, "flagged": True}, format="json").status_code == 200
    finished = labeler.post(f"{base}/finish/", {"reason": "solution"}, format="json")
    assert finished.status_code == 200 and finished.json()["status"] == "submitted"
    assert Rating.objects.filter(assignment_id=assignment["id"], rating=1).count() == 3
    again = labeler.post(f"{base}/rate/", {"step_index": 0, "rating": -1}, format="json")
    assert again.status_code == 400 and "already finished" in again.json()["detail"]
    other, _ = token_client(people["owner"], "write")
    assert other.post(f"{base}/rate/", {"step_index": 0, "rating": 1}, format="json").status_code == 404
    outsider, _ = token_client(people["outsider"], "write")
    assert outsider.post(f"/api/campaigns/{math500_campaign.pk}/lease/").status_code == 404
    Membership.objects.filter(user=people["researcher"]).update(role=Role.RESEARCHER)
    assert researcher.post(f"/api/campaigns/{math500_campaign.pk}/lease/").status_code == 403
