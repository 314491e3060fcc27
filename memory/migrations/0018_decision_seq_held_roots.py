"""Decisions get their order (`seq`), numbered for the existing rows by rowid: SQLite hands rowids out in insert
order, and decisions were inserted under the write lock, one writer at a time. Then the table of held roots."""

from __future__ import annotations

from django.db import migrations, models
from django.db.models import Q


class Migration(migrations.Migration):
    dependencies = [("memory", "0017_recall_sessions")]

    operations = [
        migrations.AddField(model_name="decision", name="seq", field=models.BigIntegerField(null=True)),
        migrations.RunSQL(sql="UPDATE memory_decisions SET seq = rowid WHERE seq IS NULL",
                          reverse_sql=migrations.RunSQL.noop),
        migrations.AddConstraint(
            model_name="decision",
            constraint=models.UniqueConstraint(condition=Q(seq__isnull=False), fields=("seq",), name="decision_seq"),
        ),
        migrations.CreateModel(
            name="HeldRoot",
            fields=[
                ("root_key", models.CharField(max_length=128, primary_key=True, serialize=False)),
                ("workspace_id", models.CharField(blank=True, default="", max_length=26)),
                ("reason", models.CharField(max_length=32)),
                ("message", models.TextField(blank=True, default="")),
                ("decision_id", models.CharField(max_length=28)),
                ("since", models.DateTimeField()),
                ("last_attempt_at", models.DateTimeField()),
                ("attempts", models.IntegerField(default=1)),
            ],
            options={"db_table": "memory_held_roots"},
        ),
    ]
