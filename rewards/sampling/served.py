"""Sampling from a served model: any OpenAI-compatible chat-completions server (vLLM, SGLang, llama.cpp's server,
Ollama, TGI, a hosted API), through ``rewards.served.client``.

The endpoint comes from the job's environment (``STEPLAB_ENDPOINT_URL``, ``_MODEL``, ``_KEY``, …: the web side
puts them there, never in the job folder), so nothing here sees where a key came from. The client retries 429s
(honouring ``Retry-After``), 5xx answers, timeouts and dropped connections; what still fails stops the job with a
short sanitised reason, every finished row kept.

A chat server cannot be told to go on writing an unfinished answer of its own (only some, vLLM among them, offer
that as an extension), so a rollout is asked for in plain chat: the problem's prompt, the solution's first steps as
the assistant's turn, and a request to continue from the next step without repeating them.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .config import ModelSettings
from .sampler import RawSample, SamplingStopped

if TYPE_CHECKING:
    from rewards.served.client import ChatMessage, ServedModel

CONTINUE = ("Continue the solution above from the next step. Do not repeat the steps already written; write one "
            "step per line, then a line '# Answer' and the final answer alone on the next line.")


def chat_messages(prompt: str, prefix: str = "") -> list[ChatMessage]:
    """The conversation for one request: the prompt alone, or with a rollout's prefix and the request to go on."""
    messages: list[ChatMessage] = [{"role": "user", "content": prompt}]
    if prefix.strip():
        messages += [{"role": "assistant", "content": prefix.strip()}, {"role": "user", "content": CONTINUE}]
    return messages


class ServedSampler:
    """``n`` completions per prompt from the endpoint (the client asks again for the rest when a server returns
    fewer choices than asked, as llama.cpp's does)."""

    def __init__(self, config: ModelSettings, served: ServedModel | None = None) -> None:
        from rewards.served.client import ChatClient, ServedModel

        self.config = config
        self.client = ChatClient(served or ServedModel.from_env())

    def sample(self, prompt: str, n: int, seed: int, *, prefix: str = "") -> list[RawSample]:
        from rewards.served.client import ServedError

        try:
            completion = self.client.chat(chat_messages(prompt, prefix), max_tokens=self.config.max_new_tokens,
                                          temperature=self.config.temperature, n=n, seed=seed)
        except ServedError as exc:
            raise SamplingStopped(f"the served model did not answer: {exc}") from None
        # usage is per request: each text gets an even share of the completion tokens (no per-choice count), and
        # the prompt's count, which ``spent_tokens`` counts once per request
        share, extra = divmod(completion.completion_tokens, max(len(completion.texts), 1))
        return [RawSample(text=text, finish_reason="unknown", prompt_tokens=completion.prompt_tokens,
                          completion_tokens=share + (index < extra))
                for index, text in enumerate(completion.texts)]
