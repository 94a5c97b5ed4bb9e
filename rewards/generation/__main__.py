"""``python -m rewards.generation …`` = ``python -m rewards.sampling …``."""
from __future__ import annotations

import sys

from rewards.sampling.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
