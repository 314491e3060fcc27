from __future__ import annotations

from django.db import migrations, models

TABLES = ("memory_fts_unicode", "memory_fts_trigram")


def _triggers(table: str, update_columns: str) -> list[str]:
    return [
        f"DROP TRIGGER IF EXISTS {table}_ai",
        f"DROP TRIGGER IF EXISTS {table}_ad",
        f"DROP TRIGGER IF EXISTS {table}_au",
        f"CREATE TRIGGER {table}_ai AFTER INSERT ON memory_chunks BEGIN "
        f"INSERT INTO {table}(rowid, name, description, body) VALUES (new.id, new.name, new.description, new.body); END",
        f"CREATE TRIGGER {table}_ad AFTER DELETE ON memory_chunks BEGIN "
        f"INSERT INTO {table}({table}, rowid, name, description, body) "
        f"VALUES ('delete', old.id, old.name, old.description, old.body); END",
        f"CREATE TRIGGER {table}_au AFTER UPDATE{update_columns} ON memory_chunks BEGIN "
        f"INSERT INTO {table}({table}, rowid, name, description, body) "
        f"VALUES ('delete', old.id, old.name, old.description, old.body); "
        f"INSERT INTO {table}(rowid, name, description, body) VALUES (new.id, new.name, new.description, new.body); END",
    ]


class Migration(migrations.Migration):
    """Each chunk keeps its passage's embedding and the model that made it.

    Adding a column with a default makes Django's SQLite schema editor rebuild memory_chunks, which drops the
    table's triggers, so they are created again here. Storing a vector must not re-index the chunk's text, so
    the update triggers now fire only when the text columns change."""

    dependencies = [("memory", "0006_decision_retention")]

    operations = [
        migrations.AddField(model_name="chunk", name="vector", field=models.BinaryField(null=True)),
        migrations.AddField(model_name="chunk", name="vector_model",
                            field=models.CharField(blank=True, default="", max_length=200)),
        migrations.RunSQL(
            sql=[statement for table in TABLES for statement in _triggers(table, " OF name, description, body")],
            reverse_sql=[statement for table in TABLES for statement in _triggers(table, "")],
        ),
    ]
