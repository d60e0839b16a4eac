"""The ``learnserve`` command line: serve, warmup, train, import, evaluate, deploy,
export; and, against a running service, ``models``, ``update`` and ``predict``.

:mod:`service.cli.main` holds the Typer app and registers every sub-command on it
(``learnserve = "service.cli.main:main"``; ``python -m service.cli`` runs the same).
Each other module is one command or group: plain functions, or its own
``typer.Typer`` for a group (``models``, ``import``), that ``main`` registers; none of
them imports ``main``. :mod:`service.cli.service_options` holds the options and error
reporting shared by the commands that talk to a service.

What this package may import: :mod:`service.client` for everything said to a running
service (its retries and typed errors; no HTTP library directly), ``learners`` for
training, evaluating and checking artifacts, and, inside ``serve`` and ``warmup`` only,
the server's startup modules (``service.settings``, ``service.models.warmup``; ``serve`` starts
``service.app`` through uvicorn). Nothing from ``service.api``.

This file imports nothing: ``import service.cli.<module>`` runs it first.
"""
