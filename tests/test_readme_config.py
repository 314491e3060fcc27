"""The README's configuration example is a valid config file, and every key in it takes effect."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from compozy.config import load_config

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_toml_blocks() -> list[str]:
    return re.findall(r"```toml\n(.*?)```", README.read_text("utf-8"), flags=re.S)


def leaves(data: dict, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], object]:
    out: dict[tuple[str, ...], object] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(leaves(value, (*prefix, key)))
        else:
            out[(*prefix, key)] = value
    return out


def test_the_readme_config_example_loads_and_each_key_takes_effect(tmp_path):
    blocks = readme_toml_blocks()
    assert blocks, "the README has no ```toml example"
    for text in blocks:
        (tmp_path / "config.toml").write_text(text, "utf-8")
        config = load_config(environ={"COMPOZY_HOME": str(tmp_path)})
        for path, value in leaves(tomllib.loads(text)).items():
            loaded = config
            for part in path:
                loaded = getattr(loaded, part)
            loaded = getattr(loaded, "value", loaded)  # an enum holds the text as written
            # "300ms" loads as 300 (milliseconds): the written text starts with what was loaded.
            assert loaded == value or str(value).startswith(str(loaded)), (path, loaded, value)
