from django.db import migrations, models


class Migration(migrations.Migration):
    """Uniqueness per owner, once 0005 has given every problem its owner and key."""

    dependencies = [
        ('annotate', '0005_problem_copies_per_campaign'),
    ]

    operations = [
        migrations.AddConstraint(
            model_name='problem',
            constraint=models.UniqueConstraint(condition=models.Q(('campaign__isnull', False)), fields=('campaign', 'key_sha256'), name='problem_unique_text_per_campaign'),
        ),
        migrations.AddConstraint(
            model_name='problem',
            constraint=models.UniqueConstraint(condition=models.Q(('campaign__isnull', True)), fields=('key_sha256',), name='problem_unique_text_in_bank'),
        ),
        migrations.AddConstraint(
            model_name='problem',
            constraint=models.UniqueConstraint(condition=models.Q(('campaign__isnull', False), models.Q(('source_id', ''), _negated=True)), fields=('campaign', 'source_id'), name='problem_unique_source_id_per_campaign'),
        ),
        migrations.AddConstraint(
            model_name='problem',
            constraint=models.UniqueConstraint(condition=models.Q(('campaign__isnull', True), models.Q(('source_id', ''), _negated=True)), fields=('source_id',), name='problem_unique_source_id_in_bank'),
        ),
    ]
