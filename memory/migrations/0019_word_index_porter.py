"""The word index stems English words: its FTS5 table is created again with the porter tokenizer and rebuilt from
the chunks it indexes (an external-content table's `rebuild`). The generation advances, so nothing cached from the
unstemmed index is served again."""

from __future__ import annotations

from django.db import migrations

from memory.catalog.fts import UNICODE_TABLE, UNSTEMMED_WORD_TOKENIZER, WORD_TOKENIZER, create_table_sql, drop_table_sql

_ADVANCE = ("INSERT INTO memory_state (key, value) VALUES ('generation', 1) "
            "ON CONFLICT(key) DO UPDATE SET value = value + 1")


def _recreate(tokenizer: str) -> list[str]:
    return [*drop_table_sql(UNICODE_TABLE), *create_table_sql(UNICODE_TABLE, tokenizer),
            f"INSERT INTO {UNICODE_TABLE}({UNICODE_TABLE}) VALUES ('rebuild')", _ADVANCE]


class Migration(migrations.Migration):
    dependencies = [("memory", "0018_decision_seq_held_roots")]

    operations = [migrations.RunSQL(sql=_recreate(WORD_TOKENIZER), reverse_sql=_recreate(UNSTEMMED_WORD_TOKENIZER))]
