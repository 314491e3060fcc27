from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0015_session_turns_fts'),
    ]

    operations = [
        migrations.AddField(
            model_name='session',
            name='transcript_offset',
            field=models.BigIntegerField(default=0),
        ),
    ]
