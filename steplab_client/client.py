"""The client: datasets (list, download with SHA-256 check, load as ``datasets.Dataset``), labeling (lease,
whole-solution submit), jobs (start, wait). It talks only HTTP: no Django, no settings."""
from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import requests

if TYPE_CHECKING:
    import datasets

FINAL_JOB_STATUSES = frozenset({"succeeded", "failed", "cancelled"})
CHUNK = 1 << 20


class SteplabError(Exception):
    """The server refused a request: its status, and its ``detail`` / ``field`` when it named them."""

    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.body = body
        self.detail = body.get("detail", "") if isinstance(body, dict) else str(body)[:500]
        self.field = body.get("field") if isinstance(body, dict) else None
        super().__init__(f"HTTP {status}: {body if not self.detail else self.detail}"
                         + (f" (field {self.field})" if self.field else ""))


class ChecksumMismatch(Exception):
    """A downloaded file's SHA-256 is not the one the version records: the file is removed, not kept."""


@dataclass(frozen=True)
class DatasetFile:
    format: str
    name: str
    sha256: str
    bytes: int
    rows: int
    url: str


@dataclass(frozen=True)
class DatasetVersion:
    id: int
    campaign: int
    number: int
    content_sha256: str
    files: dict[str, DatasetFile]
    raw: dict[str, Any]

    @classmethod
    def from_api(cls, row: dict[str, Any]) -> DatasetVersion:
        files = {f["format"]: DatasetFile(**{k: f[k] for k in DatasetFile.__dataclass_fields__}) for f in row["files"]}
        return cls(id=row["id"], campaign=row["campaign"], number=row["number"],
                   content_sha256=row["content_sha256"], files=files, raw=row)


@dataclass(frozen=True)
class Lease:
    """A leased solution: its assignment id, the steps' texts in order, and the whole assignment as sent."""

    assignment: int
    solution: int
    steps: list[str]
    raw: dict[str, Any]


class Steplab:
    """One server, one API token (``Authorization: Bearer stp_…``; a ``write`` token to label or start jobs)."""

    def __init__(self, base_url: str, token: str, *, timeout: float = 60.0,
                 session: requests.Session | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.session = session or requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"

    # --- plumbing ------------------------------------------------------------------------------
    def _url(self, path: str) -> str:
        return path if path.startswith("http") else f"{self.base_url}/{path.lstrip('/')}"

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON answer of one request; a 4xx/5xx raises ``SteplabError``."""
        answer = self.session.request(method, self._url(path), timeout=self.timeout, **kwargs)
        if answer.status_code >= 400:
            try:
                body: Any = answer.json()
            except ValueError:
                body = answer.text
            raise SteplabError(answer.status_code, body)
        return answer.json() if answer.content else None

    def _pages(self, path: str, params: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        """Every row of a paginated list (``{"results", "next"}``), following ``next``."""
        page: Any = self.request("GET", path, params=params)
        while True:
            if isinstance(page, list):  # an unpaginated list
                yield from page
                return
            yield from page["results"]
            if not page.get("next"):
                return
            page = self.request("GET", page["next"])

    # --- datasets ------------------------------------------------------------------------------
    def dataset_versions(self, campaign: int | None = None) -> list[DatasetVersion]:
        """Ready dataset versions you may read, oldest first."""
        params = {"campaign": campaign} if campaign is not None else None
        return [DatasetVersion.from_api(row) for row in self._pages("/api/datasets/", params)]

    def dataset_version(self, version_id: int) -> DatasetVersion:
        return DatasetVersion.from_api(self.request("GET", f"/api/datasets/{version_id}/"))

    def download(self, version: DatasetVersion | int, fmt: str, dest: str | Path) -> Path:
        """Stream one file of a version to ``dest`` (a folder: the file keeps its name) and check its SHA-256
        against the version's record; a mismatch removes the file and raises ``ChecksumMismatch``."""
        if isinstance(version, int):
            version = self.dataset_version(version)
        if fmt not in version.files:
            raise KeyError(f"version {version.number} has no {fmt!r} file (has: {', '.join(sorted(version.files))})")
        info = version.files[fmt]
        target = Path(dest)
        if target.is_dir():
            target = target / Path(info.name).name
        partial = target.with_name(target.name + ".part")
        digest = hashlib.sha256()
        with self.session.get(self._url(info.url), stream=True, timeout=self.timeout) as answer:
            if answer.status_code != 200:
                raise SteplabError(answer.status_code, answer.text[:500])
            announced = answer.headers.get("X-Content-SHA256")
            with partial.open("wb") as out:
                for chunk in answer.iter_content(CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
        got = digest.hexdigest()
        for expected, where in ((info.sha256, "the version's record"), (announced, "the X-Content-SHA256 header")):
            if expected and got != expected:
                partial.unlink(missing_ok=True)
                raise ChecksumMismatch(f"{info.name}: SHA-256 {got} is not {expected} ({where})")
        partial.replace(target)
        return target

    def load_dataset(self, version: DatasetVersion | int, fmt: str = "trl-stepwise",
                     cache_dir: str | Path | None = None) -> datasets.Dataset:
        """One file of a version as a ``datasets.Dataset`` (JSONL or Parquet), downloaded and checked first.
        Needs the ``datasets`` package, imported only here."""
        import datasets

        if isinstance(version, int):
            version = self.dataset_version(version)
        folder = Path(cache_dir) if cache_dir is not None else Path.home() / ".cache" / "steplab"
        folder = folder / version.content_sha256[:16]
        folder.mkdir(parents=True, exist_ok=True)
        path = self.download(version, fmt, folder)
        if path.suffix == ".parquet":
            return datasets.Dataset.from_parquet(str(path))
        return datasets.Dataset.from_json(str(path))

    # --- labeling ------------------------------------------------------------------------------
    def lease(self, campaign: int) -> Lease | None:
        """Your open solution in the campaign, else the next one to label; None when there is no work (the
        server's reason is in ``SteplabError`` only for refusals)."""
        answer = self.request("POST", f"/api/campaigns/{campaign}/lease/")
        assignment = answer.get("assignment")
        if assignment is None:
            return None
        steps = [step["completions"][0]["text"] for step in assignment["steps"]]
        return Lease(assignment=assignment["id"], solution=assignment["solution"], steps=steps, raw=assignment)

    def submit_labels(self, assignment: int, ratings: Sequence[int | None | dict[str, Any]], *,
                      finish_reason: str | None = None, finish_text: str = "", total_time_ms: int | None = None,
                      client_key: str | None = None) -> dict[str, Any]:
        """Rate a leased solution's steps and finish it in one request (``/api/assignments/{id}/labeling/``).
        ``ratings``: one value per step from step 0 (-1, 0, 1), or dicts (``step_index``, ``rating``,
        ``rationale``, ``flagged``, ``error_category``). The client key (a new UUID unless given) makes a retry
        of this call safe: the server answers the first result."""
        body = self._labeling_body(ratings, finish_reason, finish_text, total_time_ms, client_key)
        answer: dict[str, Any] = self._retrying("POST", f"/api/assignments/{assignment}/labeling/", body)
        return answer

    def submit_many(self, labelings: Sequence[tuple[int, Sequence[int | None | dict[str, Any]]]], *,
                    finish_reason: str | None = None) -> list[dict[str, Any]]:
        """Several ``(assignment, ratings)`` at once (``/api/labelings/``); each result says its own status."""
        items = [{"assignment": assignment, **self._labeling_body(ratings, finish_reason, "", None, None)}
                 for assignment, ratings in labelings]
        answer: dict[str, Any] = self._retrying("POST", "/api/labelings/", {"labelings": items})
        results: list[dict[str, Any]] = answer["results"]
        return results

    @staticmethod
    def _labeling_body(ratings: Sequence[int | None | dict[str, Any]], finish_reason: str | None, finish_text: str,
                       total_time_ms: int | None, client_key: str | None) -> dict[str, Any]:
        rows = [value if isinstance(value, dict) else {"step_index": index, "rating": value}
                for index, value in enumerate(ratings)]
        return {"ratings": rows, "finish_reason": finish_reason, "finish_text": finish_text,
                "total_time_ms": total_time_ms, "client_key": client_key or uuid.uuid4().hex}

    def _retrying(self, method: str, path: str, body: dict[str, Any], attempts: int = 3) -> Any:
        """Send again (same body, same client keys) when the connection drops: the server applies it once."""
        for attempt in range(attempts):
            try:
                return self.request(method, path, json=body)
            except (requests.ConnectionError, requests.Timeout):
                if attempt == attempts - 1:
                    raise
                time.sleep(0.5 * 2 ** attempt)
        raise AssertionError("unreachable")

    # --- jobs ----------------------------------------------------------------------------------
    def start_training(self, *, kind: str, dataset_version: int, hyper: dict[str, Any] | None = None,
                       base_model: str = "default", backend: str = "local") -> dict[str, Any]:
        """Start a PRM or ORM training job on a dataset version; the job as the server answers it."""
        job: dict[str, Any] = self.request("POST", "/api/jobs/", json={
            "kind": kind, "dataset_version": dataset_version, "hyper": hyper or {}, "base_model": base_model,
            "backend": backend})
        return job

    def job(self, job_id: int) -> dict[str, Any]:
        answer: dict[str, Any] = self.request("GET", f"/api/jobs/{job_id}/")
        return answer

    def cancel_job(self, job_id: int) -> dict[str, Any]:
        answer: dict[str, Any] = self.request("POST", f"/api/jobs/{job_id}/cancel/")
        return answer

    def wait_for_job(self, job_id: int, *, timeout: float = 3600.0, poll_s: float = 2.0) -> dict[str, Any]:
        """Poll the job until it succeeded, failed or was cancelled, and return it: a failed job is returned, not
        raised (its ``error`` and ``log_tail`` say why). ``TimeoutError`` after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if job["status"] in FINAL_JOB_STATUSES:
                return job
            if time.monotonic() >= deadline:
                raise TimeoutError(f"job {job_id} is still {job['status']} after {timeout:g} s")
            time.sleep(poll_s)
