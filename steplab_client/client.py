"""The client: campaigns, datasets (list, download with SHA-256 check, load as ``datasets.Dataset``), labeling
(lease, whole-solution submit), jobs (start, wait). It talks only HTTP: no Django, no settings.

The API token goes only to the server the client was made for: a link the server answers with (a page's ``next``,
a file's ``url``) that points at another scheme, host or port is fetched without it."""
from __future__ import annotations

import hashlib
import os
import re
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from requests.auth import AuthBase
from urllib3.connectionpool import ConnectionPool
from urllib3.response import BaseHTTPResponse
from urllib3.util.retry import Retry

if TYPE_CHECKING:
    import datasets

FINAL_JOB_STATUSES = frozenset({"succeeded", "failed", "cancelled"})
CHUNK = 1 << 20
#: the labeling submissions: each carries client keys the server applies once, so a lost answer is safe to resend
RESENDABLE = re.compile(r"/api/(assignments/\d+/labeling|labelings)/$")


class _Retry(Retry):
    """urllib3's ``Retry``: a connection that failed before the request went out is tried again for any request; a
    lost answer only for reads and the labeling submissions; a 502/503/504 (after its ``Retry-After``) for reads.
    Never a POST that would act twice, such as starting a job."""

    def increment(self, method: str | None = None, url: str | None = None, response: BaseHTTPResponse | None = None,
                  error: Exception | None = None, _pool: ConnectionPool | None = None,
                  _stacktrace: TracebackType | None = None) -> Self:
        allowed = self.allowed_methods  # None: every method is retried already
        if method == "POST" and url and RESENDABLE.search(urlsplit(url).path) and allowed and "POST" not in allowed:
            resend = self.new(allowed_methods=frozenset(allowed) | {"POST"})
            return resend.increment(method, url, response, error, _pool, _stacktrace)
        return super().increment(method, url, response, error, _pool, _stacktrace)


#: two more tries, the second a second later
RETRY = _Retry(total=2, backoff_factor=0.5, status_forcelist=(502, 503, 504), raise_on_status=False)


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


def _origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) with the scheme's default port filled in: what "the same server" means."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(scheme)


class _BearerForOrigin(AuthBase):
    """``Authorization: Bearer …`` on requests to one origin only; requests drops it itself on a redirect
    elsewhere, and this keeps it off links the server hands out that point elsewhere."""

    def __init__(self, token: str, base_url: str) -> None:
        self.header = f"Bearer {token}"
        self.origin = _origin(base_url)

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        if request.url is not None and _origin(request.url) == self.origin:
            request.headers["Authorization"] = self.header
        else:
            request.headers.pop("Authorization", None)
        return request


@dataclass(frozen=True)
class Campaign:
    """A campaign you are a member of: its ``id`` is what ``dataset_versions`` and ``lease`` take."""

    id: int
    slug: str
    name: str
    mode: str
    is_active: bool
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_api(cls, row: dict[str, Any]) -> Campaign:
        return cls(id=row["id"], slug=row["slug"], name=row["name"], mode=row["mode"],
                   is_active=row["is_active"], raw=row)


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
    files: dict[str, DatasetFile] = field(repr=False)
    raw: dict[str, Any] = field(repr=False)

    def __repr__(self) -> str:
        return (f"DatasetVersion(id={self.id}, campaign={self.campaign}, number={self.number}, "
                f"sha256={self.content_sha256[:12]}…, formats={sorted(self.files)})")

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
    raw: dict[str, Any] = field(repr=False)

    def __repr__(self) -> str:
        return f"Lease(assignment={self.assignment}, solution={self.solution}, steps={len(self.steps)})"


class Steplab:
    """One server, one API token (``Authorization: Bearer stp_…``; a ``write`` token to label or start jobs)."""

    def __init__(self, base_url: str, token: str, *, timeout: float = 60.0,
                 session: requests.Session | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.session = session or requests.Session()
        self.session.auth = _BearerForOrigin(token, self.base_url)
        self.session.mount(f"{self.base_url}/", HTTPAdapter(max_retries=RETRY))

    def __repr__(self) -> str:
        return f"Steplab({self.base_url!r})"

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

    # --- campaigns -----------------------------------------------------------------------------
    def campaigns(self) -> list[Campaign]:
        """The campaigns you are a member of (any role), oldest first."""
        return [Campaign.from_api(row) for row in self._pages("/api/campaigns/")]

    # --- datasets ------------------------------------------------------------------------------
    def dataset_versions(self, campaign: Campaign | int | None = None) -> list[DatasetVersion]:
        """Ready dataset versions you may read, oldest first."""
        if isinstance(campaign, Campaign):
            campaign = campaign.id
        params = {"campaign": campaign} if campaign is not None else None
        return [DatasetVersion.from_api(row) for row in self._pages("/api/datasets/", params)]

    def dataset_version(self, version_id: int) -> DatasetVersion:
        return DatasetVersion.from_api(self.request("GET", f"/api/datasets/{version_id}/"))

    def download(self, version: DatasetVersion | int, fmt: str, dest: str | Path) -> Path:
        """Stream one file of a version to ``dest`` and check its SHA-256 against the version's record; a mismatch
        removes the file and raises ``ChecksumMismatch``. ``dest`` is a folder when it exists as one or ends with
        a slash (made if missing; the file keeps its name), else the file's path (its folder made if missing)."""
        if isinstance(version, int):
            version = self.dataset_version(version)
        if fmt not in version.files:
            raise KeyError(f"version {version.number} has no {fmt!r} file (has: {', '.join(sorted(version.files))})")
        info = version.files[fmt]
        target = Path(dest)
        if target.is_dir() or str(dest).endswith(("/", os.sep)):
            target.mkdir(parents=True, exist_ok=True)
            target = target / Path(info.name).name
        target.parent.mkdir(parents=True, exist_ok=True)
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
    def lease(self, campaign: Campaign | int) -> Lease | None:
        """Your open solution in the campaign, else the next one to label; None when there is no work (the
        server's reason is in ``SteplabError`` only for refusals)."""
        if isinstance(campaign, Campaign):
            campaign = campaign.id
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
        answer: dict[str, Any] = self.request("POST", f"/api/assignments/{assignment}/labeling/", json=body)
        return answer

    def submit_many(self, labelings: Sequence[tuple[int, Sequence[int | None | dict[str, Any]]]], *,
                    finish_reason: str | None = None) -> list[dict[str, Any]]:
        """Several ``(assignment, ratings)`` at once (``/api/labelings/``); each result says its own status."""
        items = [{"assignment": assignment, **self._labeling_body(ratings, finish_reason, "", None, None)}
                 for assignment, ratings in labelings]
        answer: dict[str, Any] = self.request("POST", "/api/labelings/", json={"labelings": items})
        results: list[dict[str, Any]] = answer["results"]
        return results

    @staticmethod
    def _labeling_body(ratings: Sequence[int | None | dict[str, Any]], finish_reason: str | None, finish_text: str,
                       total_time_ms: int | None, client_key: str | None) -> dict[str, Any]:
        rows = [value if isinstance(value, dict) else {"step_index": index, "rating": value}
                for index, value in enumerate(ratings)]
        return {"ratings": rows, "finish_reason": finish_reason, "finish_text": finish_text,
                "total_time_ms": total_time_ms, "client_key": client_key or uuid.uuid4().hex}

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
