"""The LLM providers (`base.py`: the protocol; `local.py`, `openai_http.py`: the two kinds) and the embedders
(`embeddings.py`). The configured provider is chosen here, above the protocol and both kinds, as `get_embedder`
is chosen in `embeddings.py` beside its kinds: nothing imports back up, so there is no cycle through base.py."""

from __future__ import annotations

from typing import Any

from .base import Provider


def get_provider(config: Any) -> Provider:
    from .local import LocalProvider
    from .openai_http import OpenAICompatibleProvider

    provider_config = config.memory.provider
    if provider_config.kind == "openai":
        return OpenAICompatibleProvider(provider_config)
    return LocalProvider()
