# ApiToken moves here from ``rewards``: the model enters this app's state on the table ``rewards`` created
# (``rewards_apitoken``) with no database operation, so every token keeps its row, hash and scope; 0002 then
# renames the table. The content type moves too, so admin permissions on tokens stay granted.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def move_content_type(apps, schema_editor, source='rewards', target='api'):
    ContentType = apps.get_model('contenttypes', 'ContentType')
    db = schema_editor.connection.alias
    if not ContentType.objects.using(db).filter(app_label=target, model='apitoken').exists():
        ContentType.objects.using(db).filter(app_label=source, model='apitoken').update(app_label=target)


def move_content_type_back(apps, schema_editor):
    move_content_type(apps, schema_editor, source='api', target='rewards')


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('rewards', '0004_h1_apitoken_moves_to_api'),
        ('contenttypes', '0002_remove_content_type_name'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='ApiToken',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=100)),
                        ('prefix', models.CharField(db_index=True, max_length=16)),
                        ('key_hash', models.CharField(max_length=64, unique=True)),
                        ('scope', models.CharField(choices=[('read', 'Read and download'), ('write', 'Read and write (import, label)')], default='read', max_length=8)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('last_used_at', models.DateTimeField(blank=True, null=True)),
                        ('revoked_at', models.DateTimeField(blank=True, null=True)),
                        ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='api_tokens', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'rewards_apitoken',
                        'ordering': ['-created_at', '-id'],
                        'indexes': [models.Index(condition=models.Q(('revoked_at__isnull', True)), fields=['key_hash'], name='apitoken_live_idx')],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(move_content_type, move_content_type_back),
    ]
