from __future__ import annotations

from django.db import migrations

from memory.catalog.turns_fts import CREATE_SQL, DROP_SQL


class Migration(migrations.Migration):
    dependencies = [("memory", "0014_imports")]

    operations = [migrations.RunSQL(sql=CREATE_SQL, reverse_sql=DROP_SQL)]
