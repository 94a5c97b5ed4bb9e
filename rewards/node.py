"""What the GPU-node packages (``rewards.training``, ``rewards.sampling``, ``rewards.evaluation``) share.

Plain Python only (pydantic at most): a node imports this without Django, like the packages themselves
(``tests/foundation/test_layering.py``). Each package keeps its own error class, so a message still says which
file was wrong; what they share is how a job file is read and refused, how a JSONL file is walked, and how a
command line reports a failure.
"""
from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import os
import sys
import traceback
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar, get_args

from pydantic import ValidationError
from pydantic_core import ErrorDetails


class ConfigError(ValueError):
    """A configuration problem: the message names the offending key, ``key`` holds it (``lora.r``), or None
    for the file as a whole."""

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


E = TypeVar("E", bound=ConfigError)


def read_job_file(path: Path, error: type[ConfigError]) -> Any:
    """The decoded JSON of a job file; a missing or unreadable one is ``error`` naming the file."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"config file {str(path)!r} does not exist") from None
    except json.JSONDecodeError as exc:
        raise error(f"config file {str(path)!r} is not valid JSON: {exc}") from None


def first_refusal(exc: ValidationError) -> ErrorDetails:
    """One refusal, the most basic first: a misspelt key explains the "missing" one that follows from it."""
    rank = {"unexpected_keyword_argument": 0, "missing": 1}
    return min(exc.errors(), key=lambda error: rank.get(error["type"], 2))


def init_keys(schema: type) -> tuple[str, ...]:
    """The keys a job file may hold at this level (computed fields such as ``base_model_path`` are not keys)."""
    return tuple(f.name for f in dataclasses.fields(schema) if f.init)


def key_refusal(error: ErrorDetails, error_class: type[E], *, schema: type, name: str, key: str) -> E | None:
    """The schema's refusals that every job file words alike: an unknown key (with the closest known one), a
    missing one, a value outside its choices, a non-boolean; None for the others, which each module words."""
    kind, value = error["type"], error["input"]
    if kind == "unexpected_keyword_argument":
        known = init_keys(schema)
        prefix = key[: -len(name)]
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"; did you mean '{prefix}{close[0]}'?" if close else f"; known keys: {', '.join(known)}"
        return error_class(f"config key '{key}' is unknown{hint}", key=key)
    if kind == "missing":
        return error_class(f"config key '{key}' is required", key=key)
    if kind == "literal_error":
        choices = ", ".join(get_args(schema.__pydantic_fields__[name].annotation))  # type: ignore[attr-defined]
        return error_class(f"config key '{key}' must be one of {choices}, got {value!r}", key=key)
    if kind == "bool_type":
        return error_class(f"config key '{key}' must be true or false, got {value!r}", key=key)
    return None


def number_field(schema: type, name: str) -> tuple[Any, dict[str, Any]]:
    """(int or float, the key's bounds by name: Ge, Le, …); an optional key keeps both inside its union."""
    declared = schema.__pydantic_fields__[name]  # type: ignore[attr-defined]
    base, metadata = declared.annotation, list(declared.metadata)
    for member in get_args(declared.annotation):  # Annotated[int, …] | None
        if member is not type(None):
            base, *extras = get_args(member) or (member,)
            metadata += [item for extra in extras for item in getattr(extra, "metadata", [extra])]
    return base, {type(item).__name__: item for item in metadata}


class JsonLineError(ValueError):
    """A line of a JSONL file that is not JSON: ``number`` (1-based) and the decoder's ``error``."""

    def __init__(self, number: int, error: json.JSONDecodeError) -> None:
        super().__init__(f"line {number}: {error}")
        self.number = number
        self.error = error


def json_lines(lines: Iterable[str]) -> Iterator[tuple[int, Any]]:
    """(line number, decoded value) of every non-blank line; a line that is not JSON raises ``JsonLineError``,
    which each reader words for its own file."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise JsonLineError(number, exc) from None
        yield number, value


def command_parser(prog: str, description: str | None, commands: Mapping[str, str], *, job_file: Collection[str] = (),
                   ) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """A node's command line for ``run_cli``: one subcommand per ``commands`` entry (name: help), its name in
    ``command``; those named in ``job_file`` read ``--config JOB.json``, the others' arguments are the caller's to
    add (the subcommands' parsers, by name)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    subcommands = parser.add_subparsers(dest="command", required=True)
    parsers = {name: subcommands.add_parser(name, help=about) for name, about in commands.items()}
    for name in job_file:
        parsers[name].add_argument("--config", required=True, type=Path, help="job JSON file")
    return parser, parsers


def run_cli(parser: argparse.ArgumentParser, commands: Mapping[str, Callable[[argparse.Namespace], None]],
            argv: list[str] | None, *, usage_errors: tuple[type[Exception], ...]) -> int:
    """Run a node's command line (``parser`` names the command in ``command``) and return its exit status: 0 on
    success, 2 for ``usage_errors`` (a bad config or input file: the message is enough), 1 for any other failure
    (the traceback, then the message). Either way the last line on stderr is ``error: ...``, which the job
    runner shows. A node is offline and keeps tokenizers single-threaded unless its environment says otherwise."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = parser.parse_args(argv)
    try:
        commands[args.command](args)
    except usage_errors as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - the CLI reports every failure the same way
        traceback.print_exc()
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
