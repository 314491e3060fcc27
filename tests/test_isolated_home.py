"""The test run never opens the real ~/.compozy: Django's settings are loaded only after tests/conftest.py has
pointed COMPOZY_HOME at a temp dir (pytest-django used to import them first, from pyproject's ini). Under xdist a
worker may load them with the controller's temp home, which it inherits; that is still a test home."""

from __future__ import annotations

import tempfile
from pathlib import Path

from django.conf import settings


def test_the_settings_home_is_a_temp_test_home_not_the_users():
    home = Path(settings.COMPOZY_HOME)
    assert home.name.startswith("compozy-test-home-") and home.parent == Path(tempfile.gettempdir())
    # The settings wrote their secret key into the home they opened (the database name cannot say: pytest-django
    # swaps in the test database once a django_db test ran before this one).
    assert (home / "secret_key").is_file()
    assert not home.is_relative_to(Path.home())
