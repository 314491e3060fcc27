"""The embedders: the local model shipped inside the wordllama wheel, and an OpenAI-compatible /v1/embeddings
endpoint tested against a real HTTP server on loopback, including timeouts and garbage answers."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from compozy.config import load_config
from memory.providers import embeddings
from memory.providers.embeddings import EmbedderError, LocalEmbedder, OpenAIEmbedder, get_embedder
from tests.providers.fake_embeddings import FakeEmbeddings, vector_for


@pytest.fixture
def fake():
    server = FakeEmbeddings()
    yield server
    server.close()


def http_embedder(fake, *, timeout_ms=2000, batch=64, model="nomic-embed-text"):
    return OpenAIEmbedder(base_url=fake.url, model=model, api_key_env="TEST_EMBED_KEY", timeout_ms=timeout_ms,
                          batch=batch)


def test_the_local_embedder_loads_the_model_shipped_in_its_wheel_and_puts_related_texts_nearer(monkeypatch):
    # Any attempt to reach the network while loading would fail here.
    def no_network(*args, **kwargs):
        raise OSError("network is not allowed in this test")

    monkeypatch.setattr(socket, "create_connection", no_network)
    embedder = LocalEmbedder()
    vectors = embedder.embed(["how do I restore the database from a backup",
                              "restoring postgres from last night's backup",
                              "my cat likes to sleep in the sun", ""])
    assert vectors.dtype == np.float32 and vectors.shape == (4, 256)
    assert np.allclose(np.linalg.norm(vectors[:3], axis=1), 1.0, atol=1e-5)
    assert not vectors[3].any()  # nothing to embed gives a zero row
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.1
    assert embedder.model_id.startswith("wordllama-0.4") and embedder.model_id.endswith("/l2_supercat_256+zipf")


def test_the_local_embedder_gives_the_same_vector_for_a_text_alone_or_in_a_batch():
    embedder = LocalEmbedder()
    alone = embedder.embed(["a longer text about deploying the staging cluster"])[0]
    batch = embedder.embed(["short", "a longer text about deploying the staging cluster", "x " * 300])
    assert np.allclose(alone, batch[1], atol=1e-6)


def test_the_local_embedder_reads_the_shipped_files_without_importing_wordllama():
    # Importing wordllama pulls in requests and its training configuration (0.4-0.6 s of CPU per process).
    code = ("import sys\n"
            "from memory.providers.embeddings import LocalEmbedder\n"
            "assert LocalEmbedder().embed(['the staging database']).shape == (1, 256)\n"
            "print(sorted(name for name in ('wordllama', 'requests') if name in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_shipped_files_and_wordllamas_own_loader_give_identical_vectors(monkeypatch):
    texts = ["how do I restore the database from a backup", "Ünïcödé café, 東京", "", "x " * 300]
    direct = LocalEmbedder._load()
    monkeypatch.setattr(embeddings, "_read_shipped_model", lambda: (_ for _ in ()).throw(FileNotFoundError("moved")))
    through_wordllama = LocalEmbedder._load()
    assert np.array_equal(direct[0], through_wordllama[0])
    monkeypatch.setattr(LocalEmbedder, "_loaded", direct)
    first = LocalEmbedder().embed(texts)
    monkeypatch.setattr(LocalEmbedder, "_loaded", through_wordllama)
    assert np.array_equal(first, LocalEmbedder().embed(texts))


def test_the_http_embedder_posts_the_texts_and_returns_unit_vectors_in_input_order(fake, monkeypatch):
    monkeypatch.setenv("TEST_EMBED_KEY", "secret-key")
    texts = ["alpha beta", "gamma", "alpha delta epsilon"]
    vectors = http_embedder(fake).embed(texts)
    request = fake.requests[0]
    assert request["path"] == "/v1/embeddings"
    assert request["body"] == {"model": "nomic-embed-text", "input": texts}
    assert request["auth"] == "Bearer secret-key"
    expected = np.array([vector_for(text) for text in texts], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    assert np.allclose(vectors, expected, atol=1e-6)  # the fake answers in reverse order; `index` puts them back


def test_the_http_embedder_sends_large_inputs_in_batches(fake):
    texts = [f"text number {index}" for index in range(10)]
    vectors = http_embedder(fake, batch=4).embed(texts)
    assert [len(request["body"]["input"]) for request in fake.requests] == [4, 4, 2]
    assert vectors.shape == (10, 8)


def test_the_http_embedder_gives_up_at_its_timeout(fake):
    fake.delay = 1.0
    with pytest.raises(EmbedderError, match="request failed"):
        http_embedder(fake, timeout_ms=100).embed(["slow"])


@pytest.mark.parametrize("raw", [
    b"<html>502 Bad Gateway</html>",
    b"",
    json.dumps({"error": "model not loaded"}).encode(),
    json.dumps({"data": []}).encode(),
    json.dumps({"data": [{"index": 0, "embedding": [0.1, 0.2]}]}).encode(),  # one row for two texts
    json.dumps({"data": [{"index": 0, "embedding": [0.1, 0.2]}, {"index": 0, "embedding": [0.3, 0.4]}]}).encode(),
    json.dumps({"data": [{"index": 0, "embedding": [0.1, 0.2]}, {"index": 5, "embedding": [0.3, 0.4]}]}).encode(),
    json.dumps({"data": [{"index": 0, "embedding": [0.1, 0.2]}, {"index": 1, "embedding": [0.3]}]}).encode(),
    json.dumps({"data": [{"index": 0, "embedding": [0.1, "x"]}, {"index": 1, "embedding": [0.3, 0.4]}]}).encode(),
    json.dumps({"data": [{"index": 0, "embedding": [0.1, True]}, {"index": 1, "embedding": [0.3, 0.4]}]}).encode(),
    json.dumps({"data": [{"index": 0, "embedding": []}, {"index": 1, "embedding": []}]}).encode(),
    b'{"data": [{"index": 0, "embedding": [NaN, 1]}, {"index": 1, "embedding": [1, Infinity]}]}',
    json.dumps({"data": "not a list"}).encode(),
    json.dumps([1, 2, 3]).encode(),
])
def test_the_http_embedder_rejects_garbage_answers(fake, raw):
    fake.raw = raw
    with pytest.raises(EmbedderError):
        http_embedder(fake).embed(["first", "second"])


@pytest.mark.parametrize("status", [400, 401, 404, 500, 503])
def test_the_http_embedder_turns_an_error_status_into_an_embedder_error(fake, status):
    fake.status = status
    with pytest.raises(EmbedderError, match="request failed"):
        http_embedder(fake).embed(["anything"])


def test_the_http_embedder_without_a_url_or_model_is_an_embedder_error():
    embedder = OpenAIEmbedder(base_url="", model="", api_key_env="", timeout_ms=100, batch=8)
    with pytest.raises(EmbedderError, match="must be set"):
        embedder.embed(["anything"])


def test_an_unreachable_server_is_an_embedder_error():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    embedder = OpenAIEmbedder(base_url=f"http://127.0.0.1:{port}/v1", model="m", api_key_env="", timeout_ms=500,
                              batch=8)
    with pytest.raises(EmbedderError):
        embedder.embed(["anything"])


def test_the_configured_kind_chooses_the_embedder(fake, tmp_path):
    base = {"COMPOZY_HOME": str(tmp_path)}
    assert isinstance(get_embedder(load_config(environ=base)), LocalEmbedder)
    assert get_embedder(load_config(environ={**base, "COMPOZY_MEMORY__EMBEDDER__KIND": "none"})) is None
    chosen = get_embedder(load_config(environ={
        **base, "COMPOZY_MEMORY__EMBEDDER__KIND": "openai", "COMPOZY_MEMORY__EMBEDDER__BASE_URL": fake.url,
        "COMPOZY_MEMORY__EMBEDDER__MODEL": "nomic-embed-text", "COMPOZY_MEMORY__EMBEDDER__TIMEOUT": "1.5s"}))
    assert isinstance(chosen, OpenAIEmbedder)
    assert chosen.model_id == "openai:nomic-embed-text" and chosen.timeout_ms == 1500


def test_the_float16_table_gives_the_vectors_of_its_float32_conversion_on_first_and_later_use(monkeypatch):
    # The shipped table stays float16 and its rows are converted as texts first use them (kept for later texts).
    table, tokenizer = embeddings._read_shipped_model()
    assert table.dtype == np.float16
    texts = ["how do I restore the database from a backup", "Ünïcödé café, 東京", "", "x " * 300,
             "restoring the database from last night's backup"]
    monkeypatch.setattr(LocalEmbedder, "_loaded", (np.ascontiguousarray(table, dtype=np.float32), tokenizer))
    expected = LocalEmbedder().embed(texts)
    monkeypatch.setattr(LocalEmbedder, "_loaded", (table, tokenizer))
    monkeypatch.setattr(LocalEmbedder, "_converted", None)
    first = LocalEmbedder().embed(texts[:2])  # converts their rows
    again = LocalEmbedder().embed(texts)  # some rows kept, some new
    assert first.tobytes() == expected[:2].tobytes() and again.tobytes() == expected.tobytes()


def test_a_stored_passage_weighs_its_rarer_tokens_more_and_a_question_stays_a_plain_mean():
    embedder = LocalEmbedder()
    passage = ("When this happens it is usually because of the way that the thing was set up in the first place, "
               "and then there is not much that you can do about it other than to go back and look at it again, "
               "which is what we did with the pgbouncer connection pool settings.")
    table, tokenizer = LocalEmbedder._model()
    ids = np.asarray(tokenizer.encode(passage, add_special_tokens=False).ids)
    rows = table[ids].astype(np.float32)
    weights = np.log1p(ids.astype(np.float32))
    by_hand = (weights[:, None] * rows).sum(axis=0) / weights.sum()
    stored, sets = embedder.embed_with_tokens([passage])
    assert np.allclose(stored[0], by_hand / np.linalg.norm(by_hand), atol=1e-5)
    assert sets[0] == np.unique(ids).astype(np.uint16).tobytes()
    plain = rows.mean(axis=0)
    assert np.allclose(embedder.embed([passage])[0], plain / np.linalg.norm(plain), atol=1e-5)
    # What the weighing is for: a long passage of common words lands nearer a question on its subject.
    question = embedder.embed(["pgbouncer connection pool"])[0]
    assert question @ stored[0] > question @ embedder.embed([passage])[0] + 0.05
