from __future__ import annotations

import pytest

from compozy.config import load_config
from memory.domain.errors import ConfigError


def test_defaults_match_the_clarifications_table(tmp_path):
    config = load_config(environ={"COMPOZY_HOME": str(tmp_path)})
    assert config.memory.file.max_lines == 200
    assert config.memory.file.max_bytes == 25600
    assert config.memory.controller.mode == "hybrid"
    assert config.memory.controller.max_latency == 300
    assert config.memory.controller.default_op_on_fail == "noop"
    assert config.memory.recall.top_k == 5
    assert config.memory.recall.raw_candidates == 50
    weights = config.memory.recall.weights
    assert (weights.unicode, weights.trigram, weights.semantic, weights.recency, weights.signal) == (
        0.30, 0.30, 0.30, 0.15, 0.10)
    assert config.memory.recall.freshness.banner_after_days == 1
    assert config.memory.decisions.prune_after_applied_days == 90
    assert config.session.compaction.pressure_threshold == 0.85
    assert config.memory.workspace.auto_create is True


def test_layers_apply_home_then_workspace_then_environment(tmp_path):
    home = tmp_path / "home"
    workspace = tmp_path / "ws"
    (workspace / ".compozy").mkdir(parents=True)
    home.mkdir()
    (home / "config.toml").write_text("[memory.file]\nmax_lines = 100\nmax_bytes = 1000\n[memory.recall]\ntop_k = 7\n")
    (workspace / ".compozy" / "config.toml").write_text("[memory.file]\nmax_lines = 50\n")
    environ = {"COMPOZY_HOME": str(home), "COMPOZY_MEMORY__RECALL__TOP_K": "9"}
    config = load_config(workspace_root=workspace, environ=environ)
    assert config.memory.file.max_lines == 50  # workspace beats home
    assert config.memory.file.max_bytes == 1000  # home beats defaults
    assert config.memory.recall.top_k == 9  # environment beats all files


def test_an_unknown_key_names_the_key_and_the_file(tmp_path):
    (tmp_path / "config.toml").write_text("[memory.file]\nmax_linez = 10\n")
    with pytest.raises(ConfigError) as error:
        load_config(environ={"COMPOZY_HOME": str(tmp_path)})
    assert error.value.details["key"] == "memory.file.max_linez"
    assert error.value.details["file"] == str(tmp_path / "config.toml")
    assert "max_linez" in error.value.message and str(tmp_path / "config.toml") in error.value.message


def test_a_bad_value_in_the_workspace_file_names_that_file(tmp_path):
    workspace = tmp_path / "ws"
    (workspace / ".compozy").mkdir(parents=True)
    (tmp_path / "config.toml").write_text("[memory.controller]\nmode = 'rules'\n")
    (workspace / ".compozy" / "config.toml").write_text("[memory.controller]\nmode = 'psychic'\n")
    with pytest.raises(ConfigError) as error:
        load_config(workspace_root=workspace, environ={"COMPOZY_HOME": str(tmp_path)})
    assert error.value.details["key"] == "memory.controller.mode"
    assert error.value.details["file"] == str(workspace / ".compozy" / "config.toml")


def test_a_bad_environment_value_names_the_variable(tmp_path):
    with pytest.raises(ConfigError) as error:
        load_config(environ={"COMPOZY_HOME": str(tmp_path), "COMPOZY_MEMORY__RECALL__TOP_K": "lots"})
    assert error.value.details["file"] == "environment variable COMPOZY_MEMORY__RECALL__TOP_K"


def test_durations_accept_units(tmp_path):
    config = load_config(environ={"COMPOZY_HOME": str(tmp_path), "COMPOZY_MEMORY__CONTROLLER__MAX_LATENCY": "'2s'"})
    assert config.memory.controller.max_latency == 2000


def test_invalid_toml_is_reported_with_its_file(tmp_path):
    (tmp_path / "config.toml").write_text("[memory.file\n")
    with pytest.raises(ConfigError) as error:
        load_config(environ={"COMPOZY_HOME": str(tmp_path)})
    assert error.value.details["file"] == str(tmp_path / "config.toml")


def test_get_config_is_read_again_only_when_a_config_file_or_a_compozy_variable_changes(tmp_path, monkeypatch):
    import os

    from compozy.config import get_config

    home, workspace = tmp_path / "home", tmp_path / "ws"
    (workspace / ".compozy").mkdir(parents=True)
    home.mkdir()
    monkeypatch.setenv("COMPOZY_HOME", str(home))
    monkeypatch.delenv("COMPOZY_MEMORY__RECALL__TOP_K", raising=False)
    first = get_config(workspace)
    assert get_config(workspace) is first  # nothing changed: the same validated config, not read again
    monkeypatch.setenv("UNRELATED_VARIABLE", "1")
    assert get_config(workspace) is first
    (home / "config.toml").write_text("[memory.recall]\ntop_k = 7\n", "utf-8")
    assert get_config(workspace).memory.recall.top_k == 7
    config = workspace / ".compozy" / "config.toml"
    config.write_text("[memory.recall]\ntop_k = 8\n", "utf-8")
    assert get_config(workspace).memory.recall.top_k == 8
    config.write_text("[memory.recall]\ntop_k = 9\n", "utf-8")
    os.utime(config, ns=(1, 1))  # a changed mtime, whatever it is, means read again
    assert get_config(workspace).memory.recall.top_k == 9
    monkeypatch.setenv("COMPOZY_MEMORY__RECALL__TOP_K", "3")
    assert get_config(workspace).memory.recall.top_k == 3
    monkeypatch.delenv("COMPOZY_MEMORY__RECALL__TOP_K")
    config.unlink()
    config.mkdir()  # a directory where the file was is no config file
    assert get_config(workspace).memory.recall.top_k == 7


def test_the_home_follows_compozy_home_and_home_as_they_change(monkeypatch, tmp_path):
    # compozy_home() is kept between calls (the write path asks several times per candidate); a change of either
    # variable it reads must still give the new home, and global_root() must follow it.
    from compozy.config import compozy_home
    from memory.store.roots import global_root

    monkeypatch.setenv("COMPOZY_HOME", str(tmp_path / "one"))
    assert compozy_home() == tmp_path / "one" and global_root() == tmp_path / "one" / "memory"
    assert compozy_home() is compozy_home()
    monkeypatch.setenv("COMPOZY_HOME", str(tmp_path / "two"))
    assert compozy_home() == tmp_path / "two" and global_root() == tmp_path / "two" / "memory"
    monkeypatch.delenv("COMPOZY_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert compozy_home() == tmp_path / "user" / ".compozy"
    monkeypatch.setenv("HOME", str(tmp_path / "other"))
    assert compozy_home() == tmp_path / "other" / ".compozy"
    assert global_root() == tmp_path / "other" / ".compozy" / "memory"
    monkeypatch.setenv("COMPOZY_HOME", "~/somewhere")
    assert compozy_home() == tmp_path / "other" / "somewhere"
