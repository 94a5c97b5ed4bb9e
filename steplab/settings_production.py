"""Production settings: the base settings plus HTTPS-only cookies, HSTS and redirects.

``DJANGO_SETTINGS_MODULE=steplab.settings_production manage.py check --deploy`` is clean (tested).
"""
from .settings import *  # noqa: F403
from .settings import env

DEBUG = False
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", True)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Secure (HTTPS-only) cookies; only a loopback benchmark over plain HTTP turns them off.
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", True)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", True)
SECURE_HSTS_SECONDS = 31_536_000
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
STORAGES["staticfiles"] = {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"}  # noqa: F405
