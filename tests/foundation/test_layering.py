"""The house's import rules.

What runs on a GPU node never imports the web side: `rewards.training`, `rewards.evaluation` and the sampler get a
dataset file and a config and write a model and metrics; a node that has no database, no broker and no Django
settings must be able to import all of them. And the apps stand in layers (`.importlinter`): no two import each
other, and the ground (`steplab`) imports no app outside its composition root.
"""
from __future__ import annotations

import configparser
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NODE_PACKAGES = ("rewards.training", "rewards.evaluation", "rewards.sampling", "rewards.served", "stepcore")
WEB_SIDE = ("django", "rest_framework", "celery", "annotate", "steplab", "rewards.jobs", "rewards.api")

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
    web = [m for m in report["modules"] if any(m == side or m.startswith(side + ".") for side in WEB_SIDE)]
    assert web == [], f"imported on a GPU node: {web[:10]}"


CONTRACTS = ROOT / ".importlinter"
LINT = """
import sys
from importlinter.cli import lint_imports
sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True, no_logo=True))
"""


def test_the_import_contracts_hold() -> None:
    """Module-level and function-local imports count (a cycle hidden in a function is still a cycle); imports
    under TYPE_CHECKING do not."""
    env = {**os.environ, "COLUMNS": "200"}  # one contract per line in the report
    result = subprocess.run([sys.executable, "-c", LINT, str(CONTRACTS)], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=300, check=False)
    assert "Contracts:" in result.stdout, result.stdout + result.stderr  # the contracts were read and checked
    assert result.returncode == 0, result.stdout


def test_every_package_and_app_is_under_contract() -> None:
    """A new top-level package is a root package of the contracts, and a new app has its place in the layers."""
    from django.conf import settings

    config = configparser.ConfigParser()
    config.read(CONTRACTS)
    roots = config["importlinter"]["root_packages"].split()
    packages = sorted(p.parent.name for p in ROOT.glob("*/__init__.py"))
    assert sorted(roots) == packages
    layered = {name.strip("() ") for layer in config["importlinter:contract:apps"]["layers"].split("\n")
               for name in layer.replace(":", "|").split("|")}
    apps = {app.split(".")[0] for app in settings.INSTALLED_APPS if (ROOT / app.split(".")[0]).is_dir()}
    assert apps <= layered, f"not in a layer of .importlinter: {sorted(apps - layered)}"
