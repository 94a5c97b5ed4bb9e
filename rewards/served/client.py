"""A chat-completions client for any OpenAI-compatible server, Django-free (node jobs import it too).

Every request goes through ``stepcore.outbound`` with the endpoint's own allow-list: an address the policy refuses
is never connected to. Errors are short sentences safe to show and to store in ``job.error``: they never carry
the API key, the URL (a hosted API may take its key in the query) nor the server's answer.
"""
from __future__ import annotations

import email.utils
import json
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypedDict

from stepcore import outbound

#: The setting (and node environment variable) that holds the endpoints' allow-list, named in refusals.
ALLOW_SETTING = "STEPLAB_ENDPOINT_ALLOW"
MAX_COMPLETION_BYTES = 8 * 1024 * 1024
MAX_MODELS_BYTES = 1024 * 1024
MAX_BACKOFF_S = 30.0
#: A Retry-After longer than this ends the call (the job stops resumably) instead of holding a worker.
MAX_RETRY_AFTER_S = 300.0
RETRY_AFTER_STATUSES = frozenset({429, 503})


class ChatMessage(TypedDict):
    role: str
    content: str


@dataclass(frozen=True)
class ServedModel:
    """What a job is given to reach one served model; the key stays out of ``repr`` and every message."""

    base_url: str  # e.g. "http://127.0.0.1:8081/v1"
    model: str
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 60.0
    allow: tuple[str, ...] = ()  # outbound allow-list entries (host names or CIDRs) for this endpoint

    @classmethod
    def from_env(cls, prefix: str = "STEPLAB_ENDPOINT") -> ServedModel:
        """The served model a node job was given in ``<prefix>_URL``, ``_MODEL``, ``_KEY``, ``_TIMEOUT``, ``_ALLOW``."""
        env = os.environ
        missing = [f"{prefix}_{name}" for name in ("URL", "MODEL") if not env.get(f"{prefix}_{name}")]
        if missing:
            raise ServedError(f"{' and '.join(missing)} not set: the job was started without its endpoint.")
        timeout = env.get(f"{prefix}_TIMEOUT", "")
        try:
            timeout_s = float(timeout) if timeout else 60.0
        except ValueError:
            raise ServedError(f"{prefix}_TIMEOUT is not a number of seconds.") from None
        allow = outbound.allowed_from(env.get(f"{prefix}_ALLOW", "").split(","))
        return cls(base_url=env[f"{prefix}_URL"], model=env[f"{prefix}_MODEL"],
                   api_key=env.get(f"{prefix}_KEY") or None, timeout_s=timeout_s, allow=allow)

class ServedError(Exception):
    """A served-model call failed; ``str()`` is short and sanitised."""


class ServedRefused(ServedError):
    """The outbound policy refused the address: nothing was sent."""


class ServedAuthFailed(ServedError):
    """The server answered 401 or 403: the key is wrong or missing."""


class ServedUnavailable(ServedError):
    """Connection refused or reset, timeouts, 429 or 5xx, still so after the retries."""


class ServedRejected(ServedError):
    """The server refused this request (a 4xx other than 401, 403 and 429), e.g. a prompt longer than its context:
    another request may well be served."""

    def __init__(self, status: int) -> None:
        super().__init__(f"The server refused the request (HTTP {status}).")
        self.status = status


class ServedBadAnswer(ServedError):
    """A 200 whose JSON is not what the protocol says (a chat completion, a model list)."""


@dataclass(frozen=True)
class Completion:
    texts: list[str]  # one per choice (n)
    prompt_tokens: int
    completion_tokens: int
    usage_estimated: bool  # True when the server sent no ``usage`` (estimated from characters / 4)


def _estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def retry_after_s(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks for (delta-seconds or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


class ChatClient:
    """Calls one served model; retries with exponential backoff on 429, 5xx, timeouts and connection errors."""

    def __init__(self, served: ServedModel, *, retries: int = 4, backoff_s: float = 0.5,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.served = served
        self.retries = retries
        self.backoff_s = backoff_s
        self.sleep = sleep

    def _url(self, path: str) -> str:
        return f"{self.served.base_url.rstrip('/')}/{path}"

    def _headers(self, *, json_body: bool) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": "steplab-served"}
        if json_body:
            headers["Content-Type"] = "application/json"
        if self.served.api_key:
            headers["Authorization"] = f"Bearer {self.served.api_key}"
        return headers

    def _rules(self, max_answer_bytes: int) -> outbound.Rules:
        return outbound.Rules(allowed=self.served.allow, deadline_s=self.served.timeout_s,
                              max_answer_bytes=max_answer_bytes, setting=ALLOW_SETTING)

    def _wait(self, attempt: int, asked: float | None) -> None:
        if asked is not None and asked > MAX_RETRY_AFTER_S:
            raise ServedUnavailable(f"The server asks to retry after {asked:g} s, longer than "
                                    f"{MAX_RETRY_AFTER_S:g} s: try again later.")
        self.sleep(asked if asked is not None else min(MAX_BACKOFF_S, self.backoff_s * 2 ** attempt))

    def _request(self, path: str, *, payload: dict[str, Any] | None, max_answer_bytes: int,
                 fallback: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None) -> Any:
        """The JSON answer of one call, retried as the class says; ``fallback`` may rewrite the payload once
        after a 400 (a server without JSON mode)."""
        rules = self._rules(max_answer_bytes)
        last = "The server did not answer."
        attempt = 0
        while True:
            try:
                target = outbound.check_url(self._url(path), rules=rules)
            except outbound.OutboundRefused as refused:
                raise ServedRefused(str(refused)) from None
            try:
                if payload is None:
                    answer = outbound.get(target, headers=self._headers(json_body=False), rules=rules)
                else:
                    answer = outbound.post(target, body=json.dumps(payload).encode(),
                                           headers=self._headers(json_body=True), rules=rules)
            except outbound.OutboundFailed as failed:
                last, asked = str(failed), None
            else:
                if 200 <= answer.status < 300:
                    if answer.truncated:
                        raise ServedBadAnswer(f"The server's answer is larger than {max_answer_bytes} bytes.")
                    try:
                        return json.loads(answer.body)
                    except (UnicodeDecodeError, ValueError):
                        raise ServedBadAnswer("The server's answer is not JSON.") from None
                if answer.status in (401, 403):
                    raise ServedAuthFailed(f"The server refused the API key (HTTP {answer.status}).")
                if answer.status == 400 and fallback is not None and payload is not None:
                    rewritten = fallback(payload)
                    fallback = None
                    if rewritten is not None:
                        payload = rewritten
                        continue
                if answer.status != 429 and answer.status < 500:
                    raise ServedRejected(answer.status)
                last = f"The server answered HTTP {answer.status}."
                asked = (retry_after_s(answer.headers.get("retry-after"))
                         if answer.status in RETRY_AFTER_STATUSES else None)
            if attempt >= self.retries:
                raise ServedUnavailable(f"{last} (after {attempt + 1} attempts)")
            self._wait(attempt, asked)
            attempt += 1

    def chat(self, messages: list[ChatMessage], *, max_tokens: int, temperature: float = 0.0, n: int = 1,
             json_mode: bool = False, seed: int | None = None, stop: list[str] | None = None) -> Completion:
        """``n`` completions of ``messages``; a server that returns fewer choices is asked again for the rest."""
        texts: list[str] = []
        prompt_tokens = completion_tokens = 0
        estimated = False
        while len(texts) < n:
            payload: dict[str, Any] = {"model": self.served.model, "messages": list(messages),
                                       "max_tokens": max_tokens, "temperature": temperature}
            if n - len(texts) > 1:
                payload["n"] = n - len(texts)
            if seed is not None:
                payload["seed"] = seed + len(texts)  # a repeated call gets its own seed, so its own sample
            if stop:
                payload["stop"] = list(stop)
            if json_mode:
                payload["response_format"] = {"type": "json_object"}
            data = self._request("chat/completions", payload=payload, max_answer_bytes=MAX_COMPLETION_BYTES,
                                 fallback=_without_json_mode if json_mode else None)
            choices = _choices(data)
            texts.extend(choices)
            usage = data.get("usage") if isinstance(data, dict) else None
            counted = _usage(usage)
            if counted is None:
                estimated = True
                prompt_tokens += sum(_estimate_tokens(m["content"]) for m in messages)
                completion_tokens += sum(_estimate_tokens(text) for text in choices)
            else:
                prompt_tokens += counted[0]
                completion_tokens += counted[1]
        return Completion(texts=texts[:n], prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                          usage_estimated=estimated)

    def models(self) -> list[str]:
        """The model ids the server serves (``GET /models``): what "test connection" reports."""
        data = self._request("models", payload=None, max_answer_bytes=MAX_MODELS_BYTES)
        entries = data.get("data") if isinstance(data, dict) else None
        if not isinstance(entries, list):
            raise ServedBadAnswer("The server's model list has no 'data' list.")
        ids = [entry.get("id") for entry in entries if isinstance(entry, dict)]
        if not all(isinstance(model_id, str) for model_id in ids):
            raise ServedBadAnswer("The server's model list holds an entry without an 'id'.")
        return [str(model_id) for model_id in ids]


def _without_json_mode(payload: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in payload.items() if key != "response_format"}


def _choices(data: Any) -> list[str]:
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices:
        raise ServedBadAnswer("The server's answer has no choices.")
    ordered = sorted(choices, key=_choice_index)
    texts = []
    for choice in ordered:
        message = choice.get("message") if isinstance(choice, dict) else None
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, str):
            raise ServedBadAnswer("A choice in the server's answer has no text content.")
        texts.append(content)
    return texts


def _usage(usage: Any) -> tuple[int, int] | None:
    if not isinstance(usage, dict):
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if isinstance(prompt, int) and isinstance(completion, int):
        return prompt, completion
    return None


def _choice_index(choice: Any) -> int:
    index = choice.get("index") if isinstance(choice, dict) else None
    return index if isinstance(index, int) else 0
