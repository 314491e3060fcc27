"""The decision rules' test doubles: an in-memory catalog view and a candidate write, no database, no disk."""

from __future__ import annotations

from memory.domain.catalog_view import Target
from memory.domain.document import body_fingerprint
from memory.domain.enums import Origin, RequestKind, Scope
from memory.domain.models import Candidate, Frontmatter, ScopeRef, sha256_text
from memory.domain.names import entity_key
from memory.domain.text import overlap_words

REF = ScopeRef(scope=Scope.WORKSPACE, workspace_id="01HXJ9YR4Q0000000000000000")


class FakeView:
    def __init__(self, *targets: tuple[str, str, str, str]) -> None:
        self.targets = [Target(f, n, d, b, sha256_text(body_fingerprint(b))) for f, n, d, b in targets]

    def by_filename(self, filename):
        return next((t for t in self.targets if t.filename == filename), None)

    def by_body_key(self, body_key):
        return [t for t in self.targets if t.body_key == body_key]

    def by_entity(self, entity, memory_type):
        return [t for t in self.targets
                if t.filename.startswith(memory_type + "_")
                and entity_key(t.filename.split("_", 1)[1].removesuffix(".md")) == entity]

    def overlapping(self, memory_type, words, limit):
        wanted = set(words)
        return [t for t in self.targets if t.filename.startswith(memory_type + "_")
                and wanted & overlap_words(" ".join([t.name, t.description, t.body]))][:limit]


def candidate(name="Runtime Docs", body="Docs are built with fumadocs.", *, origin=Origin.CLI, kind=RequestKind.WRITE,
              filename=None, named=False, description="Where docs live"):
    front = Frontmatter(name=name, description=description, type="project", scope="workspace")
    return Candidate(ref=REF, origin=origin, kind=kind, frontmatter=front if kind is RequestKind.WRITE else None,
                     body=body, target_filename=filename or "project_runtime_docs.md", named_target=named)


# Two memories that overlap a candidate() equally: the rules alone cannot choose between them.
AMBIGUOUS = FakeView(
    ("project_a.md", "A", "d", "fumadocs builds docs quickly"),
    ("project_b.md", "B", "d", "docs built with fumadocs nightly"),
)
