"""Endpoint API keys at rest: Fernet (AES-128-CBC with HMAC-SHA256, from ``cryptography``) under a key derived
from ``SECRET_KEY`` by HKDF, so the database alone does not give the keys away. Keys encrypted under an older
secret still open while it is listed in ``SECRET_KEY_FALLBACKS``."""
from __future__ import annotations

import base64

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

_INFO = b"steplab endpoint api keys"


class KeyUnreadable(Exception):
    """The stored key was encrypted under a secret no longer configured (``SECRET_KEY`` changed)."""


def _fernet(secret: str) -> Fernet:
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(secret.encode())
    return Fernet(base64.urlsafe_b64encode(derived))


def _keys() -> MultiFernet:
    secrets = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    return MultiFernet([_fernet(secret) for secret in secrets])


def encrypt(plain: str) -> str:
    return _keys().encrypt(plain.encode()).decode() if plain else ""


def decrypt(token: str) -> str:
    if not token:
        return ""
    try:
        return _keys().decrypt(token.encode()).decode()
    except InvalidToken:
        raise KeyUnreadable("The endpoint's API key cannot be read (SECRET_KEY changed): register it again.") from None
