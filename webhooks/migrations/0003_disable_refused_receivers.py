"""Turn off the stored webhooks whose URL the outbound rules now refuse (stepcore/outbound.py: userinfo, a
backslash, parsers that disagree on the host, an address written in the URL that is not public nor allowed),
with the reason kept on the hook and shown on its page. Names are not resolved here: a send checks them."""
from typing import Any

from django.conf import settings
from django.db import migrations

from stepcore.outbound import Rules, allowed_from, refusal


def disable_refused(apps: Any, schema_editor: Any) -> None:
    webhook = apps.get_model("webhooks", "Webhook")
    rules = Rules(allowed=allowed_from(settings.STEPLAB_WEBHOOK_ALLOWED_HOSTS), deadline_s=1.0, max_answer_bytes=0,
                  setting="STEPLAB_WEBHOOK_ALLOWED_HOSTS")
    for hook in webhook.objects.filter(is_active=True).only("pk", "url"):
        reason = refusal(hook.url, rules=rules, resolve=False)
        if reason:
            webhook.objects.filter(pk=hook.pk).update(is_active=False, disabled_reason=f"URL refused: {reason}")


class Migration(migrations.Migration):
    dependencies = [("webhooks", "0002_outbound_claims")]

    operations = [migrations.RunPython(disable_refused, migrations.RunPython.noop)]
