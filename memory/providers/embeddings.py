"""Embedders: text in, unit-length float32 vectors out. Recall's semantic candidates and the catalog's stored
vectors both come from the one configured embedder.

- `local` (the default): the static WordLlama model whose weights ship inside the `wordllama` wheel. It loads from
  the installed package folder with downloads disabled, so nothing is fetched at run time.
- `openai`: an OpenAI-compatible `POST {base_url}/embeddings` (for example a local Ollama or llama.cpp server).
- `none`: no vectors; recall is lexical only.

Every failure (a model that does not load, a timeout, an answer that is not a list of finite vectors of one size)
is an `EmbedderError`. Callers degrade: a write stores its chunk without a vector (health reports it, reindex
fills it in) and a search answers from the lexical lists with a warning.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import os
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import numpy as np

logger = logging.getLogger(__name__)

# A token set's element type: token ids below 65,536 (WordLlama's vocabulary has 32,000).
TOKEN_DTYPE = np.uint16

# How stored passages are weighed, in the model id: vectors made otherwise are another model's, which health reports
# and a reindex replaces.
PASSAGE_WEIGHING = "+zipf"


def zipf_weights(ids: np.ndarray) -> np.ndarray:
    """Each token's weight in a passage's mean: the log of its rank in the vocabulary, log(1 + id). WordLlama's
    tokenizer numbers its tokens roughly by frequency (" the" is 278, " returns" 3,639), so a token's id is a cheap
    stand-in for how common it is, and Zipf's law makes the log of that rank the weight an information measure would
    give it (model2vec weighs its static vectors so). A long passage's plain mean is dominated by its many frequent
    tokens and lands near every other long passage; weighed, the rarer words that say what it is about count more.
    Questions stay plain means: weighing them too cost the technical check 3 points of the semantic list's R@5
    (docs/benchmarks.md).

    The stand-in is rough at the end of the vocabulary: single characters (punctuation, digits, letters) are listed
    there, after every merge, so "." and "2" weigh as much as the rarest words. Ranking them by their place in that
    block instead (as common as they are) was measured and did worse on chat and the Go docs (docs/benchmarks.md),
    so the id stays the rank."""
    return np.log1p(ids.astype(np.float32))


class EmbedderError(Exception):
    """The embedder failed, timed out or answered something unusable."""


class Embedder(Protocol):
    kind: str
    # Stored beside every vector: vectors from another model are not comparable and are reported by health.
    model_id: str

    def embed(self, texts: list[str]) -> np.ndarray:
        """One unit-length float32 row per text (a text with nothing to embed gives a zero row)."""
        ...


def normalized(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0).astype(np.float32, copy=False)


class LocalEmbedder:
    """WordLlama's 256-dimension static model: a vector per token, averaged over the text's tokens. A question is
    the plain mean of its tokens; a stored passage (`embed_with_tokens`) is their mean weighed by `zipf_weights`."""

    kind = "local"
    _lock = threading.Lock()
    _loaded: tuple[np.ndarray, Any] | None = None

    def __init__(self) -> None:
        try:
            from importlib.metadata import version

            # The token table alone (what derives from it, as recall's neighbour table, is named by this).
            self.token_model_id = f"wordllama-{version('wordllama')}/l2_supercat_256"
        except Exception:  # noqa: BLE001 (a missing distribution is reported when the model is loaded)
            self.token_model_id = "wordllama/l2_supercat_256"
        self.model_id = f"{self.token_model_id}{PASSAGE_WEIGHING}"

    @classmethod
    def _model(cls) -> tuple[np.ndarray, Any]:
        with cls._lock:
            if cls._loaded is None:
                cls._loaded = cls._load()
            return cls._loaded

    @staticmethod
    def _load() -> tuple[np.ndarray, Any]:
        try:
            return _read_shipped_model()
        except Exception:  # noqa: BLE001 (tokenizers raises a bare Exception for a missing or unreadable file)
            pass  # not where wordllama 0.4 puts them, or unreadable: wordllama's own loader finds them or says why
        root = logging.getLogger()
        handlers, level = list(root.handlers), root.level
        try:
            # wordllama calls logging.basicConfig(level=INFO) when imported; the process's logging stays ours.
            import wordllama
            from wordllama import WordLlama

            # WordLlama.load() looks for the tokenizer in the wrong folder and then tries to download it: point it
            # at the installed package, where the wheel put both files.
            model = WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)
        except Exception as exc:  # noqa: BLE001 (any failure to load means no local embedder)
            raise EmbedderError(f"the local embedding model did not load: {type(exc).__name__}: {exc}") from None
        finally:
            root.handlers[:] = handlers
            root.setLevel(level)
        tokenizer = model.tokenizer
        tokenizer.no_padding()
        tokenizer.no_truncation()
        return np.ascontiguousarray(model.embedding, dtype=np.float32), tokenizer

    def embed(self, texts: list[str]) -> np.ndarray:
        """Questions (and anything compared with stored passages as a question is): each the plain mean of its
        tokens' vectors."""
        return self._vectors(texts, passages=False)[0]

    def embed_with_tokens(self, texts: list[str]) -> tuple[np.ndarray, list[bytes]]:
        """Passages to store: each text's vector, its tokens weighed by `zipf_weights`, and its token set from the
        same tokenization: its distinct token ids, ascending, as uint16 bytes (the vocabulary has 32,000 tokens).
        The token-match list (memory/recall/token_match.py) scores passages by them."""
        return self._vectors(texts, passages=True)

    def _vectors(self, texts: list[str], *, passages: bool) -> tuple[np.ndarray, list[bytes]]:
        table, tokenizer = self._model()
        if not texts:
            return np.zeros((0, table.shape[1]), dtype=np.float32), []
        # Each text's token rows averaged on their own: a gather of one text's rows stays in cache, where one gather
        # of every text's rows (averaged with reduceat) built an array of tokens x 256 floats, 70 MB for a reindex
        # batch of 1,000 memories, and took four times as long. No padding to the longest text either way.
        encoded = tokenizer.encode_batch(texts, add_special_tokens=False)
        out = np.zeros((len(texts), table.shape[1]), dtype=np.float32)
        sets: list[bytes] = []
        last = table.shape[0] - 1
        rows = self._float32_rows(table)
        for row, item in enumerate(encoded):
            ids = np.asarray(item.ids, dtype=np.int64)
            np.clip(ids, 0, last, out=ids)
            if len(ids) and passages:
                weights = zipf_weights(ids)
                total = float(weights.sum())
                # einsum keeps the weighed sum on this thread (see pipeline.semantic_scores on OpenBLAS's threads).
                out[row] = (np.einsum("i,ij->j", weights, rows(ids)) / total if total > 0
                            else rows(ids).mean(axis=0))
            elif len(ids):
                out[row] = rows(ids).mean(axis=0)
            if passages:
                sets.append(np.unique(ids).astype(TOKEN_DTYPE).tobytes())
        return normalized(out), sets

    def question_tokens(self, text: str) -> list[tuple[int, str]]:
        """A question's tokens as (id, the token's text, without the tokenizer's word mark), in order."""
        table, tokenizer = self._model()
        item = tokenizer.encode(text, add_special_tokens=False)
        last = table.shape[0] - 1
        return [(min(max(token, 0), last), piece.replace("\u2581", " ").strip()) for token, piece in
                zip(item.ids, item.tokens, strict=True)]

    @classmethod
    def vocabulary_size(cls) -> int:
        return int(cls._model()[0].shape[0])

    _unit: tuple[np.ndarray, np.ndarray] | None = None  # (the table it was made from, its unit float32 rows)

    @classmethod
    def unit_table(cls) -> np.ndarray:
        """Every token's vector at unit length, float32 (32 MB), made once per process: token-to-token cosines."""
        table, _tokenizer = cls._model()
        with cls._lock:
            if cls._unit is None or cls._unit[0] is not table:
                cls._unit = (table, normalized(table.astype(np.float32)))
            return cls._unit[1]

    _converted: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # (float16 table, float32 rows, converted)

    @classmethod
    def _float32_rows(cls, table: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        """The float32 rows of these token ids. The shipped table stays float16 (see _read_shipped_model); each row
        is converted the first time a text uses it and kept, so a process converts only the rows it meets, once:
        converting the gathered rows on every call cost more, over a bench's 1,000 turns, than the whole table.
        The same float32 values a converted table holds, averaged the same way: bit-identical vectors."""
        if table.dtype == np.float32:
            return table.__getitem__
        with cls._lock:
            if cls._converted is None or cls._converted[0] is not table:
                cls._converted = (table, np.empty(table.shape, dtype=np.float32), np.zeros(len(table), dtype=bool))
            _table, converted_rows, converted = cls._converted

        def rows(ids: np.ndarray) -> np.ndarray:
            missing = ids[~converted[ids]]
            if len(missing):
                with cls._lock:  # rows first, then the flags: a reader never sees a flag before its row
                    converted_rows[missing] = table[missing]
                    converted[missing] = True
            return converted_rows[ids]

        return rows


# The files the wordllama wheel ships for the default model, and the tensor WordLlama.load() reads from them.
_MODEL_WEIGHTS = ("weights", "l2_supercat_256.safetensors")
_MODEL_TOKENIZER = ("tokenizers", "l2_supercat_tokenizer_config.json")
_MODEL_TENSOR = "embedding.weight"


def _read_shipped_model() -> tuple[np.ndarray, Any]:
    """The table and tokenizer read from the installed wordllama package's folder, the files WordLlama.load() reads,
    without importing wordllama: its import (requests, its training configuration) costs every process several
    times what reading the two files does, at its first write or search. The package is located, not imported
    (find_spec runs none of its code); safetensors and tokenizers are what WordLlama.load() itself reads them with.
    The table is returned as stored (float16): `embed` converts to float32 only the rows a text uses, never the
    whole table per process."""
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("wordllama is not installed")
    from safetensors import safe_open
    from tokenizers import Tokenizer

    package = Path(next(iter(spec.submodule_search_locations)))
    with safe_open(str(package.joinpath(*_MODEL_WEIGHTS)), framework="np", device="cpu") as weights:
        table = weights.get_tensor(_MODEL_TENSOR)
    tokenizer = Tokenizer.from_file(str(package.joinpath(*_MODEL_TOKENIZER)))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return np.ascontiguousarray(table), tokenizer


class OpenAIEmbedder:
    """`POST {base_url}/embeddings` with `{"model", "input": [texts]}`; the answer's `data[i].embedding` rows are
    put back in input order by their `index`."""

    kind = "openai"

    def __init__(self, *, base_url: str, model: str, api_key_env: str, timeout_ms: int, batch: int) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = os.environ.get(api_key_env, "") if api_key_env else ""
        self.timeout_ms = timeout_ms
        self.batch = batch
        self.model_id = f"openai:{model}"

    def embed(self, texts: list[str]) -> np.ndarray:
        if not self.base_url or not self.model:
            raise EmbedderError("memory.embedder.base_url and memory.embedder.model must be set for kind 'openai'")
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch):
            rows.extend(self._request(texts[start : start + self.batch]))
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        return normalized(np.asarray(rows, dtype=np.float32))

    def _request(self, texts: list[str]) -> list[list[float]]:
        request = urllib.request.Request(
            f"{self.base_url}/embeddings",
            data=json.dumps({"model": self.model, "input": texts}).encode(),
            headers={"Content-Type": "application/json",
                     **({"Authorization": f"Bearer {self.api_key}"} if self.api_key else {})},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_ms / 1000) as response:
                data = json.loads(response.read().decode("utf-8"))
        except (urllib.error.URLError, TimeoutError, ValueError, OSError) as exc:
            raise EmbedderError(f"embedding request failed: {type(exc).__name__}") from None
        return _rows(data, len(texts))


def _rows(data: Any, count: int) -> list[list[float]]:
    """The answer's vectors in input order, or EmbedderError for anything but `count` finite vectors of one size."""
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list) or len(items) != count:
        raise EmbedderError(f"embedding answer has no data list of {count} items")
    rows: list[list[float] | None] = [None] * count
    size = None
    for position, item in enumerate(items):
        index = item.get("index", position) if isinstance(item, dict) else None
        vector = item.get("embedding") if isinstance(item, dict) else None
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count or rows[index] is not None:
            raise EmbedderError("embedding answer has a missing, repeated or out-of-range index")
        if (not isinstance(vector, list) or not vector
                or not all(isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
                           for x in vector)):
            raise EmbedderError("embedding answer has an embedding that is not a list of finite numbers")
        if size is not None and len(vector) != size:
            raise EmbedderError("embedding answer mixes vector sizes")
        size = len(vector)
        rows[index] = vector
    return rows  # type: ignore[return-value]


_embedders: dict[tuple[Any, ...], Embedder | None] = {}


def get_embedder(config: Any) -> Embedder | None:
    """The configured embedder (None for kind `none`), one instance per process and setting."""
    settings = config.memory.embedder
    key = (settings.kind, settings.base_url, settings.model, settings.api_key_env, settings.timeout, settings.batch)
    if key not in _embedders:
        embedder: Embedder | None
        if settings.kind == "none":
            embedder = None
        elif settings.kind == "openai":
            embedder = OpenAIEmbedder(base_url=settings.base_url, model=settings.model,
                                      api_key_env=settings.api_key_env, timeout_ms=settings.timeout,
                                      batch=settings.batch)
        else:
            embedder = LocalEmbedder()
        _embedders[key] = embedder
    return _embedders[key]
