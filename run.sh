#!/usr/bin/env bash
set -uo pipefail
cd /work/main
export HF_HUB_OFFLINE=1
export PYTHONPATH=/work/main
export PYTHONUNBUFFERED=1
export TOKENIZERS_PARALLELISM=false
export TRANSFORMERS_OFFLINE=1
rm -f ./exit_code
(
  /work/main/.venv/bin/python -m rewards.training train --config job.json
) >>./stdout.log 2>>./stderr.log
status=$?
echo $status > ./exit_code.partial && mv ./exit_code.partial ./exit_code
exit $status
