"""``python -m service.cli``: the ``learnserve`` command."""

from service.cli import main

main()
