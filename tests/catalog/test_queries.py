"""The rules' catalog look-ups: `prefetch` answers by_filename, by_body_key and by_entity in one statement with
exactly what each look-up answers alone, once each."""

from __future__ import annotations

import pytest

from memory.catalog.queries import RootCatalogView
from memory.domain.document import body_fingerprint
from memory.domain.models import sha256_text
from tests import helpers as h

pytestmark = pytest.mark.django_db

BODY = "The staging database runs on port 5433."


def test_prefetch_answers_the_three_look_ups_as_they_answer_alone(home, workspace_dir):
    h.write(workspace_dir, name="Staging Database", scope="global", content=BODY)
    h.write(workspace_dir, name="Database Staging", scope="global", content=BODY + " Twice.")  # the same entity
    h.write(workspace_dir, name="Database Staging Notes", scope="global", type="user", content=BODY)  # same body
    h.write(workspace_dir, name="Coffee", scope="global", content="The team drinks espresso.")
    key = sha256_text(body_fingerprint(BODY))
    asks = [("project_staging_database.md", key, "database_staging", "project"),
            ("project_coffee.md", key, "coffee", "user"),
            ("project_missing.md", "0" * 64, "nothing_here", "project")]
    for filename, body_key, entity, memory_type in asks:
        alone = RootCatalogView("global")
        expected = (alone.by_filename(filename), alone.by_body_key(body_key), alone.by_entity(entity, memory_type))
        view = RootCatalogView("global")
        view.prefetch(filename, body_key, entity, memory_type)
        assert view._prefetched  # answered from the prefetch, not asked again
        got = (view.by_filename(filename), view.by_body_key(body_key), view.by_entity(entity, memory_type))
        assert got == expected and not view._prefetched
        # Each prefetched answer is given once; asked again (or with other arguments) the view asks the catalog.
        assert view.by_body_key(body_key) == expected[1] and view.by_filename("project_other.md") is None
    # The asks above found something: the first its file, its body's twins and its entity's slot.
    first = RootCatalogView("global")
    assert first.by_filename(asks[0][0]) is not None
    assert first.by_body_key(key) and first.by_entity("database_staging", "project")
