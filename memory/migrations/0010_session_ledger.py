# The session ledger: the existing per-session snapshot row becomes the session's head (renamed, not replaced, so
# sessions recorded before this migration keep their frozen snapshots), and gains its events and coverage tables.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0009_event_workspace_op_ts'),
    ]

    operations = [
        migrations.RenameModel(old_name='SessionSnapshot', new_name='Session'),
        migrations.RenameField(model_name='session', old_name='created_at', new_name='started_at'),
        migrations.AddField(model_name='session', name='type', field=models.CharField(default='user', max_length=16)),
        migrations.AddField(model_name='session', name='status',
                            field=models.CharField(default='running', max_length=16)),
        migrations.AddField(model_name='session', name='stopped_at', field=models.DateTimeField(null=True)),
        migrations.AddField(model_name='session', name='context_window', field=models.IntegerField(null=True)),
        migrations.AddField(model_name='session', name='last_usage', field=models.IntegerField(null=True)),
        migrations.AddField(model_name='session', name='last_usage_at', field=models.DateTimeField(null=True)),
        migrations.AddField(model_name='session', name='last_seq', field=models.IntegerField(default=0)),
        migrations.AddField(model_name='session', name='compaction_cooldown_until',
                            field=models.DateTimeField(null=True)),
        migrations.AddIndex(
            model_name='session',
            index=models.Index(fields=['workspace_id', 'started_at'], name='session_workspace_started'),
        ),
        migrations.CreateModel(
            name='SessionEvent',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('session_id', models.CharField(max_length=128)),
                ('workspace_id', models.CharField(blank=True, default='', max_length=26)),
                ('seq', models.IntegerField()),
                ('turn_id', models.CharField(blank=True, default='', max_length=128)),
                ('kind', models.CharField(max_length=24)),
                ('agent_name', models.CharField(blank=True, default='', max_length=64)),
                ('content', models.TextField(blank=True, default='')),
                ('data', models.JSONField(default=dict)),
                ('ts', models.DateTimeField()),
                ('archived', models.BooleanField(default=False)),
                ('external_key', models.CharField(blank=True, default='', max_length=200)),
            ],
            options={
                'db_table': 'memory_session_events',
                'constraints': [
                    models.UniqueConstraint(fields=('session_id', 'seq'), name='session_event_seq'),
                    models.UniqueConstraint(condition=models.Q(('external_key', ''), _negated=True),
                                            fields=('session_id', 'external_key'), name='session_event_external_key'),
                ],
            },
        ),
        migrations.CreateModel(
            name='SessionCoverage',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('workspace_id', models.CharField(blank=True, default='', max_length=26)),
                ('session_id', models.CharField(max_length=128)),
                ('from_seq', models.IntegerField()),
                ('to_seq', models.IntegerField()),
                ('decision_id', models.CharField(blank=True, default='', max_length=28)),
                ('created_at', models.DateTimeField()),
                ('updated_at', models.DateTimeField()),
            ],
            options={
                'db_table': 'memory_session_coverage',
                'indexes': [models.Index(fields=['session_id', 'from_seq'], name='coverage_session_from')],
            },
        ),
    ]
