"""The house's one hard import rule: what runs on a GPU node never imports the web side.

`rewards.training`, `rewards.evaluation` and the sampler get a dataset file and a config and write a model and
metrics; a node that has no database, no broker and no Django settings must be able to import all of them.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NODE_PACKAGES = ("rewards.training", "rewards.evaluation", "rewards.sampling")
WEB_SIDE = ("django", "rest_framework", "celery", "annotate", "steplab", "rewards.jobs", "rewards.api")
# The sampler splits solutions with the importer's own rule, so both agree on every step boundary: those plain
# modules (the step rules, their pattern engine, and their package's empty __init__) are shared, and they import
# nothing of the web side.
SHARED_PURE = {"annotate", "annotate.steps", "annotate.grading", "annotate.patterns", "annotate.steprules",
               *(f"annotate.steprules.{rule}" for rule in ("base", "auto", "lines", "paragraphs", "sentence", "regex"))}

PROBE = """
import importlib, json, pkgutil, sys
loaded = []
for name in sys.argv[1:]:
    package = importlib.import_module(name)
    loaded.append(name)
    for info in pkgutil.walk_packages(package.__path__, name + "."):
        importlib.import_module(info.name)
        loaded.append(info.name)
print(json.dumps({"loaded": loaded, "modules": sorted(sys.modules)}))
"""


def test_node_packages_import_nothing_of_the_web_side() -> None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}  # no DJANGO_SETTINGS_MODULE
    result = subprocess.run([sys.executable, "-c", PROBE, *NODE_PACKAGES], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(NODE_PACKAGES) <= set(report["loaded"])
    assert len(report["loaded"]) > len(NODE_PACKAGES)  # the walk reached the modules, not only the packages
    web = [m for m in report["modules"]
           if any(m == side or m.startswith(side + ".") for side in WEB_SIDE) and m not in SHARED_PURE]
    assert web == [], f"imported on a GPU node: {web[:10]}"
