from __future__ import annotations

from django.db import models


class SigninLink(models.Model):
    """A one-time sign-in link for the inspector. Only the token's sha256 is stored: a copy of the database
    never signs anyone in."""

    token_hash = models.CharField(primary_key=True, max_length=64)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True)

    class Meta:
        db_table = "inspector_signin_links"
