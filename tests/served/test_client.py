"""The served-model client against a real llama.cpp server, with faults injected by a real proxy in front of it."""
from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from rewards.served.client import (
    ChatClient,
    ServedAuthFailed,
    ServedBadAnswer,
    ServedError,
    ServedModel,
    ServedRefused,
    ServedUnavailable,
    retry_after_s,
)
from tests.served.conftest import MODEL_ID, FaultProxy, ServedServer, free_port

LOCAL = ("127.0.0.1",)
QUESTION = [{"role": "user", "content": "What is 2 + 3? Answer with a number."}]


class Sleeps:
    """The client's ``sleep``: records each wait and really waits it."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        time.sleep(seconds)


def client_for(base_url: str, *, timeout_s: float = 60.0, key: str | None = None, retries: int = 4,
               backoff_s: float = 0.05, allow: tuple[str, ...] = LOCAL) -> tuple[ChatClient, Sleeps]:
    sleeps = Sleeps()
    served = ServedModel(base_url=base_url, model=MODEL_ID, api_key=key, timeout_s=timeout_s, allow=allow)
    return ChatClient(served, retries=retries, backoff_s=backoff_s, sleep=sleeps), sleeps


def test_chat_completion_from_the_real_server(served_server: ServedServer) -> None:
    client, sleeps = client_for(served_server.base_url)
    completion = client.chat(QUESTION, max_tokens=8, seed=1)
    assert len(completion.texts) == 1 and completion.texts[0].strip()
    assert completion.prompt_tokens > 0 and 0 < completion.completion_tokens <= 8
    assert not completion.usage_estimated
    assert sleeps.waits == []


def test_n_completions_are_n_texts(served_server: ServedServer, fault_proxy: FaultProxy) -> None:
    client, _ = client_for(fault_proxy.base_url)
    completion = client.chat(QUESTION, max_tokens=4, temperature=0.9, n=3, seed=7)
    assert len(completion.texts) == 3
    # A server that returns fewer choices than asked is asked again, each time for the rest and a fresh seed.
    assert 1 <= fault_proxy.completed <= 3
    assert completion.completion_tokens >= 3


def test_models_lists_the_served_model(served_server: ServedServer) -> None:
    client, _ = client_for(served_server.base_url)
    assert client.models() == [MODEL_ID]


def test_retry_after_is_honoured(served_server: ServedServer, fault_proxy: FaultProxy) -> None:
    client, sleeps = client_for(fault_proxy.base_url)
    fault_proxy.inject("429", 2, retry_after=1)
    completion = client.chat(QUESTION, max_tokens=4)
    assert completion.texts
    assert sleeps.waits == [1.0, 1.0]  # the server's figure, not the client's 0.05 s backoff
    assert (fault_proxy.received, fault_proxy.completed) == (3, 1)


def test_5xx_backs_off_exponentially_then_succeeds(served_server: ServedServer, fault_proxy: FaultProxy) -> None:
    client, sleeps = client_for(fault_proxy.base_url, backoff_s=0.05)
    fault_proxy.inject("503", 3)
    assert client.models() == [MODEL_ID]
    assert sleeps.waits == [0.05, 0.1, 0.2]
    assert fault_proxy.completed == 1


def test_a_timeout_then_success(served_server: ServedServer, fault_proxy: FaultProxy) -> None:
    client, sleeps = client_for(fault_proxy.base_url, timeout_s=2.0)
    fault_proxy.inject("delay", 1, delay_s=60)
    started = time.monotonic()
    assert client.models() == [MODEL_ID]
    assert time.monotonic() - started < 30  # the 60 s hold was cut at the 2 s deadline
    assert len(sleeps.waits) == 1
    # The held request was dropped when the client hung up: only the retry was answered.
    assert (fault_proxy.received, fault_proxy.completed) == (2, 1)


def test_a_cut_connection_is_retried(served_server: ServedServer, fault_proxy: FaultProxy) -> None:
    client, sleeps = client_for(fault_proxy.base_url)
    fault_proxy.inject("cut", 1)
    assert client.chat(QUESTION, max_tokens=4).texts
    assert len(sleeps.waits) == 1 and fault_proxy.completed == 1


def test_429_for_ever_ends_unavailable_after_the_retries(served_server: ServedServer,
                                                         fault_proxy: FaultProxy) -> None:
    client, sleeps = client_for(fault_proxy.base_url, retries=2)
    fault_proxy.inject("429", 10)
    with pytest.raises(ServedUnavailable, match="HTTP 429.*after 3 attempts"):
        client.chat(QUESTION, max_tokens=4)
    assert fault_proxy.received == 3 and fault_proxy.completed == 0
    assert sleeps.waits == [0.05, 0.1]


def test_a_retry_after_beyond_the_limit_stops_at_once(served_server: ServedServer, fault_proxy: FaultProxy) -> None:
    client, sleeps = client_for(fault_proxy.base_url)
    fault_proxy.inject("429", 1, retry_after=3600)
    with pytest.raises(ServedUnavailable, match="retry after 3600 s"):
        client.models()
    assert sleeps.waits == [] and fault_proxy.received == 1


def test_connection_refused_is_unavailable_after_the_retries() -> None:
    client, sleeps = client_for(f"http://127.0.0.1:{free_port()}/v1", retries=3)
    with pytest.raises(ServedUnavailable, match="refused the connection.*after 4 attempts"):
        client.models()
    assert sleeps.waits == [0.05, 0.1, 0.2]


def test_json_mode_falls_back_once_without_response_format(served_server: ServedServer,
                                                           fault_proxy: FaultProxy) -> None:
    client, sleeps = client_for(fault_proxy.base_url)
    fault_proxy.inject("400", 1)
    completion = client.chat(QUESTION, max_tokens=4, json_mode=True)
    assert completion.texts and sleeps.waits == []
    assert fault_proxy.received == 2
    assert fault_proxy.completed_matching('"response_format"') == 0 and fault_proxy.completed == 1


def test_json_mode_is_sent_to_a_server_that_takes_it(served_server: ServedServer, fault_proxy: FaultProxy) -> None:
    client, _ = client_for(fault_proxy.base_url)
    client.chat([{"role": "user", "content": 'Reply with JSON: {"answer": 5}'}], max_tokens=12, json_mode=True)
    assert fault_proxy.completed_matching('"response_format": {"type": "json_object"}') == 1


def test_an_answer_that_is_not_a_completion_is_a_bad_answer(served_server: ServedServer,
                                                            fault_proxy: FaultProxy) -> None:
    client, sleeps = client_for(fault_proxy.base_url)
    fault_proxy.inject("junk", 1)
    with pytest.raises(ServedBadAnswer, match="no choices"):
        client.chat(QUESTION, max_tokens=4)
    assert sleeps.waits == [] and fault_proxy.received == 1


def test_right_and_wrong_keys(keyed_server: ServedServer, served_api_key: str) -> None:
    right, _ = client_for(keyed_server.base_url, key=served_api_key)
    assert right.models() == [MODEL_ID]
    assert right.chat(QUESTION, max_tokens=4).texts
    wrong_key = served_api_key[::-1]
    for key in (wrong_key, None):
        wrong, sleeps = client_for(keyed_server.base_url, key=key)
        with pytest.raises(ServedAuthFailed, match=r"HTTP 40[13]") as refused:
            wrong.chat(QUESTION, max_tokens=4)
        assert sleeps.waits == []  # a wrong key is not retried
        assert served_api_key not in str(refused.value) and wrong_key not in str(refused.value)
    assert served_api_key not in repr(ServedModel(base_url=keyed_server.base_url, model=MODEL_ID,
                                                  api_key=served_api_key))


@pytest.mark.parametrize("allow", [(), ("10.0.0.0/8", "lab-gpu.internal")])
def test_a_refused_address_is_never_sent_a_request(allow: tuple[str, ...]) -> None:
    # The proxy stands for a lab server on a loopback address; its upstream does not matter: nothing reaches it.
    proxy = FaultProxy(f"http://127.0.0.1:{free_port()}/v1")
    try:
        client, sleeps = client_for(proxy.base_url, allow=allow)
        with pytest.raises(ServedRefused, match="STEPLAB_ENDPOINT_ALLOW"):
            client.chat(QUESTION, max_tokens=4)
        with pytest.raises(ServedRefused):
            client.models()
        assert proxy.connections == 0 and sleeps.waits == []
        # The same proxy, admitted, does receive: the counter is live.
        admitted, _ = client_for(proxy.base_url, retries=0)
        with pytest.raises(ServedUnavailable):
            admitted.models()
        assert proxy.connections == 1
    finally:
        proxy.close()


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/v1", "http://user:sk-secret@example.com/v1",
                                 "file:///etc/passwd", "http://[::1]:8080/v1"])
def test_refused_urls_name_no_secret(url: str) -> None:
    client, _ = client_for(url, allow=())
    with pytest.raises(ServedRefused) as refused:
        client.models()
    assert "sk-secret" not in str(refused.value)


def test_retry_after_reads_seconds_and_http_dates() -> None:
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert retry_after_s("7", now=now) == 7.0
    assert retry_after_s(format_datetime(now + timedelta(seconds=90), usegmt=True), now=now) == 90.0
    assert retry_after_s(format_datetime(now - timedelta(seconds=5), usegmt=True), now=now) == 0.0
    assert retry_after_s("soon", now=now) is None and retry_after_s(None) is None


def test_from_env_reads_the_node_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEPLAB_ENDPOINT_URL", "http://10.1.2.3:8000/v1")
    monkeypatch.setenv("STEPLAB_ENDPOINT_MODEL", "Qwen/Qwen2.5-7B-Instruct")
    monkeypatch.setenv("STEPLAB_ENDPOINT_KEY", "sk-node")
    monkeypatch.setenv("STEPLAB_ENDPOINT_TIMEOUT", "12.5")
    monkeypatch.setenv("STEPLAB_ENDPOINT_ALLOW", "10.0.0.0/8, gpu.lab ,")
    served = ServedModel.from_env()
    assert served == ServedModel(base_url="http://10.1.2.3:8000/v1", model="Qwen/Qwen2.5-7B-Instruct",
                                 api_key="sk-node", timeout_s=12.5, allow=("10.0.0.0/8", "gpu.lab"))
    assert "sk-node" not in repr(served) and "sk-node" not in str(served)
    monkeypatch.delenv("STEPLAB_ENDPOINT_MODEL")
    with pytest.raises(ServedError, match="STEPLAB_ENDPOINT_MODEL not set"):
        ServedModel.from_env()
