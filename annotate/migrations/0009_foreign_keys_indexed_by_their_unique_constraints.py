"""Three foreign keys lose their own index: each is the first column of a unique constraint, whose index serves
the same lookups. Only the indexes are dropped (the generated AlterField would also drop and re-add, and so
re-validate, every foreign-key constraint)."""

import django.db.models.deletion
from django.db import migrations, models

# (table, column, index name as Django named it): the same name on PostgreSQL and SQLite.
INDEXES = [
    ("annotate_rating", "assignment_id", "annotate_rating_assignment_id_2e0a66a2"),
    ("annotate_step", "solution_id", "annotate_step_solution_id_b1d8c544"),
    ("annotate_stepdecision", "assignment_id", "annotate_stepdecision_assignment_id_a8ac4fea"),
]


class Migration(migrations.Migration):

    dependencies = [
        ('annotate', '0008_import_job_is_a_job'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(f'DROP INDEX IF EXISTS "{name}"',
                                  reverse_sql=f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" ("{column}")')
                for table, column, name in INDEXES
            ],
            state_operations=[
                migrations.AlterField(
                    model_name='rating',
                    name='assignment',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                            related_name='ratings', to='annotate.assignment'),
                ),
                migrations.AlterField(
                    model_name='step',
                    name='solution',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                            related_name='steps', to='annotate.solution'),
                ),
                migrations.AlterField(
                    model_name='stepdecision',
                    name='assignment',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                            related_name='decisions', to='annotate.assignment'),
                ),
            ],
        ),
    ]
