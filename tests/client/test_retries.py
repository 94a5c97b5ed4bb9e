"""The client's retries (urllib3's ``Retry`` on its session) against a real HTTP server that loses answers: the
server applies a request, then drops the connection without answering, as a proxy or a restart does."""
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from steplab_client import Steplab
from tests.local_http import QuietHandler, serve


class LossyServer:
    """Answers ``answers[path]`` (status, JSON) in turn; ``None`` drops the connection after reading the request."""

    def __init__(self, answers: dict[str, list[tuple[int, Any] | None]]) -> None:
        self.seen: list[tuple[str, str, Any]] = []
        outer = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                outer.seen.append((self.command, self.path, body))
                turn = answers[self.path].pop(0)
                if turn is None:
                    self.close_connection = True  # the request was read and applied; its answer is lost
                    return
                status, payload = turn
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer  # noqa: N815  (http.server's names)

        self.server, self.url = serve(Handler)


@pytest.fixture
def lossy() -> Iterator[type[LossyServer]]:
    servers: list[LossyServer] = []

    def start(answers: dict[str, list[tuple[int, Any] | None]]) -> LossyServer:
        servers.append(LossyServer(answers))
        return servers[-1]

    yield start  # type: ignore[misc]  # the fixture hands out the factory
    for server in servers:
        server.server.shutdown()
        server.server.server_close()


def test_a_labeling_whose_answer_was_lost_is_sent_again_with_the_same_client_key(lossy) -> None:
    server = lossy({"/api/assignments/7/labeling/": [None, (200, {"status": "submitted"})]})
    answer = Steplab(server.url, "stp_x", timeout=5).submit_labels(7, [1, 0, -1])
    assert answer == {"status": "submitted"}
    sent = [body for method, path, body in server.seen]
    assert len(sent) == 2 and sent[0] == sent[1] and sent[0]["client_key"]  # the server applies it once


def test_a_post_that_would_act_twice_is_not_sent_again(lossy) -> None:
    server = lossy({"/api/jobs/": [None, (201, {"id": 2})]})
    with pytest.raises(requests.ConnectionError):
        Steplab(server.url, "stp_x", timeout=5).start_training(kind="prm", dataset_version=1)
    assert [(method, path) for method, path, _ in server.seen] == [("POST", "/api/jobs/")]


def test_a_read_is_tried_again_after_a_lost_answer_and_a_503(lossy) -> None:
    server = lossy({"/api/jobs/5/": [None, (503, {"detail": "restarting"}), (200, {"id": 5, "status": "running"})]})
    assert Steplab(server.url, "stp_x", timeout=5).job(5) == {"id": 5, "status": "running"}
    assert [method for method, _, _ in server.seen] == ["GET", "GET", "GET"]


def test_retries_run_out_into_the_servers_refusal(lossy) -> None:
    server = lossy({"/api/jobs/5/": [(503, {"detail": "down"})] * 3})
    with pytest.raises(Exception, match="HTTP 503: down"):
        Steplab(server.url, "stp_x", timeout=5).job(5)
    assert len(server.seen) == 3  # the first try and two more
