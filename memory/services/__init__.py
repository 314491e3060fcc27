"""The one API every surface calls: a module per noun, plus the domain vocabulary a surface needs to build inputs
and render errors, re-exported here so that surfaces such as the inspector import `memory.services` only."""

from memory.domain.enums import AgentTier, MemoryType, Op, Origin, Scope
from memory.domain.errors import CompozyError, Rejected
from memory.domain.text import UNPRINTABLE, escape_control_characters

__all__ = ["UNPRINTABLE", "AgentTier", "CompozyError", "MemoryType", "Op", "Origin", "Rejected", "Scope",
           "escape_control_characters"]
