"""One registry for every agent tool. Reserved names (ours, and the raw verbs no surface may offer) cannot be
claimed by an additional provider: such a registration is refused and recorded as memory.provider.collision."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memory.domain.errors import ProviderCollision

PREFIX = "compozy__memory"
# No surface offers a raw read, write, edit or delete tool, a history tool, or a consolidate verb.
FORBIDDEN_NAMES = frozenset({
    f"{PREFIX}_read", f"{PREFIX}_write", f"{PREFIX}_edit", f"{PREFIX}_delete", f"{PREFIX}_history",
    f"{PREFIX}_consolidate", "consolidate",
})


@dataclass(frozen=True)
class ToolSpec:
    name: str
    toolset: str
    description: str
    fn: Callable[..., Any]
    provider: str = "compozy"
    # Compozy's own tools come built from their verb's declaration (schemas and annotations included).
    tool: Any = None


@dataclass
class ToolRegistry:
    tools: dict[str, ToolSpec] = field(default_factory=dict)

    def reserved(self, name: str) -> bool:
        return name in FORBIDDEN_NAMES or name in self.tools or name.startswith(PREFIX)

    def add(self, spec: ToolSpec) -> None:
        """Compozy's own tools; their names must never be forbidden ones (a test enumerates them)."""
        if spec.name in FORBIDDEN_NAMES:
            raise ValueError(f"{spec.name} is a forbidden tool name")
        self.tools[spec.name] = spec

    def register_provider_tool(self, spec: ToolSpec) -> None:
        if self.reserved(spec.name):
            from memory.services.events import provider_collision_record

            provider_collision_record(tool=spec.name, provider=spec.provider)
            raise ProviderCollision(
                f"Provider {spec.provider!r} cannot register {spec.name!r}: the name is reserved.",
                details={"tool": spec.name, "provider": spec.provider},
            )
        self.tools[spec.name] = spec

    def in_toolset(self, toolset: str) -> list[ToolSpec]:
        return [spec for spec in self.tools.values() if spec.toolset == toolset]
