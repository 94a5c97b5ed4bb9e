"""Streaming downloads of dataset files from storage: HTTP ranges, SHA-256 headers, constant memory."""
from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

from django.core.files.storage import default_storage

from rewards.models import DatasetVersion

CHUNK = 256 * 1024
RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
CONTENT_TYPES = {".jsonl": "application/x-ndjson", ".parquet": "application/vnd.apache.parquet",
                 ".md": "text/markdown; charset=utf-8"}


class RangeNotSatisfiable(Exception):
    def __init__(self, message: str, size: int) -> None:
        super().__init__(message)
        self.size = size


@dataclass
class Download:
    status: int
    content_type: str
    headers: dict[str, str]
    chunks: Iterator[bytes]


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """(first, last) inclusive for one ``bytes=`` range; None = whole file (absent or multi-range header)."""
    if not header:
        return None
    header = header.strip()
    if "," in header:
        return None  # RFC 9110 lets a server ignore a multi-range request and send the whole file
    match = RANGE.match(header)
    if match is None or match.group(1) == match.group(2) == "":
        raise RangeNotSatisfiable(f"Range header {header!r}: expected bytes=START-END", size)
    start, end = match.group(1), match.group(2)
    if start == "":
        length = int(end)
        if length == 0:
            raise RangeNotSatisfiable("Range header: a suffix range of 0 bytes is empty", size)
        return max(size - length, 0), size - 1
    first = int(start)
    last = min(int(end), size - 1) if end else size - 1
    if first >= size or first > last:
        raise RangeNotSatisfiable(f"Range header {header!r}: outside the file's {size} bytes", size)
    return first, last


def read_file(name: str, first: int, length: int) -> Iterator[bytes]:
    """``length`` bytes of a stored file from ``first``, in chunks, in constant memory.

    django-storages' S3 file buffers the whole object in memory on its first read (even to seek), so an S3
    object is read with one ranged GET streamed from the response instead."""
    with default_storage.open(name, "rb") as handle:
        s3_object = getattr(handle, "obj", None)  # storages.backends.s3.S3File: boto3's Object for the key
        if s3_object is not None:
            if length > 0:
                body = s3_object.get(Range=f"bytes={first}-{first + length - 1}")["Body"]
                try:
                    yield from body.iter_chunks(CHUNK)
                finally:
                    body.close()
            return
        handle.seek(first)
        left = length
        while left > 0:
            data = handle.read(min(CHUNK, left))
            if not data:
                return
            left -= len(data)
            yield data


def open_download(version: DatasetVersion, fmt: str, range_header: str | None) -> Download:
    info = version.files[fmt]
    name = version.file_name(fmt)
    size = int(info["bytes"])
    span = parse_range(range_header, size)
    filename = f"{version.campaign.slug}-v{version.number}-{PurePosixPath(name).name}"
    headers = {
        "Accept-Ranges": "bytes",
        "X-Content-SHA256": info["sha256"],
        "Repr-Digest": f"sha-256=:{base64.b64encode(bytes.fromhex(info['sha256'])).decode()}:",
        "ETag": f'"{info["sha256"]}"',
        "Content-Disposition": f'attachment; filename="{filename}"',
    }
    content_type = CONTENT_TYPES.get(PurePosixPath(name).suffix, "application/octet-stream")
    if span is None:
        headers["Content-Length"] = str(size)
        return Download(200, content_type, headers, read_file(name, 0, size))
    first, last = span
    headers["Content-Length"] = str(last - first + 1)
    headers["Content-Range"] = f"bytes {first}-{last}/{size}"
    return Download(206, content_type, headers, read_file(name, first, last - first + 1))
