"""The one settings module, driven by the environment.

PostgreSQL is the only database. With no DATABASE_URL the hub uses the embedded PostgreSQL
running on var/pgdata (computepool.embedded_db), and with no CELERY_BROKER_URL a filesystem
broker under var/, so a checkout runs with no services. Production, CI and the
benchmarks set both to PostgreSQL and Redis. Every variable is read through computepool.env,
which names the variable when its value is unusable.
"""

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from computepool import embedded_db
from computepool.artifact_storage_settings import artifacts_storage
from computepool.env import (
    env_bool,
    env_choice,
    env_ed25519,
    env_ed25519_list,
    env_int,
    env_list,
    env_rate,
    env_str,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("COMPUTEPOOL_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY", required=not DEBUG)
if SECRET_KEY is None:
    # Only reachable with DEBUG on: a fixed development key keeps sessions across restarts.
    SECRET_KEY = "insecure-development-key-do-not-use-in-production"  # noqa: S105
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
LOG_LEVEL = env_choice("LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"))

INSTALLED_APPS = [
    "core",  # first, so that its admin/base_site.html is the admin's (core.viewer_zone)
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "computepool",
    "ledger",
    "people",
    "nodes",
    "jobs",
    "inference",
    "web",
    "webhooks",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "core.static_files.StaticFilesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "core.viewer_zone.ViewerTimeZoneMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "computepool.urls"
WSGI_APPLICATION = "computepool.wsgi.application"
ASGI_APPLICATION = "computepool.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "web.navigation.navigation",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------------

DATABASE_URL = env_str("DATABASE_URL", None)
if DATABASE_URL is None:
    # The embedded default: the server `python -m computepool.embedded_db start` runs on the
    # data under var/ (the demo starts it). Read from its own postmaster.pid, so that
    # `manage.py` finds the demo's database with no URL to copy.
    DATABASE_URL = embedded_db.url(VAR_DIR / "pgdata")
    if DATABASE_URL is None:
        raise ImproperlyConfigured(
            "DATABASE_URL is not set and no embedded PostgreSQL runs on "
            f"{VAR_DIR / 'pgdata'}: set DATABASE_URL=postgres://…, or start it with "
            f"`python -m computepool.embedded_db start {VAR_DIR / 'pgdata'}`"
        )
try:
    _db = dj_database_url.parse(DATABASE_URL, conn_max_age=env_int("CONN_MAX_AGE", 60, minimum=0))
except Exception as exc:  # the library raises several types for one meaning: unusable URL
    raise ImproperlyConfigured(f"DATABASE_URL is not a usable database URL: {exc}") from None
if _db.get("ENGINE") != "django.db.backends.postgresql":
    raise ImproperlyConfigured(
        "DATABASE_URL must be a postgres:// URL: PostgreSQL is the only database"
    )
_db.setdefault("OPTIONS", {})
# Server-side parameters let psycopg prepare a statement once it has run a few times, so
# PostgreSQL stops parsing and planning the hot path's statements on every request.
if env_bool("DB_PREPARE", True):
    _db["OPTIONS"].update(server_side_binding=True, prepare_threshold=5)
# Sessions start in UTC, the zone Django works in: otherwise Django sends SET TIME ZONE on every
# new connection (servers default to 'Etc/UTC', another name for it), and a woken long-poll
# claim opens one on each wake-up (jobs.api.claim_with_wait).
_db["OPTIONS"].setdefault("options", "-c TimeZone=UTC")
_db["CONN_HEALTH_CHECKS"] = True
# A pool of connections for a serving process (Django's, on psycopg_pool), sized to its threads
# so that a request never waits for one. A long-poll claim hands its connection back while it
# waits (jobs.api.claim_with_wait); with a pool, the woken claim takes back a warm connection,
# its statements already prepared, where without one it opens a backend and plans them cold.
# 0, the default, keeps a persistent connection per thread (CONN_MAX_AGE): Celery's prefork
# children, management commands and the tests.
DB_POOL_MAX_SIZE = env_int("DB_POOL_MAX_SIZE", 0, minimum=0)
if DB_POOL_MAX_SIZE:
    _db["CONN_MAX_AGE"] = 0  # Django refuses persistent connections beside a pool
    # No check before each loan: with CONN_HEALTH_CHECKS the pool checks every connection it
    # lends (psycopg_pool's check_connection), a round trip to the server beside each request's
    # own statements (docs/decisions.md has the counts). A connection that broke while in the
    # pool (the server restarted) fails the one request that takes it, and the pool discards
    # it when it comes back (tests/test_settings.py).
    _db["CONN_HEALTH_CHECKS"] = False
    _db["OPTIONS"]["pool"] = {
        "min_size": 1,
        "max_size": DB_POOL_MAX_SIZE,
        # With the database down a request fails within a second, as it does without a pool
        # (/healthz answers 503, an agent backs off), rather than hold its thread for the
        # pool's default 30 s: sized to the threads, a request waits only while a connection
        # is opened for it.
        "timeout": 1.0,
        # The pool retries a lost connection with a doubling delay until it gives up; giving up
        # after 5 s lets the next request open one at once, so the hub is back within seconds
        # of the database, not after a delay grown over a long outage.
        "reconnect_timeout": 5.0,
    }
_db["TEST"] = {"NAME": env_str("TEST_DATABASE_NAME", None)}
DATABASES = {"default": _db}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Cache (throttling, liveness); Redis when configured ------------------------------------

REDIS_URL = env_str("REDIS_URL", None)
if REDIS_URL:
    CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# --- Celery ---------------------------------------------------------------------------------

CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
if not CELERY_BROKER_URL.startswith(("filesystem://", "redis://", "rediss://", "memory://")):
    raise ImproperlyConfigured("CELERY_BROKER_URL must be filesystem://, memory:// or redis://")
BROKER_DIR = VAR_DIR / "broker"
if CELERY_BROKER_URL.startswith("filesystem://"):
    for _sub in ("out", "processed", "control"):
        (BROKER_DIR / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "out"),
        "data_folder_out": str(BROKER_DIR / "out"),
        "data_folder_processed": str(BROKER_DIR / "processed"),
        # Exchange tables; kombu's default is ./control, relative to whatever directory a
        # process happens to start in.
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
    }
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TIMEZONE = "UTC"

# --- Auth, API ------------------------------------------------------------------------------

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

# --- The web pages (web/) ----------------------------------------------------------------------

# A hub served over HTTPS sets SECURE_COOKIES=1, so that the session and CSRF cookies never
# travel in clear; off by default because the demo and the tests serve plain HTTP.
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("SECURE_COOKIES", False)
LOGIN_URL = "web:login"
LOGIN_REDIRECT_URL = "web:home"
LOGOUT_REDIRECT_URL = "web:landing"
# Whether people may open accounts themselves (as an operator or a submitter); admins create
# them in the admin either way.
WEB_SIGNUP_OPEN = env_bool("WEB_SIGNUP_OPEN", True)
# Budgets of the pages that take a password or send mail, per client address and (log in,
# password reset) per account aimed at: "<count>/<period>".
WEB_LOGIN_RATE = env_rate("WEB_LOGIN_RATE", "10/min")
WEB_SIGNUP_RATE = env_rate("WEB_SIGNUP_RATE", "5/hour")
WEB_PASSWORD_RESET_RATE = env_rate("WEB_PASSWORD_RESET_RATE", "5/hour")
# Budgets of a signed-in person's writes that make something lasting: enrolment keys made on
# the add-a-machine page, cashouts asked for; per client address and per account.
WEB_ENROL_RATE = env_rate("WEB_ENROL_RATE", "20/hour")
WEB_CASHOUT_RATE = env_rate("WEB_CASHOUT_RATE", "20/hour")
# Jobs submitted from the job form, per client address and per account (each holds credits and
# queues its tasks; the API's own submissions count against its per-key throttle).
WEB_JOB_SUBMIT_RATE = env_rate("WEB_JOB_SUBMIT_RATE", "30/min")
# Views of the public network page, per client address: anyone may read it, nobody may make
# the hub render it without end.
WEB_NETWORK_PAGE_RATE = env_rate("WEB_NETWORK_PAGE_RATE", "60/min")
# Operators' changes to the name they show the public, per address and per account.
WEB_PUBLIC_NAME_RATE = env_rate("WEB_PUBLIC_NAME_RATE", "20/hour")
# Mail (password resets, the admins' alerts). The console backend prints it (the demo);
# production names an SMTP backend and its EMAIL_HOST, EMAIL_PORT, EMAIL_HOST_USER,
# EMAIL_HOST_PASSWORD, EMAIL_USE_TLS.
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1, maximum=65535)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "ComputePool <noreply@localhost>")

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "people.auth.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_PARSER_CLASSES": [
        "core.api.parsers.SafeJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "core.api.pagination.DefaultPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_THROTTLE_CLASSES": ["core.api.throttling.PerKeyThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "per_key": env_str("THROTTLE_PER_KEY", "600/min"),
        "anon": env_str("THROTTLE_ANON", "60/min"),
    },
    "EXCEPTION_HANDLER": "core.api.exceptions.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "ComputePool API",
    "DESCRIPTION": "Submit jobs, run nodes, settle credits. Authenticate with "
    "`Authorization: Bearer <api key>`.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI's files from the pinned sidecar package, served by the hub: no CDN, so the
    # docs page works on a machine without internet.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "JobStateEnum": "jobs.models.JobState",
        "TaskStateEnum": "jobs.models.TaskState",
        "AttemptStateEnum": "jobs.models.AttemptState",
        "NodeStateEnum": "nodes.models.NodeState",
    },
}
# Request bodies above this are refused with 413 before they are parsed.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("MAX_REQUEST_BYTES", 2 * 1024 * 1024, minimum=1024)

# --- Static, media, i18n ---------------------------------------------------------------------

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns on every request without it
MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(VAR_DIR / "media")))
# Job outputs (jobs.artifact_storage): on local disk under MEDIA_ROOT, or with
# ARTIFACT_STORAGE=s3 in a bucket of any S3-compatible store, whose downloads are redirects to
# a URL signed for ARTIFACT_URL_EXPIRE_S. Its credentials come from boto3's usual chain
# (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or the machine's role).
ARTIFACT_STORAGE = env_choice("ARTIFACT_STORAGE", "local", ("local", "s3"))
ARTIFACT_URL_EXPIRE_S = env_int("ARTIFACT_URL_EXPIRE_S", 300, minimum=10, maximum=7 * 86400)
ARTIFACT_S3_ENDPOINT_URL = env_str("ARTIFACT_S3_ENDPOINT_URL", None)
if ARTIFACT_S3_ENDPOINT_URL and not ARTIFACT_S3_ENDPOINT_URL.startswith(("http://", "https://")):
    raise ImproperlyConfigured("ARTIFACT_S3_ENDPOINT_URL must be an http:// or https:// URL")
_artifacts = artifacts_storage(
    kind=ARTIFACT_STORAGE,
    bucket=env_str("ARTIFACT_S3_BUCKET", required=ARTIFACT_STORAGE == "s3"),
    # Unset: AWS itself; a MinIO, Ceph or R2 server names its own address.
    endpoint_url=ARTIFACT_S3_ENDPOINT_URL,
    region=env_str("ARTIFACT_S3_REGION", None),
    addressing_style=env_choice(
        "ARTIFACT_S3_ADDRESSING_STYLE", "auto", ("auto", "path", "virtual")
    ),
    prefix=env_str("ARTIFACT_S3_PREFIX", ""),
)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "artifacts": _artifacts,
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"  # pages and the admin show the viewer's zone (core.viewer_zone)
FORMAT_MODULE_PATH = ["core.formats"]
USE_I18N = True
USE_TZ = True

# --- Inference -------------------------------------------------------------------------------

# Where catalog models named by path (not uploaded) live; the hub serves them from here.
INFERENCE_MODELS_DIR = Path(env_str("INFERENCE_MODELS_DIR", str(VAR_DIR / "models")))
# Memory a node must have to spare beyond a model's need to be offered it.
INFERENCE_HEADROOM_MB = env_int("INFERENCE_HEADROOM_MB", 512, minimum=0)
# The relay: how long a request waits for a free node before 429; how long a node has to send
# its first token before the request moves to the next (failover); how long a silence after it
# ends the answer with an error; how long an agent's long-poll for requests is held.
INFERENCE_QUEUE_WAIT_S = env_int("INFERENCE_QUEUE_WAIT_S", 5, minimum=0)
INFERENCE_FIRST_TOKEN_S = env_int("INFERENCE_FIRST_TOKEN_S", 15, minimum=1)
INFERENCE_STALL_S = env_int("INFERENCE_STALL_S", 30, minimum=1)
INFERENCE_POLL_WAIT_S = env_int("INFERENCE_POLL_WAIT_S", 20, minimum=1)
# Threads (each with its database connection) for the relay's database work, per process.
INFERENCE_DB_THREADS = env_int("INFERENCE_DB_THREADS", 8, minimum=1)
# The most entries kept in one answer's Redis stream (the buffer between agent and client).
INFERENCE_STREAM_MAXLEN = env_int("INFERENCE_STREAM_MAXLEN", 2000, minimum=100)

# --- Ledger ----------------------------------------------------------------------------------

# How many events one sealing pass chains at most; the beat task runs again soon after.
LEDGER_SEAL_BATCH = env_int("LEDGER_SEAL_BATCH", 5000, minimum=1)
LEDGER_SEAL_INTERVAL_S = env_int("LEDGER_SEAL_INTERVAL_S", 10, minimum=1)
# The Ed25519 key each seal batch is signed with (base64 of the raw 32-byte private key), kept
# out of the database so that its owner cannot recompute the chain unnoticed. Unset: a key is
# created on first use in VAR_DIR/ledger_signing_key (mode 0600); every process that seals
# (the workers) must share one key, so production sets this variable.
LEDGER_SIGNING_KEY = env_ed25519("LEDGER_SIGNING_KEY")
# Public keys (base64, comma-separated) of retired ledger signing keys: batches they signed
# still verify after a rotation. The current key's public key is always trusted.
LEDGER_VERIFY_KEYS = env_ed25519_list("LEDGER_VERIFY_KEYS")
# The first seal that must carry a signature. 1 (every seal) on a log sealed only since
# signing began; a log sealed before sets it to the first seal signed after the upgrade.
LEDGER_SIGNED_FROM_SEQ = env_int("LEDGER_SIGNED_FROM_SEQ", 1, minimum=1)

# --- Metrics and alerts ------------------------------------------------------------------------

# How long a /metrics gauge that reads the database keeps its query's rows (per process): every
# scraper asking every few seconds costs one grouped query per period, not one per scrape.
METRICS_CACHE_S = env_int("METRICS_CACHE_S", 5, minimum=0, maximum=300)
# The Celery worker's and beat's own /metrics (a port each; unset: not served). In multiprocess
# mode (PROMETHEUS_MULTIPROC_DIR) the worker's port shows every pool process's figures.
WORKER_METRICS_PORT = env_int("WORKER_METRICS_PORT", 0, minimum=0, maximum=65535) or None
BEAT_METRICS_PORT = env_int("BEAT_METRICS_PORT", 0, minimum=0, maximum=65535) or None
# Admins' alerts (core.alerts): mailed to these addresses (unset: every active staff user and
# member of the admin role with an address), and POSTed as JSON to the webhook when it is set.
ALERT_EMAILS = env_list("ALERT_EMAILS", [])
ALERT_WEBHOOK_URL = env_str("ALERT_WEBHOOK_URL", None)
if ALERT_WEBHOOK_URL and not ALERT_WEBHOOK_URL.startswith(("http://", "https://")):
    raise ImproperlyConfigured("ALERT_WEBHOOK_URL must be an http:// or https:// URL")
ALERT_WEBHOOK_TIMEOUT_S = env_int("ALERT_WEBHOOK_TIMEOUT_S", 10, minimum=1, maximum=120)
# A lease reaper run that returns at least this many leases at once tells the admins.
ALERT_LEASES_LOST_AT = env_int("ALERT_LEASES_LOST_AT", 100, minimum=1)
# When beat runs verify_ledger each night (UTC, HH:MM); a failure tells the admins.
LEDGER_VERIFY_AT = env_str("LEDGER_VERIFY_AT", "03:30")
try:
    _hour, _minute = (int(part) for part in LEDGER_VERIFY_AT.split(":"))
    if not (0 <= _hour < 24 and 0 <= _minute < 60):
        raise ValueError
except ValueError:
    raise ImproperlyConfigured(f"LEDGER_VERIFY_AT={LEDGER_VERIFY_AT!r} is not HH:MM") from None
LEDGER_VERIFY_HOUR, LEDGER_VERIFY_MINUTE = _hour, _minute
# Where the file-based mail backend (django.core.mail.backends.filebased.EmailBackend) writes.
EMAIL_FILE_PATH = env_str("EMAIL_FILE_PATH", str(VAR_DIR / "mail"))
SERVER_EMAIL = DEFAULT_FROM_EMAIL

# --- Logging ---------------------------------------------------------------------------------

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}

# --- Nodes -----------------------------------------------------------------------------------

# The agent is told to beat this often; a node is degraded after this many missed beats and
# offline after that many (plus the grace, which absorbs network jitter and the agent's timing).
NODE_HEARTBEAT_INTERVAL_S = env_int("NODE_HEARTBEAT_INTERVAL_S", 30, minimum=1, maximum=3600)
NODE_HEARTBEAT_GRACE_S = env_int("NODE_HEARTBEAT_GRACE_S", 5, minimum=0, maximum=3600)
NODE_DEGRADED_AFTER_MISSED = env_int("NODE_DEGRADED_AFTER_MISSED", 1, minimum=1, maximum=100)
NODE_OFFLINE_AFTER_MISSED = env_int("NODE_OFFLINE_AFTER_MISSED", 3, minimum=1, maximum=100)
if NODE_OFFLINE_AFTER_MISSED < NODE_DEGRADED_AFTER_MISSED:
    raise ImproperlyConfigured(
        f"NODE_OFFLINE_AFTER_MISSED={NODE_OFFLINE_AFTER_MISSED} must not be below "
        f"NODE_DEGRADED_AFTER_MISSED={NODE_DEGRADED_AFTER_MISSED}"
    )
NODE_REAPER_INTERVAL_S = env_int("NODE_REAPER_INTERVAL_S", 10, minimum=1, maximum=3600)
# Connections the node reaper's batches run on at once (PostgreSQL): its work is the database's.
NODE_REAPER_WORKERS = env_int("NODE_REAPER_WORKERS", 2, minimum=1, maximum=16)
NODE_MAX_PER_OPERATOR = env_int("NODE_MAX_PER_OPERATOR", 1000, minimum=1)
# Reliability: a Beta posterior whose evidence halves every half-life (see docs/nodes.md).
NODE_RELIABILITY_HALF_LIFE_H = env_int("NODE_RELIABILITY_HALF_LIFE_H", 168, minimum=1)
NODE_RELIABILITY_DECAY_INTERVAL_S = env_int("NODE_RELIABILITY_DECAY_INTERVAL_S", 3600, minimum=60)
NODE_COOLDOWN_AFTER_FAILURES = env_int("NODE_COOLDOWN_AFTER_FAILURES", 3, minimum=1)
NODE_COOLDOWN_S = env_int("NODE_COOLDOWN_S", 900, minimum=0)
# Disqualification thresholds.
NODE_MAX_ERROR_RATE_PCT = env_int("NODE_MAX_ERROR_RATE_PCT", 5, minimum=0, maximum=100)
NODE_ERROR_RATE_MIN_SAMPLE = env_int("NODE_ERROR_RATE_MIN_SAMPLE", 20, minimum=1)
NODE_THERMAL_EVENTS_MAX = env_int("NODE_THERMAL_EVENTS_MAX", 3, minimum=1)
NODE_THERMAL_WINDOW_H = env_int("NODE_THERMAL_WINDOW_H", 24, minimum=1)
# Hardware benchmarks (nodes.benchmarks): issued at registration, on a hardware change, and
# again after this long; a node without a passed one is retried after NODE_BENCHMARK_RETRY_S.
NODE_BENCHMARK_INTERVAL_H = env_int("NODE_BENCHMARK_INTERVAL_H", 168, minimum=1)
NODE_BENCHMARK_RETRY_S = env_int("NODE_BENCHMARK_RETRY_S", 3600, minimum=60)
NODE_BENCHMARK_DEADLINE_S = env_int("NODE_BENCHMARK_DEADLINE_S", 1800, minimum=60)
NODE_BENCHMARK_PASS_INTERVAL_S = env_int("NODE_BENCHMARK_PASS_INTERVAL_S", 300, minimum=10)
# The work each benchmark asks for (agent.benchmark): sized to take a few seconds anywhere.
NODE_BENCHMARK_CPU_MS = env_int("NODE_BENCHMARK_CPU_MS", 1000, minimum=100, maximum=30000)
NODE_BENCHMARK_MATMUL_N = env_int("NODE_BENCHMARK_MATMUL_N", 1024, minimum=64, maximum=8192)
NODE_BENCHMARK_STREAM_MB = env_int("NODE_BENCHMARK_STREAM_MB", 256, minimum=8, maximum=4096)
NODE_BENCHMARK_GPU_ITERATIONS = env_int(
    "NODE_BENCHMARK_GPU_ITERATIONS", 32768, minimum=1, maximum=87338
)
# The hub's Ed25519 signing key (base64 of the raw 32-byte private key). Unset: a key is created
# on first use in VAR_DIR/hub_signing_key (mode 0600) and kept there. Every hub process behind a
# load balancer must share one key, so production sets this variable.
HUB_SIGNING_KEY = env_ed25519("HUB_SIGNING_KEY")

# --- Jobs ------------------------------------------------------------------------------------

# A lease lasts three heartbeats by default: one late heartbeat does not lose the task.
JOB_LEASE_S = env_int("JOB_LEASE_S", 3 * NODE_HEARTBEAT_INTERVAL_S, minimum=5)
JOB_REAPER_INTERVAL_S = env_int("JOB_REAPER_INTERVAL_S", 10, minimum=1)
JOB_RETRY_BACKOFF_S = env_int("JOB_RETRY_BACKOFF_S", 5, minimum=0)
JOB_RETRY_BACKOFF_MAX_S = env_int("JOB_RETRY_BACKOFF_MAX_S", 300, minimum=0)
# A node that lost a task is passed over for it until the task has waited this long (after its
# backoff) for another node.
JOB_EXCLUSION_GRACE_S = env_int("JOB_EXCLUSION_GRACE_S", 120, minimum=0)
# Trust is earned (nodes.trust): a node is trusted once its reliability is at least this and
# this many of its results agreed with another operator's node (jobs.verification). Untrusted
# nodes get only low-priority work that is not a task's last attempt, or verified work.
JOB_TRUSTED_RELIABILITY = env_int("JOB_TRUSTED_RELIABILITY_PCT", 40, minimum=0, maximum=100) / 100
JOB_TRUST_AFTER_VERIFIED = env_int("JOB_TRUST_AFTER_VERIFIED", 5, minimum=0)
# Spot-checks (nodes.trust.spot_check_share): the share of an untrusted node's results
# replicated on a trusted node of another operator, which no node's share passes (0: no
# spot-checks), and the least share of a trusted node's (its share is 1 − reliability).
JOB_SPOTCHECK_MAX_PCT = env_int("JOB_SPOTCHECK_MAX_PCT", 100, minimum=0, maximum=100)
JOB_SPOTCHECK_MIN_PCT = env_int("JOB_SPOTCHECK_MIN_PCT", 2, minimum=0, maximum=100)
# A job may ask each slice to run on up to this many nodes (verification: replicas).
JOB_MAX_REPLICAS = env_int("JOB_MAX_REPLICAS", 5, minimum=2, maximum=16)
# This many rejected results within the window quarantine a node.
JOB_REJECTIONS_TO_QUARANTINE = env_int("JOB_REJECTIONS_TO_QUARANTINE", 3, minimum=1)
JOB_REJECTION_WINDOW_H = env_int("JOB_REJECTION_WINDOW_H", 24, minimum=1)
JOB_MAX_LOG_BYTES = env_int("JOB_MAX_LOG_BYTES", 8 * 1024 * 1024, minimum=1024)
JOB_MAX_ARTIFACT_BYTES = env_int("JOB_MAX_ARTIFACT_BYTES", 256 * 1024 * 1024, minimum=1024)
# The most one job may hold (credit minor units): price ceiling × timeout × slices.
JOB_MAX_COST = env_int("JOB_MAX_COST", 10**12, minimum=1)
# How long a job's outputs are kept after it ends, unless its submitter asked for another
# period (at most the maximum); then beat deletes them, a batch of jobs per run
# (jobs.retention).
JOB_ARTIFACT_RETENTION_MAX_DAYS = env_int(
    "JOB_ARTIFACT_RETENTION_MAX_DAYS", 365, minimum=1, maximum=36_500
)
JOB_ARTIFACT_RETENTION_DAYS = env_int(
    "JOB_ARTIFACT_RETENTION_DAYS", 30, minimum=1, maximum=JOB_ARTIFACT_RETENTION_MAX_DAYS
)
JOB_ARTIFACT_EXPIRY_INTERVAL_S = env_int("JOB_ARTIFACT_EXPIRY_INTERVAL_S", 600, minimum=10)
JOB_ARTIFACT_EXPIRY_BATCH = env_int("JOB_ARTIFACT_EXPIRY_BATCH", 200, minimum=1)

# --- Completion webhooks ----------------------------------------------------------------------

# Deliveries go only to public addresses; on, loopback and private ones too (a receiver on the
# hub's own network). Link-local addresses (cloud metadata) stay refused either way.
WEBHOOK_ALLOW_PRIVATE = env_bool("WEBHOOK_ALLOW_PRIVATE", False)
# How long a delivery waits to connect and for each read of the answer.
WEBHOOK_TIMEOUT_S = env_int("WEBHOOK_TIMEOUT_S", 10, minimum=1, maximum=60)
# Attempts per delivery (and per redelivery) before it is given up as failed.
WEBHOOK_MAX_ATTEMPTS = env_int("WEBHOOK_MAX_ATTEMPTS", 8, minimum=1, maximum=30)
# Backoff after failed attempt n: base × 2^(n-1) seconds, at most the maximum.
WEBHOOK_BACKOFF_S = env_int("WEBHOOK_BACKOFF_S", 30, minimum=1, maximum=3600)
WEBHOOK_BACKOFF_MAX_S = env_int("WEBHOOK_BACKOFF_MAX_S", 3600, minimum=1, maximum=86400)
# After a rotation, deliveries are signed with the previous secret too for this long.
WEBHOOK_SECRET_OVERLAP_S = env_int("WEBHOOK_SECRET_OVERLAP_S", 24 * 3600, minimum=0)
# Beat sends again what is due and was never sent (its message lost with a broker outage).
WEBHOOK_SWEEP_INTERVAL_S = env_int("WEBHOOK_SWEEP_INTERVAL_S", 60, minimum=1)

# --- Economy ---------------------------------------------------------------------------------

# The shared secret a payment provider signs its webhooks with (HMAC-SHA256 of "<t>.<body>").
# Unset: the webhook answers 503 and credits enter only through finance grants.
PAYMENT_WEBHOOK_SECRET = env_str("PAYMENT_WEBHOOK_SECRET", None)
# A signed delivery older (or newer) than this is refused, so a captured one cannot be replayed.
PAYMENT_WEBHOOK_TOLERANCE_S = env_int("PAYMENT_WEBHOOK_TOLERANCE_S", 300, minimum=1, maximum=3600)
# Bounds a (region, tier) spot price gets when the market first prices it, as a percentage of
# its starting price (base × tier × region); admins change them per row afterwards.
ECONOMY_SPOT_MIN_PCT = env_int("ECONOMY_SPOT_MIN_PCT", 50, minimum=1, maximum=100)
ECONOMY_SPOT_MAX_PCT = env_int("ECONOMY_SPOT_MAX_PCT", 300, minimum=100, maximum=10_000)
# The market: how often beat reprices, by how much per step, and the least time between moves.
MARKET_REPRICE_INTERVAL_S = env_int("MARKET_REPRICE_INTERVAL_S", 60, minimum=1)
MARKET_STEP_PCT = env_int("MARKET_STEP_PCT", 10, minimum=1, maximum=50)
MARKET_MIN_INTERVAL_S = env_int("MARKET_MIN_INTERVAL_S", 50, minimum=0)
