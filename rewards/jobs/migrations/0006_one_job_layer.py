"""Reward-model jobs and comparison runs join the shared job layer (``steplab.jobs``): "its task reached the
broker" is ``dispatched_at`` (null: to be sent again), as for imports, instead of a non-empty ``celery_task_id``.
Rows already sent get their creation time as ``dispatched_at`` (the moment they were sent is not known)."""

from django.db import migrations, models
from django.db.models import F

JOB_MODELS = ("trainingjob", "scoringjob", "samplingjob", "comparisonrun")


def sent_means_dispatched(apps, schema_editor):
    for name in JOB_MODELS:
        apps.get_model("jobs", name).objects.exclude(celery_task_id="").update(dispatched_at=F("created_at"))


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0005_labeling_round'),
    ]

    operations = [
        migrations.AddField(
            model_name='comparisonrun',
            name='dispatched_at',
            field=models.DateTimeField(blank=True, help_text='When its task reached the broker; null: to be sent again.', null=True),
        ),
        migrations.AddField(
            model_name='samplingjob',
            name='dispatched_at',
            field=models.DateTimeField(blank=True, help_text='When its task reached the broker; null: to be sent again.', null=True),
        ),
        migrations.AddField(
            model_name='scoringjob',
            name='dispatched_at',
            field=models.DateTimeField(blank=True, help_text='When its task reached the broker; null: to be sent again.', null=True),
        ),
        migrations.AddField(
            model_name='trainingjob',
            name='dispatched_at',
            field=models.DateTimeField(blank=True, help_text='When its task reached the broker; null: to be sent again.', null=True),
        ),
        migrations.AlterField(
            model_name='comparisonrun',
            name='celery_task_id',
            field=models.CharField(blank=True, help_text='Id of the task last sent.', max_length=100),
        ),
        migrations.AlterField(
            model_name='comparisonrun',
            name='error',
            field=models.TextField(blank=True, help_text='Why it failed.'),
        ),
        migrations.AlterField(
            model_name='samplingjob',
            name='celery_task_id',
            field=models.CharField(blank=True, help_text='Id of the task last sent.', max_length=100),
        ),
        migrations.AlterField(
            model_name='samplingjob',
            name='error',
            field=models.TextField(blank=True, help_text='Why it failed.'),
        ),
        migrations.AlterField(
            model_name='scoringjob',
            name='celery_task_id',
            field=models.CharField(blank=True, help_text='Id of the task last sent.', max_length=100),
        ),
        migrations.AlterField(
            model_name='scoringjob',
            name='error',
            field=models.TextField(blank=True, help_text='Why it failed.'),
        ),
        migrations.AlterField(
            model_name='trainingjob',
            name='celery_task_id',
            field=models.CharField(blank=True, help_text='Id of the task last sent.', max_length=100),
        ),
        migrations.AlterField(
            model_name='trainingjob',
            name='error',
            field=models.TextField(blank=True, help_text='Why it failed.'),
        ),
        # backwards: nothing to undo, the task ids were kept
        migrations.RunPython(sent_means_dispatched, migrations.RunPython.noop),
    ]
