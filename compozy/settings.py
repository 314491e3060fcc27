"""Django settings. Everything user-facing is configured in config.toml (see compozy/config.py); this module
only wires Django to $COMPOZY_HOME."""

from __future__ import annotations

import os
from pathlib import Path

from compozy.config import compozy_home
from compozy.home import secret_key, secure_home

BASE_DIR = Path(__file__).resolve().parent.parent
COMPOZY_HOME = compozy_home()
# 0700 home, 0600 database (so its WAL and SHM are too), an existing looser home tightened: see compozy/home.py.
secure_home(COMPOZY_HOME)

# A per-home secret, created on first use with mode 0600, so sessions and CSRF survive restarts.
SECRET_KEY = os.environ.get("COMPOZY_SECRET_KEY") or secret_key(COMPOZY_HOME)

DEBUG = os.environ.get("COMPOZY_DEBUG", "") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]"]

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # memory before django_q: its `qcluster` command wraps django_q's with bootstrap (migrate, replay).
    "memory",
    "inspector",
    "rest_framework",
    "drf_spectacular",
    "django_q",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Static files come from the app itself (the inspector works offline), found in place without collectstatic.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "compozy.urls"
WSGI_APPLICATION = "compozy.wsgi.application"

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
            ]
        },
    }
]

# WAL so readers never block the writer; IMMEDIATE so concurrent writers queue on the busy timeout instead of
# failing with "database is locked" when a read transaction upgrades (a deferred transaction that reads, then
# writes, cannot wait for the lock: SQLite answers SQLITE_BUSY at once).
def _read_only(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


# A home on a read-only filesystem (a read-only mount, a snapshot): SQLite cannot open a WAL database there at all
# (it needs its -shm file), so it is opened immutable. Reads work, from the state the last writer checkpointed
# (closing the last connection checkpoints the WAL); every write fails as "readonly database", which surfaces as
# memory.storage.read_only.
HOME_READ_ONLY = _read_only(COMPOZY_HOME)
_DATABASE_FILE = COMPOZY_HOME / "compozy.db"

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        # Django opens SQLite with uri=True, so the immutable flag is read from the name.
        "NAME": f"file:{_DATABASE_FILE}?immutable=1" if HOME_READ_ONLY else _DATABASE_FILE,
        "OPTIONS": {
            "init_command": ("PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL;PRAGMA busy_timeout=5000;"
                         "PRAGMA mmap_size=268435456;PRAGMA cache_size=-32768;"),
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
        },
        "TEST": {"NAME": None},
        # Keep each server thread's connection: opening a SQLite connection and running its PRAGMAs per request
        # would cost more than most requests' own work.
        "CONN_MAX_AGE": None,
        "CONN_HEALTH_CHECKS": True,
    }
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"


def _machine_time_zone() -> str:
    """The zone of the machine the server runs on (the user's own, for a local service): $COMPOZY_TIME_ZONE when
    set, else $TZ when it names a zone, else /etc/localtime's target, else /etc/timezone, else UTC. Read here
    because Django, once these settings are loaded, pins the process to TIME_ZONE (it sets TZ and calls tzset),
    after which the machine's zone is lost, also to the processes this one starts (the gunicorn workers)."""
    from contextlib import suppress
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    candidates = [os.environ.get("COMPOZY_TIME_ZONE", ""), os.environ.get("TZ", "").lstrip(":")]
    with suppress(OSError):
        candidates.append(str(Path("/etc/localtime").resolve()).partition("/zoneinfo/")[2])
    with suppress(OSError):
        candidates.append(Path("/etc/timezone").read_text().strip())
    for name in filter(None, candidates):
        with suppress(ZoneInfoNotFoundError, ValueError):
            ZoneInfo(name)
            return name
    return "UTC"


# The inspector shows times in this zone (the server's local time, which is the user's machine here). Exported
# so that the processes `compozy serve` starts, which inherit TZ=UTC from Django, show the same zone.
DISPLAY_TIME_ZONE = os.environ["COMPOZY_TIME_ZONE"] = _machine_time_zone()
LANGUAGE_CODE = "en-us"
USE_I18N = False

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
WHITENOISE_USE_FINDERS = True

# The inspector's sessions: a signed-in operator stays signed in for two weeks; cookies are never sent to scripts.
LOGIN_URL = "/inspector/signin"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"

Q_CLUSTER = {
    "name": "compozy",
    "orm": "default",
    "workers": 1,
    "timeout": 120,
    "retry": 180,
    "max_attempts": 3,
    "catch_up": False,
    "sync": os.environ.get("COMPOZY_Q_SYNC", "") == "1",
}

REST_FRAMEWORK = {
    "DEFAULT_RENDERER_CLASSES": ["memory.api.renderers.SafeJSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["memory.api.parsers.SafeJSONParser"],
    "DEFAULT_AUTHENTICATION_CLASSES": ["memory.api.auth.BearerOrSocketAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "EXCEPTION_HANDLER": "memory.api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
}
def _product_version() -> str:
    from compozy.cli import version

    return version()


SPECTACULAR_SETTINGS = {
    "TITLE": "Compozy Memory API",
    "DESCRIPTION": ("Durable, auditable memory for AI coding agents. "
                    "Bodies are the documents the CLI prints with -o json."),
    "VERSION": _product_version(),
    # 3.1: its schemas are JSON Schema 2020-12, the dialect pydantic writes (`{"type": "null"}` and all).
    "OAS_VERSION": "3.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema holds no memory, but every /api route over TCP needs the token, the schema included: one rule
    # with no exception to remember. Over the 0600 socket it is open like every route.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "memory.api.schema.add_components"],
}

# Request bodies over 1 MiB are refused (memory.validation, 413) before they are parsed.
DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024

# A refused request (a Host header outside ALLOWED_HOSTS, say) is one log line: Django logs these with the whole
# traceback of a check that did its job. The filter sits on each logger Django uses, so it also holds for handlers
# added later (pytest's caplog).
_ONE_LINE = ["one_line"]
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"one_line": {"()": "compozy.logfilters.WithoutTraceback"}},
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {f"django.security.{name}": {"filters": _ONE_LINE} for name in (
        "DisallowedHost", "SuspiciousOperation", "RequestDataTooBig", "TooManyFieldsSent", "TooManyFilesSent",
        "DisallowedRedirect", "SuspiciousFileOperation")},
    "root": {"handlers": ["console"], "level": os.environ.get("COMPOZY_LOG_LEVEL", "WARNING")},
}
