"""Steplab settings, read from the environment.

With nothing set, Steplab runs on an *embedded default*: SQLite in ``var/`` and a Celery broker on the
local filesystem (kombu's filesystem transport), so ``./run demo`` works on a bare machine. Set
``DATABASE_URL`` (PostgreSQL) and ``REDIS_URL`` for the real stack; ``steplab.settings_production``
adds the HTTPS hardening that ``manage.py check --deploy`` asks for.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.management.utils import get_random_secret_key

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("STEPLAB_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if not value:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def _embedded_secret_key() -> str:
    """A per-checkout random key for the embedded default, kept in var/ so sessions survive restarts."""
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.write_text(get_random_secret_key())
        path.chmod(0o600)
    return path.read_text().strip()


DEBUG = env_bool("DEBUG", default=False)
SECRET_KEY = os.environ.get("SECRET_KEY") or _embedded_secret_key()
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

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
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "steplab.middleware.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
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

DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{VAR_DIR / 'steplab.sqlite3'}",
        conn_max_age=int(os.environ.get("DB_CONN_MAX_AGE", "60")),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web process and the embedded worker read while the other writes.
    DATABASES["default"]["OPTIONS"] = {"init_command": "PRAGMA journal_mode=WAL;", "timeout": 20}
elif os.environ.get("DB_SERVER_SIDE_BINDING", "1") == "1":
    # Parameters bound by the server let psycopg prepare the statements a connection repeats (after 5 runs):
    # the labeling hot path's queries are then parsed and planned once per connection, not once per request.
    # Set DB_SERVER_SIDE_BINDING=0 behind a transaction-mode pooler (PgBouncer) that cannot keep them.
    DATABASES["default"].setdefault("OPTIONS", {})["server_side_binding"] = True
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

STATIC_URL = "/static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", VAR_DIR / "staticfiles"))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns about a missing folder
NODE_MODULES = BASE_DIR / "node_modules"
STATICFILES_DIRS = [
    BASE_DIR / "static",
    ("vendor/katex", NODE_MODULES / "katex" / "dist"),
    ("vendor/chartjs", NODE_MODULES / "chart.js" / "dist"),
    ("vendor/pico", NODE_MODULES / "@picocss" / "pico" / "css"),
]
MEDIA_URL = "/media/"
MEDIA_ROOT = Path(os.environ.get("MEDIA_ROOT", VAR_DIR / "media"))
STORAGES = {
    "default": {"BACKEND": os.environ.get("STEPLAB_STORAGE_BACKEND", "django.core.files.storage.FileSystemStorage")},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True

# --- Celery -------------------------------------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_RESULT_BACKEND = REDIS_URL
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {"visibility_timeout": 3600}
else:
    _broker_dir = VAR_DIR / "celery-broker"
    for _sub in ("queue", "processed", "control"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
    }
    (VAR_DIR / "celery-results").mkdir(parents=True, exist_ok=True)
    CELERY_RESULT_BACKEND = f"file://{VAR_DIR / 'celery-results'}"
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = {"rewards.tasks.run_training_job": {"queue": "gpu"}}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_TIME_LIMIT = int(os.environ.get("CELERY_TASK_TIME_LIMIT", str(24 * 3600)))

CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
    if REDIS_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}

# --- API ----------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
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
}

# --- Steplab ------------------------------------------------------------------------------------
STEPLAB_DEFAULT_LEASE_MINUTES = int(os.environ.get("STEPLAB_DEFAULT_LEASE_MINUTES", "30"))
STEPLAB_MAX_STEP_CHARS = int(os.environ.get("STEPLAB_MAX_STEP_CHARS", str(1_000_000)))
STEPLAB_MAX_STEPS_PER_SOLUTION = int(os.environ.get("STEPLAB_MAX_STEPS_PER_SOLUTION", "10000"))
STEPLAB_IMPORT_BATCH = int(os.environ.get("STEPLAB_IMPORT_BATCH", "2000"))
STEPLAB_LOGIN_RATE = os.environ.get("STEPLAB_LOGIN_RATE", "10/m")  # failed login attempts per address and per username

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"

CELERY_BEAT_SCHEDULE = {
    "reap-expired-leases": {"task": "annotate.reap_expired_leases", "schedule": 60.0},
}

# --- Labeling workspace (issue 3) -----------------------------------------------------------------

# --- Campaign admin and quality (issue 4) ---------------------------------------------------------
STEPLAB_DASHBOARD_CACHE_SECONDS = int(os.environ.get("STEPLAB_DASHBOARD_CACHE_SECONDS", "30"))
STEPLAB_UPLOAD_MAX_BYTES = int(os.environ.get("STEPLAB_UPLOAD_MAX_BYTES", str(512 * 1024 * 1024)))
CELERY_BEAT_SCHEDULE["campaign-metrics"] = {"task": "annotate.compute_all_campaign_metrics", "schedule": 900.0}
CELERY_BEAT_SCHEDULE["dispatch-pending-imports"] = {"task": "annotate.dispatch_pending_imports", "schedule": 60.0}
CELERY_BEAT_SCHEDULE["sweep-import-files"] = {"task": "annotate.sweep_import_files", "schedule": 3600.0}

# --- Datasets and REST API (issue 5) --------------------------------------------------------------
INSTALLED_APPS += ["drf_spectacular_sidecar"]
REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"] = [
    "rewards.api.auth.ApiTokenAuthentication",
    "rest_framework.authentication.SessionAuthentication",
]
REST_FRAMEWORK["DEFAULT_PERMISSION_CLASSES"] = [
    "rest_framework.permissions.IsAuthenticated",
    "rewards.api.auth.TokenScope",
]
REST_FRAMEWORK["DEFAULT_PAGINATION_CLASS"] = "rewards.api.pagination.Pagination"
SPECTACULAR_SETTINGS.update({  # Swagger UI from the sidecar package: /api/docs/ works offline
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "AssignmentStatusEnum": "annotate.models.AssignmentStatus",
        "DatasetVersionStatusEnum": "rewards.models.DatasetVersion.Status",
        "FinishReasonEnum": "annotate.models.FinishReason",
        "JobBackendEnum": "rewards.jobs.models.BackendKind",
        "JobStatusEnum": "rewards.jobs.models.JobStatus",
        "JobKindEnum": "rewards.jobs.models.Kind",
    },
})
# Exports stream here first; only finished files are copied into the default storage.
STEPLAB_EXPORT_TMP_DIR = Path(os.environ.get("STEPLAB_EXPORT_TMP_DIR", VAR_DIR / "export-tmp"))
STEPLAB_DATASET_LICENSE = os.environ.get("STEPLAB_DATASET_LICENSE", "MIT")
STEPLAB_CODE_VERSION = os.environ.get("STEPLAB_CODE_VERSION", "")
STEPLAB_TOKEN_TOUCH_SECONDS = 60  # last_used_at is written at most this often per token


def s3_storage(environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The default storage in any S3-compatible store when ``STEPLAB_S3_BUCKET`` is set (needs the ``s3`` extra);
    a function so that tests build it from the same variables. Credentials: boto3's own chain (AWS_*)."""
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


STORAGES["default"] = s3_storage(os.environ) or STORAGES["default"]
CELERY_BEAT_SCHEDULE["snapshot-datasets"] = {"task": "rewards.snapshot_due_datasets", "schedule": 300.0}

# --- Reward-model jobs, evaluation, dashboard, active learning (issues 6–8) -----------------------
STEPLAB_JOBS_ROOT = Path(os.environ.get("STEPLAB_JOBS_ROOT", VAR_DIR / "jobs"))
STEPLAB_JOB_HEARTBEAT_TIMEOUT_S = int(os.environ.get("STEPLAB_JOB_HEARTBEAT_TIMEOUT_S", "300"))
STEPLAB_JOB_POLL_INTERVAL_S = float(os.environ.get("STEPLAB_JOB_POLL_INTERVAL_S", "2"))
STEPLAB_JOB_MAX_ATTEMPTS = int(os.environ.get("STEPLAB_JOB_MAX_ATTEMPTS", "1"))  # >1: a lost job is retried
STEPLAB_AUTO_TRAIN_MIN_NEW_SOLUTIONS = int(os.environ.get("STEPLAB_AUTO_TRAIN_MIN_NEW_SOLUTIONS", "200"))
STEPLAB_AUTO_TRAIN_HYPER: dict[str, object] = {}
# Sampling jobs started on the web may only name model folders in here (docker-compose mounts them at /models).
STEPLAB_MODELS_DIR = Path(os.environ.get("STEPLAB_MODELS_DIR", VAR_DIR / "models"))
STEPLAB_BACKBONES: dict[str, str] = {}  # name -> local model folder, offered next to "default"
# Slurm backend (README "Training on Slurm"): sbatch options, lines run before the job, where states are read.
STEPLAB_SLURM: dict[str, object] = {
    "partition": os.environ.get("STEPLAB_SLURM_PARTITION", ""),
    "account": os.environ.get("STEPLAB_SLURM_ACCOUNT", ""),
    "qos": os.environ.get("STEPLAB_SLURM_QOS", ""),
    "mem": os.environ.get("STEPLAB_SLURM_MEM", ""),
    "cpus_per_task": int(os.environ.get("STEPLAB_SLURM_CPUS_PER_TASK", "8")),
    "time_limit": os.environ.get("STEPLAB_SLURM_TIME_LIMIT", ""),  # Slurm syntax ("4:00:00"); "" = the job's own
    "gpus_per_job": os.environ.get("STEPLAB_SLURM_GPUS_PER_JOB", ""),  # "" = 1 for training/scoring, "0" = CPU
    "gpu_type": os.environ.get("STEPLAB_SLURM_GPU_TYPE", ""),  # --gres=gpu:TYPE:N
    "sbatch_options": [line for line in os.environ.get("STEPLAB_SLURM_SBATCH_OPTIONS", "").split("\n") if line.strip()],
    "setup": os.environ.get("STEPLAB_SLURM_SETUP", ""),  # shell lines before the commands (module load, venv)
    "states_from": os.environ.get("STEPLAB_SLURM_STATES_FROM", "auto"),  # auto | sacct | scontrol
    "jobcomp_log": os.environ.get("STEPLAB_SLURM_JOBCOMP_LOG", ""),  # "" = JobCompLoc of jobcomp/filetxt
}
STEPLAB_KUBERNETES: dict[str, object] = {
    "namespace": os.environ.get("STEPLAB_K8S_NAMESPACE", "steplab"),
    "image": os.environ.get("STEPLAB_K8S_IMAGE", "steplab:latest"),
    "volume_claim": os.environ.get("STEPLAB_K8S_VOLUME_CLAIM", "steplab-work"),
}
CELERY_TASK_ROUTES = {
    "jobs.run_training_job": {"queue": "gpu"},
    "jobs.run_scoring_job": {"queue": "gpu"},
}
CELERY_BEAT_SCHEDULE = {
    **CELERY_BEAT_SCHEDULE,
    "jobs-reap-stale": {"task": "jobs.reap_stale_jobs", "schedule": 60.0},
    "jobs-auto-train": {"task": "jobs.auto_train", "schedule": 600.0},
    "jobs-auto-generations": {"task": "jobs.auto_start_generations", "schedule": 600.0},
}
# Active learning: the next generation starts once this share of the current one has a submitted labeling.
STEPLAB_GENERATION_AUTO_LABELED_SHARE = float(os.environ.get("STEPLAB_GENERATION_AUTO_LABELED_SHARE", "0.9"))
