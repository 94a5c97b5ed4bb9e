"""Steplab settings: each one declared once, read from the environment with environs.

With nothing set, Steplab runs on an *embedded default*: SQLite in ``var/`` and a Celery broker on the
local filesystem (kombu's filesystem transport), so ``./run demo`` works on a bare machine. Set
``DATABASE_URL`` (PostgreSQL) and ``REDIS_URL`` for the real stack; ``steplab.settings_production``
adds the HTTPS hardening that ``manage.py check --deploy`` asks for.

Nothing here creates folders: the SQLite backend (``steplab.sqlite3``), the Celery app (``steplab.celery``),
the static files middleware and the code writing into a folder each make the folder they use.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from django.core.management.utils import get_random_secret_key
from environs import Env

env = Env()

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = env.path("STEPLAB_VAR_DIR", BASE_DIR / "var")


def _embedded_secret_key() -> str:
    """A per-checkout random key for the embedded default, kept in var/ so sessions survive restarts."""
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(get_random_secret_key())
        path.chmod(0o600)
    return path.read_text().strip()


def _database() -> dict[str, Any]:
    database: dict[str, Any] = dict(env.dj_db_url(
        "DATABASE_URL",
        default=f"sqlite:///{VAR_DIR / 'steplab.sqlite3'}",
        conn_max_age=env.int("DB_CONN_MAX_AGE", 60),
        conn_health_checks=True,
    ))
    if database["ENGINE"] == "django.db.backends.sqlite3":
        # Django's SQLite backend plus the database file's folder made on first connect.
        database["ENGINE"] = "steplab.sqlite3"
        # WAL lets the web process and the embedded worker read while the other writes. IMMEDIATE: a transaction
        # takes the write lock when it begins, so concurrent writers wait (up to the timeout) instead of failing
        # with "database is locked" when a read-then-write transaction cannot upgrade its lock.
        database["OPTIONS"] = {"init_command": "PRAGMA journal_mode=WAL;", "timeout": 20,
                               "transaction_mode": "IMMEDIATE"}
        # Tests get a file beside it, not Django's shared-cache memory database: that one fails concurrent
        # connections at once with "database table is locked" where the file the demo uses waits its timeout.
        name = Path(database["NAME"])
        database["TEST"] = {"NAME": str(name.with_name(f"test_{name.name}"))}
    elif env.bool("DB_SERVER_SIDE_BINDING", True):
        # Parameters bound by the server let psycopg prepare the statements a connection repeats (after 5 runs):
        # the labeling hot path's queries are then parsed and planned once per connection, not once per request.
        # Set DB_SERVER_SIDE_BINDING=0 behind a transaction-mode pooler (PgBouncer) that cannot keep them.
        database.setdefault("OPTIONS", {})["server_side_binding"] = True
    return database


def s3_storage(environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The default storage in any S3-compatible store when ``STEPLAB_S3_BUCKET`` is set (needs the ``s3`` extra);
    a function of the variables so that tests build it from the same ones. Credentials: boto3's own chain (AWS_*)."""
    if not environ.get("STEPLAB_S3_BUCKET"):
        return None
    return {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": environ["STEPLAB_S3_BUCKET"],
            "endpoint_url": environ.get("STEPLAB_S3_ENDPOINT_URL") or None,
            "region_name": environ.get("STEPLAB_S3_REGION") or None,
            "file_overwrite": True,
        },
    }


DEBUG = env.bool("DEBUG", False)
SECRET_KEY = env.str("SECRET_KEY", "") or _embedded_secret_key()
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"], subcast=str.strip)
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", [], subcast=str.strip)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "drf_spectacular",
    "django_htmx",
    "annotate",
    "rewards",
    "rewards.jobs",
    "webhooks",
    "endpoints",
    "api",
    "demo",
    "drf_spectacular_sidecar",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "steplab.middleware.ContentSecurityPolicyMiddleware",
    "steplab.middleware.StaticFilesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "steplab.middleware.DatabaseUnavailableMiddleware",
]

ROOT_URLCONF = "steplab.urls"
WSGI_APPLICATION = "steplab.wsgi.application"
ASGI_APPLICATION = "steplab.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "steplab.nav.nav",
            ],
        },
    },
]

DATABASES = {"default": _database()}
# A second connection to the same database (steplab.jobs.PROGRESS_DATABASE): a job whose work runs in one long
# transaction (an import) writes its progress through it, so pollers see it before that transaction commits.
DATABASES["job_progress"] = {**DATABASES["default"], "TEST": {"MIRROR": "default"}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # a refusal (403) is one line, not a traceback
    "filters": {"refusals_in_one_line": {"()": "steplab.logfilters.RefusalsInOneLine"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["refusals_in_one_line"]}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}

# --- Files --------------------------------------------------------------------------------------
STATIC_URL = "/static/"
STATIC_ROOT = env.path("STATIC_ROOT", VAR_DIR / "staticfiles")
NODE_MODULES = BASE_DIR / "node_modules"
STATICFILES_DIRS = [
    BASE_DIR / "static",
    ("vendor/katex", NODE_MODULES / "katex" / "dist"),
    ("vendor/chartjs", NODE_MODULES / "chart.js" / "dist"),
    ("vendor/pico", NODE_MODULES / "@picocss" / "pico" / "css"),
]
WHITENOISE_USE_FINDERS = True
MEDIA_URL = "/media/"
MEDIA_ROOT = env.path("MEDIA_ROOT", VAR_DIR / "media")
STORAGES = {
    # Dataset versions and models; STEPLAB_S3_BUCKET (docs/configuration.md) overrides the backend.
    "default": s3_storage(os.environ) or {
        "BACKEND": env.str("STEPLAB_STORAGE_BACKEND", "django.core.files.storage.FileSystemStorage"),
    },
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# --- Celery and the cache -----------------------------------------------------------------------
REDIS_URL = env.str("REDIS_URL", "")
CELERY_BROKER_URL = REDIS_URL or "filesystem://"
CELERY_RESULT_BACKEND = REDIS_URL or f"file://{VAR_DIR / 'celery-results'}"
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {"visibility_timeout": 3600} if REDIS_URL else {
    "data_folder_in": str(VAR_DIR / "celery-broker" / "queue"),
    "data_folder_out": str(VAR_DIR / "celery-broker" / "queue"),
    "processed_folder": str(VAR_DIR / "celery-broker" / "processed"),
    "control_folder": str(VAR_DIR / "celery-broker" / "control"),
}
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = {
    "jobs.run_training_job": {"queue": "gpu"},
    "jobs.run_scoring_job": {"queue": "gpu"},
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT", 24 * 3600)
CELERY_BEAT_SCHEDULE = {
    "reap-expired-leases": {"task": "annotate.reap_expired_leases", "schedule": 60.0},
    "campaign-metrics": {"task": "annotate.compute_all_campaign_metrics", "schedule": 900.0},
    "dispatch-pending-imports": {"task": "annotate.dispatch_pending_imports", "schedule": 60.0},
    "sweep-import-files": {"task": "annotate.sweep_import_files", "schedule": 3600.0},
    "snapshot-datasets": {"task": "rewards.snapshot_due_datasets", "schedule": 300.0},
    "jobs-reap-stale": {"task": "jobs.reap_stale_jobs", "schedule": 60.0},
    "jobs-auto-train": {"task": "jobs.auto_train", "schedule": 600.0},
    "jobs-auto-generations": {"task": "jobs.auto_start_generations", "schedule": 600.0},
    "webhooks-sweep": {"task": "webhooks.sweep_deliveries", "schedule": 60.0},
}

CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
    if REDIS_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}

# --- API ----------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "api.auth.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "api.auth.TokenScope",
    ],
    "DEFAULT_PAGINATION_CLASS": "rewards.api.pagination.Pagination",
    # a browser refused on an API link gets the site's 403/404 page (steplab/middleware.py)
    "EXCEPTION_HANDLER": "steplab.middleware.api_exception_handler",
    "PAGE_SIZE": 100,
    # JSON bodies are held to a nesting depth (steplab/jsonlimits.py): a deep one is a 400, not a RecursionError.
    "DEFAULT_PARSER_CLASSES": [
        "steplab.jsonlimits.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Steplab API",
    "DESCRIPTION": "Process-supervision labels: campaigns, solutions, steps, ratings, datasets, reward models.",
    "VERSION": "0.1.0",
    # Swagger UI and ReDoc from the sidecar package: /api/docs/ works offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # ``<id:…>`` path parameters (steplab/converters.py): database ids, a larger number is a 404
    "PATH_CONVERTER_OVERRIDES": {"id": {"type": "integer", "format": "int64", "minimum": 0, "maximum": 2**63 - 1}},
    "ENUM_NAME_OVERRIDES": {
        "AssignmentStatusEnum": "annotate.models.AssignmentStatus",
        "DatasetVersionStatusEnum": "rewards.models.DatasetVersion.Status",
        "FinishReasonEnum": "annotate.models.FinishReason",
        "JobBackendEnum": "rewards.jobs.models.BackendKind",
        "JobStatusEnum": "rewards.jobs.models.JobStatus",
        "JobKindEnum": "rewards.jobs.models.Kind",
    },
}
STEPLAB_TOKEN_TOUCH_SECONDS = 60  # last_used_at is written at most this often per token
# Login limits (steplab/login_limits.py): failed attempts per (username, address) pair, per address over all names,
# and how many different addresses may fail at one username before only known addresses may try it.
STEPLAB_LOGIN_RATE = env.str("STEPLAB_LOGIN_RATE", "10/m")
STEPLAB_LOGIN_ADDRESS_RATE = env.str("STEPLAB_LOGIN_ADDRESS_RATE", "30/m")
STEPLAB_LOGIN_ACCOUNT_RATE = env.str("STEPLAB_LOGIN_ACCOUNT_RATE", "20/h")

# --- Labeling, imports and campaign admin -------------------------------------------------------
STEPLAB_MAX_STEP_CHARS = env.int("STEPLAB_MAX_STEP_CHARS", 1_000_000)
STEPLAB_MAX_STEPS_PER_SOLUTION = env.int("STEPLAB_MAX_STEPS_PER_SOLUTION", 10_000)
STEPLAB_IMPORT_BATCH = env.int("STEPLAB_IMPORT_BATCH", 2000)
STEPLAB_UPLOAD_MAX_BYTES = env.int("STEPLAB_UPLOAD_MAX_BYTES", 512 * 1024 * 1024)
STEPLAB_DASHBOARD_CACHE_SECONDS = env.int("STEPLAB_DASHBOARD_CACHE_SECONDS", 30)

# --- Datasets -----------------------------------------------------------------------------------
# Exports stream here first; only finished files are copied into the default storage.
STEPLAB_EXPORT_TMP_DIR = env.path("STEPLAB_EXPORT_TMP_DIR", VAR_DIR / "export-tmp")
STEPLAB_DATASET_LICENSE = env.str("STEPLAB_DATASET_LICENSE", "MIT")
STEPLAB_CODE_VERSION = env.str("STEPLAB_CODE_VERSION", "")

# --- Reward-model jobs, evaluation and active learning ------------------------------------------
STEPLAB_JOBS_ROOT = env.path("STEPLAB_JOBS_ROOT", VAR_DIR / "jobs")
STEPLAB_JOB_HEARTBEAT_TIMEOUT_S = env.int("STEPLAB_JOB_HEARTBEAT_TIMEOUT_S", 300)
STEPLAB_JOB_POLL_INTERVAL_S = env.float("STEPLAB_JOB_POLL_INTERVAL_S", 2.0)
STEPLAB_JOB_MAX_ATTEMPTS = env.int("STEPLAB_JOB_MAX_ATTEMPTS", 1)  # >1: a lost job is retried
# The Python a Slurm or Kubernetes job runs the trainer with; "" = the worker's own interpreter.
STEPLAB_JOB_PYTHON = env.str("STEPLAB_JOB_PYTHON", "")
STEPLAB_AUTO_TRAIN_MIN_NEW_SOLUTIONS = env.int("STEPLAB_AUTO_TRAIN_MIN_NEW_SOLUTIONS", 200)
STEPLAB_AUTO_TRAIN_HYPER: dict[str, object] = {}
# Sampling jobs started on the web may only name model folders in here (docker-compose mounts them at /models).
STEPLAB_MODELS_DIR = env.path("STEPLAB_MODELS_DIR", VAR_DIR / "models")
STEPLAB_BACKBONES: dict[str, str] = {}  # name -> local model folder, offered next to "default"
# Active learning: the next labeling round starts once this share of the current one has a submitted labeling.
# Its old name, STEPLAB_GENERATION_AUTO_LABELED_SHARE, is still read when the new one is not set (deprecated).
STEPLAB_LABELING_ROUND_AUTO_LABELED_SHARE = env.float("STEPLAB_LABELING_ROUND_AUTO_LABELED_SHARE",
                                                      env.float("STEPLAB_GENERATION_AUTO_LABELED_SHARE", 0.9))
# Slurm backend (docs/operations.md): sbatch options, lines run before the job, where states are read.
STEPLAB_SLURM: dict[str, object] = {
    "partition": env.str("STEPLAB_SLURM_PARTITION", ""),
    "account": env.str("STEPLAB_SLURM_ACCOUNT", ""),
    "qos": env.str("STEPLAB_SLURM_QOS", ""),
    "mem": env.str("STEPLAB_SLURM_MEM", ""),
    "cpus_per_task": env.int("STEPLAB_SLURM_CPUS_PER_TASK", 8),
    "time_limit": env.str("STEPLAB_SLURM_TIME_LIMIT", ""),  # Slurm syntax ("4:00:00"); "" = the job's own
    "gpus_per_job": env.str("STEPLAB_SLURM_GPUS_PER_JOB", ""),  # "" = 1 for training/scoring, "0" = CPU
    "gpu_type": env.str("STEPLAB_SLURM_GPU_TYPE", ""),  # --gres=gpu:TYPE:N
    # One sbatch option per line; blank lines are skipped.
    "sbatch_options": [line for line in env.list("STEPLAB_SLURM_SBATCH_OPTIONS", [], subcast=str, delimiter="\n")
                       if line.strip()],
    "setup": env.str("STEPLAB_SLURM_SETUP", ""),  # shell lines before the commands (module load, venv)
    "states_from": env.str("STEPLAB_SLURM_STATES_FROM", "auto"),  # auto | sacct | scontrol
    "jobcomp_log": env.str("STEPLAB_SLURM_JOBCOMP_LOG", ""),  # "" = JobCompLoc of jobcomp/filetxt
}
STEPLAB_KUBERNETES: dict[str, object] = {
    "namespace": env.str("STEPLAB_K8S_NAMESPACE", "steplab"),
    "image": env.str("STEPLAB_K8S_IMAGE", "steplab:latest"),
    "volume_claim": env.str("STEPLAB_K8S_VOLUME_CLAIM", "steplab-work"),
}

# --- Served-model endpoints ----------------------------------------------------------------------
# Private addresses (host names or CIDRs, comma-separated) that staff-registered endpoints may reach, e.g. a lab's
# vLLM at 10.0.0.0/8; campaign admins' endpoints must be public. Separate from the webhooks' list.
STEPLAB_ENDPOINT_ALLOW = env.list("STEPLAB_ENDPOINT_ALLOW", [], subcast=str)

# --- Webhooks -----------------------------------------------------------------------------------
# Receivers admitted although not public (stepcore/outbound.py): host names or CIDRs, comma-separated.
STEPLAB_WEBHOOK_ALLOWED_HOSTS = env.list("STEPLAB_WEBHOOK_ALLOWED_HOSTS", [], subcast=str)
STEPLAB_WEBHOOK_TIMEOUT_S = env.float("STEPLAB_WEBHOOK_TIMEOUT_S", 10.0)  # one delivery in all: connect to answer
STEPLAB_WEBHOOK_MAX_ATTEMPTS = env.int("STEPLAB_WEBHOOK_MAX_ATTEMPTS", 8)
STEPLAB_WEBHOOK_RETRY_BASE_S = env.float("STEPLAB_WEBHOOK_RETRY_BASE_S", 30.0)  # doubled after each failure
# The deliveries' Celery queue: their own, so a slow receiver never holds imports (steplab/celery.py WORKER_QUEUES).
STEPLAB_WEBHOOK_QUEUE = env.str("STEPLAB_WEBHOOK_QUEUE", "webhooks")
