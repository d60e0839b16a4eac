"""The child that compiles one kernel family: ``python -m service.models.kernel_compile
NAME [--behind]``, its figures as one JSON line on stdout (see
:func:`service.models.kernel_families.compile_family`). ``--behind``: at a lower CPU
priority than the server that started it."""

from __future__ import annotations

import json
import os
import sys

from service.models.kernel_families import compile_family
from service.models.warmup import family

if __name__ == "__main__":
    if "--behind" in sys.argv[2:]:
        os.nice(10)  # behind the server for the CPU: a request must not wait for a compile
    name = sys.argv[1]
    print(json.dumps(compile_family(name, family(name).run)), flush=True)
