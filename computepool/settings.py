"""The one settings module, driven by the environment.

With no DATABASE_URL and no CELERY_BROKER_URL the hub runs on an embedded SQLite file and a
filesystem broker under var/, so a checkout runs with no services. Production, CI and the
benchmarks set both to PostgreSQL and Redis. Every variable is read through computepool.env,
which names the variable when its value is unusable.
"""

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from computepool.env import env_bool, env_choice, env_int, env_list, env_str

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
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "django_celery_beat",
    "computepool",
    "ledger",
    "people",
    "nodes",
    "jobs",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
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
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------------

_default_sqlite = f"sqlite:///{VAR_DIR / 'computepool.sqlite3'}"
DATABASE_URL = env_str("DATABASE_URL", _default_sqlite)
try:
    _db = dj_database_url.parse(DATABASE_URL, conn_max_age=env_int("CONN_MAX_AGE", 60, minimum=0))
except Exception as exc:  # the library raises several types for one meaning: unusable URL
    raise ImproperlyConfigured(f"DATABASE_URL is not a usable database URL: {exc}") from None
if _db.get("ENGINE") not in ("django.db.backends.sqlite3", "django.db.backends.postgresql"):
    raise ImproperlyConfigured("DATABASE_URL must be a sqlite:// or postgres:// URL")
if _db["ENGINE"] == "django.db.backends.sqlite3":
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    # The hub, the worker and beat write one file from several processes: WAL lets readers
    # proceed beside the writer, IMMEDIATE takes the write lock at BEGIN (so two writers queue
    # instead of deadlocking on lock upgrade), and the timeout makes them wait, not fail.
    _db["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    _db["CONN_MAX_AGE"] = 0
else:
    _db.setdefault("OPTIONS", {})
    _db["CONN_HEALTH_CHECKS"] = True
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
    for _sub in ("out", "processed"):
        (BROKER_DIR / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "out"),
        "data_folder_out": str(BROKER_DIR / "out"),
        "data_folder_processed": str(BROKER_DIR / "processed"),
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
        "rest_framework.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "computepool.api.pagination.DefaultPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_THROTTLE_CLASSES": ["computepool.api.throttling.PerKeyThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "per_key": env_str("THROTTLE_PER_KEY", "600/min"),
        "anon": env_str("THROTTLE_ANON", "60/min"),
    },
    "EXCEPTION_HANDLER": "computepool.api.exceptions.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "ComputePool API",
    "DESCRIPTION": "Submit jobs, run nodes, settle credits. Authenticate with "
    "`Authorization: Bearer <api key>`.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
}
# Request bodies above this are refused with 413 before they are parsed.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("MAX_REQUEST_BYTES", 2 * 1024 * 1024, minimum=1024)

# --- Static, media, i18n ---------------------------------------------------------------------

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns on every request without it
MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(VAR_DIR / "media")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# --- Ledger ----------------------------------------------------------------------------------

# How many events one sealing pass chains at most; the beat task runs again soon after.
LEDGER_SEAL_BATCH = env_int("LEDGER_SEAL_BATCH", 5000, minimum=1)
LEDGER_SEAL_INTERVAL_S = env_int("LEDGER_SEAL_INTERVAL_S", 10, minimum=1)

# --- Logging ---------------------------------------------------------------------------------

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
