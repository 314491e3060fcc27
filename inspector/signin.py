"""One-time sign-in links: the simplest first sign-in for a person. `compozy serve` prints one and
`compozy signin-link` makes another; opening it and pressing "Sign in" starts a two-week session."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from .models import SigninLink

LINK_LIFETIME = timedelta(hours=24)
OPERATOR = "operator"


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_link(base_url: str) -> str:
    token = secrets.token_urlsafe(32)
    now = timezone.now()
    SigninLink.objects.filter(expires_at__lt=now).delete()
    SigninLink.objects.create(token_hash=_digest(token), created_at=now, expires_at=now + LINK_LIFETIME)
    return f"{base_url.rstrip('/')}/inspector/signin?token={token}"


def is_usable(token: str) -> bool:
    now = timezone.now()
    return SigninLink.objects.filter(token_hash=_digest(token), used_at__isnull=True, expires_at__gte=now).exists()


def redeem(token: str):  # noqa: ANN201 - returns the operator user or None
    """Spend the token (once, even when two tabs race) and return the operator user to sign in."""
    now = timezone.now()
    with transaction.atomic():
        spent = SigninLink.objects.filter(token_hash=_digest(token), used_at__isnull=True,
                                          expires_at__gte=now).update(used_at=now)
        if spent != 1:
            return None
        user, created = get_user_model().objects.get_or_create(username=OPERATOR)
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
    return user
