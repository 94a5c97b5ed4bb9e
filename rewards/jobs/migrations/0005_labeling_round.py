"""An active-learning round is a LabelingRound, not a "Generation" (the word stays with Solution.generation,
PRM800K's field): the table is renamed in place, rows and ids kept."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0004_comparison_runs'),
    ]

    operations = [
        migrations.RemoveConstraint(model_name='generation', name='generation_unique_number'),
        migrations.RemoveConstraint(model_name='generation', name='generation_one_scoring_per_campaign'),
        migrations.RenameModel(old_name='Generation', new_name='LabelingRound'),
        migrations.AlterField(
            model_name='labelinground',
            name='campaign',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='labeling_rounds',
                                    to='annotate.campaign'),
        ),
        migrations.AlterField(
            model_name='labelinground',
            name='pool',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='labeling_rounds',
                                    to='jobs.candidatepool'),
        ),
        migrations.AlterField(
            model_name='labelinground',
            name='reward_model',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL,
                                    related_name='labeling_rounds', to='jobs.rewardmodel'),
        ),
        migrations.AlterField(
            model_name='labelinground',
            name='scoring_job',
            field=models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL,
                                       related_name='labeling_round', to='jobs.scoringjob'),
        ),
        migrations.AddConstraint(
            model_name='labelinground',
            constraint=models.UniqueConstraint(fields=('campaign', 'number'), name='labelinground_unique_number'),
        ),
        migrations.AddConstraint(
            model_name='labelinground',
            constraint=models.UniqueConstraint(condition=models.Q(('status', 'scoring')), fields=('campaign',),
                                               name='labelinground_one_scoring_per_campaign'),
        ),
    ]
