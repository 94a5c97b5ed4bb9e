"""Import jobs join the shared job layer (``steplab.jobs``): its status choices and the id of the task last sent."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('annotate', '0007_rating_revision_keeps_removed_ratings'),
    ]

    operations = [
        migrations.AddField(
            model_name='importjob',
            name='celery_task_id',
            field=models.CharField(blank=True, help_text='Id of the task last sent.', max_length=100),
        ),
        migrations.AlterField(
            model_name='importjob',
            name='error',
            field=models.TextField(blank=True, help_text='Why it failed.'),
        ),
        migrations.AlterField(
            model_name='importjob',
            name='status',
            field=models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('succeeded', 'Succeeded'), ('failed', 'Failed'), ('cancelled', 'Cancelled')], default='queued', max_length=16),
        ),
    ]
