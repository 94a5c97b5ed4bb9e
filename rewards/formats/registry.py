"""The format registry: one ``Format`` declaration per dataset format, read by everything that handles formats alike.

Readers: ``rewards.exports`` (a format's rows and its Parquet schema: ``export_campaign``, ``write_rows``), dataset
versions (``rewards.services.datasets``: the files each format adds to a version), training
(``rewards.jobs.services.training``: the files a PRM or an ORM trains on) and the ``export_dataset`` command (its
``--format`` choices and the options a format reads). Adding a format is one module in this package that calls
``register``; none of the readers changes.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import import_module
from pkgutil import iter_modules
from typing import TYPE_CHECKING, Any

from rewards import formats as formats_package

if TYPE_CHECKING:
    from annotate.models import Campaign

#: a format's rows: (campaign, options, figures for the dataset card, its extra options) → rows; a ValueError
#: names an option the format cannot honour
Rows = Callable[..., Iterator[dict[str, Any]]]


@dataclass(frozen=True)
class VersionFile:
    """One file a format adds to a dataset version: its key in ``DatasetVersion.files`` and its file name (a
    ``.parquet`` name is written with the format's Parquet schema)."""

    key: str
    name: str


@dataclass(frozen=True)
class Format:
    name: str
    #: ``rows(campaign, options, figures=dict | None, **extra)``: the rows, streamed; ``figures``, when given, is
    #: a dict the format may fill with counts for the dataset card (read once the rows are consumed)
    rows: Rows
    help: str = ""
    #: its Parquet schema (``pyarrow.Schema``); None: JSONL only, and ``no_parquet`` says why
    parquet_schema: Callable[[], Any] | None = None
    no_parquet: str = "use .jsonl"
    #: its files in a dataset version; () = not in versions
    files: tuple[VersionFile, ...] = ()
    #: whether a campaign's version has it (e.g. consensus: only with machine labels)
    in_version: Callable[[Campaign], bool] = lambda campaign: True
    #: the reward-model kind (``prm``/``orm``) that trains on its version files, if any
    trains: str = ""
    #: extra options of the command it reads (``--sources``), passed as keywords to ``rows``
    options: tuple[str, ...] = ()

    def schema(self) -> Any:
        if self.parquet_schema is None:
            raise ValueError(f"format {self.name!r} has no Parquet form ({self.no_parquet})")
        return self.parquet_schema()


_FORMATS: dict[str, Format] = {}
_loaded = False


def register(fmt: Format) -> Format:
    if fmt.name in _FORMATS:
        raise ValueError(f"format {fmt.name!r} is registered already")
    _FORMATS[fmt.name] = fmt
    return fmt


def unregister(name: str) -> None:
    """Remove a format (a test's own, once it is done)."""
    _FORMATS.pop(name, None)


def load() -> None:
    """Import every module of this package once (each registers its format); not at the package's import, since
    the formats import the exporter, which reads this registry."""
    global _loaded
    if not _loaded:
        _loaded = True
        for module in iter_modules(formats_package.__path__):
            if module.name not in ("registry", "labels"):
                import_module(f"{formats_package.__name__}.{module.name}")


def formats() -> list[Format]:
    load()
    return list(_FORMATS.values())


def get(name: str) -> Format:
    """The format of that name; ValueError listing the known ones otherwise."""
    load()
    try:
        return _FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown format {name!r}; expected one of {', '.join(_FORMATS)}") from None


def version_files() -> list[tuple[str, Format, VersionFile]]:
    """Every file a dataset version may hold: (key, its format, the file), in registration order."""
    return [(file.key, fmt, file) for fmt in formats() for file in fmt.files]
