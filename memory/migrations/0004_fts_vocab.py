from __future__ import annotations

from django.db import migrations

from memory.catalog.fts import CREATE_VOCAB_SQL, DROP_VOCAB_SQL


class Migration(migrations.Migration):
    dependencies = [("memory", "0003_recall_and_snapshots")]

    operations = [migrations.RunSQL(sql=CREATE_VOCAB_SQL, reverse_sql=DROP_VOCAB_SQL)]
