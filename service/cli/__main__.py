"""``python -m service.cli``: the ``learnserve`` command."""

from service.cli.main import main

main()
