"""The test run never opens the real ~/.compozy: Django's settings are loaded only after tests/conftest.py has
pointed COMPOZY_HOME at a temp dir (pytest-django used to import them first, from pyproject's ini). Under xdist a
worker may load them with the controller's temp home, which it inherits; that is still a test home."""

from __future__ import annotations

import re
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


def test_no_benchmark_imports_the_test_conftest():
    # Importing tests.conftest points COMPOZY_HOME at its own temp dir and starts Django there: a benchmark that
    # did so would write its own calls into a database its server never reads (the soak's reindex jobs did).
    repo = Path(__file__).resolve().parent.parent
    imports = re.compile(r"^\s*(from tests\.conftest import|from tests import conftest|import tests\.conftest)", re.M)
    offending = [path.name for path in sorted((repo / "bench").glob("*.py")) if imports.search(path.read_text())]
    assert offending == []
