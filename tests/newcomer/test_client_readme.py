"""The client as docs/api.md shows it, against the live test server with a real API token: ``campaigns()`` lists
what the token's user is a member of, ``download(..., "data/")`` makes the folder, objects print short. And the
token stays with its server: two real local HTTP servers, one answering with a ``next`` link to the other."""
from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.core.files.storage import default_storage

from annotate.models import Membership, Role
from api.services import create_token
from rewards.services.datasets import create_dataset_version
from steplab_client import Campaign, Steplab
from tests.datasets.conftest import storage_dirs  # noqa: F401  (fixture)
from tests.factories import finished_labeling, numbered_solution


def _lab(live_server, user) -> Steplab:
    _, raw = create_token(user, name="readme", scope="read")
    return Steplab(live_server.url, raw, timeout=30)


@pytest.mark.django_db(transaction=True)
def test_the_readme_example_runs_as_written(live_server, storage_dirs, make_user,  # noqa: F811
                                            campaign_factory, tmp_path: Path, monkeypatch) -> None:
    campaign = campaign_factory("readme")
    labeler = make_user("readme-labeler")
    for ratings in ([1, 1, 0], [1, -1]):
        finished_labeling(numbered_solution(campaign, 3), labeler, ratings)
    version = create_dataset_version(campaign)
    assert version is not None
    campaign_factory("not-mine")
    researcher = make_user("readme-researcher")
    Membership.objects.create(campaign=campaign, user=researcher, role=Role.RESEARCHER)
    lab = _lab(live_server, researcher)

    campaigns = lab.campaigns()
    assert [(c.id, c.slug) for c in campaigns] == [(campaign.pk, campaign.slug)]
    assert repr(campaigns[0]) == (f"Campaign(id={campaign.pk}, slug={campaign.slug!r}, "
                                  f"name={campaign.name!r}, mode='stepwise', is_active=True)")

    listed = lab.dataset_versions(campaign=campaigns[0])
    assert [v.id for v in listed] == [version.pk]
    shown = repr(listed[-1])
    assert shown.startswith(f"DatasetVersion(id={version.pk}, campaign={campaign.pk}, number=1, ")
    assert "prm800k" in shown and len(shown) < 200, shown

    # "data/" as the README writes it: a folder that does not exist yet, relative to where the script runs.
    monkeypatch.chdir(tmp_path)
    path = lab.download(listed[-1], "prm800k", "data/")
    assert path.parent == Path("data") and (tmp_path / "data").is_dir()
    assert path.read_bytes() == default_storage.open(version.files["prm800k"]["name"]).read()
    # A path that does not end with a slash is the file's own name; its folder is made too.
    named = lab.download(listed[-1], "outcome", "out/outcome.jsonl")
    assert named == Path("out/outcome.jsonl") and named.read_bytes() == default_storage.open(
        version.files["outcome"]["name"]).read()
    assert repr(lab) == f"Steplab({live_server.url!r})"


class _Recorder(BaseHTTPRequestHandler):
    """Answers every GET with the JSON body the test set for its path and records the Authorization header."""

    def do_GET(self) -> None:  # noqa: N802  (http.server's name)
        server = self.server
        server.seen.append((self.path, self.headers.get("Authorization")))
        body = json.dumps(server.pages.get(self.path.split("?")[0], {"results": [], "next": None})).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def two_servers() -> Iterator[tuple[ThreadingHTTPServer, ThreadingHTTPServer]]:
    servers = []
    for _ in range(2):
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
        server.seen, server.pages = [], {}
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    yield servers[0], servers[1]
    for server in servers:
        server.shutdown()
        server.server_close()


def _row(pk: int) -> dict:
    return {"id": pk, "slug": f"c{pk}", "name": f"C {pk}", "mode": "stepwise", "is_active": True}


def test_the_token_never_follows_a_next_link_to_another_server(two_servers) -> None:
    home, elsewhere = two_servers
    home_url = f"http://127.0.0.1:{home.server_port}"
    other_url = f"http://127.0.0.1:{elsewhere.server_port}"
    # Page 2 on the same server keeps the token; its next link points at another port, and the one after that
    # at another host name for the same machine.
    home.pages["/api/campaigns/"] = {"results": [_row(1)], "next": f"{home_url}/api/campaigns/p2/"}
    home.pages["/api/campaigns/p2/"] = {"results": [_row(2)], "next": f"{other_url}/api/campaigns/p3/"}
    elsewhere.pages["/api/campaigns/p3/"] = {"results": [_row(3)],
                                             "next": f"http://localhost:{home.server_port}/api/campaigns/p4/"}
    home.pages["/api/campaigns/p4/"] = {"results": [_row(4)], "next": None}

    lab = Steplab(home_url + "/", "stp_secret", timeout=10)
    assert [c.id for c in lab.campaigns()] == [1, 2, 3, 4]
    assert home.seen[:2] == [("/api/campaigns/", "Bearer stp_secret"), ("/api/campaigns/p2/", "Bearer stp_secret")]
    assert elsewhere.seen == [("/api/campaigns/p3/", None)]
    assert home.seen[2] == ("/api/campaigns/p4/", None)  # "localhost" is another host name than 127.0.0.1
    assert all(isinstance(c, Campaign) for c in lab.campaigns())
