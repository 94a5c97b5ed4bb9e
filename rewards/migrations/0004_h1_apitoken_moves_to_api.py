# ApiToken moves to the ``api`` app. This side only forgets the model (no database operation): the table and its
# rows stay, and ``api.0001_initial`` takes the same table over in its own state.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('rewards', '0003_dataset_version_ready_only'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name='ApiToken')],
            database_operations=[],
        ),
    ]
