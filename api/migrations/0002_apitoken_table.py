# The moved table takes this app's name (a rename: rows, indexes and constraints stay as they are).

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('api', '0001_initial'),
    ]

    operations = [
        migrations.AlterModelTable(name='apitoken', table=None),
    ]
