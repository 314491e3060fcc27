"""Each chunk keeps its passage's token set beside its vector (the token-match list reads it).

A nullable column with no default is added by ALTER TABLE ADD COLUMN, so memory_chunks is not rebuilt and its FTS5
triggers stay. Existing chunks get their sets from `vectors.fill_missing` (every reindex and every write of a memory),
which picks up chunks without one; until then the list scores them as matching nothing."""

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("memory", "0019_word_index_porter")]

    operations = [migrations.AddField(model_name="chunk", name="tokens", field=models.BinaryField(null=True))]
