"""learnserve's server, its command line and its client.

Layers, each importing only the layers below it (frozen by the import-linter
contracts in ``pyproject.toml``, run by ``make test``; no import cycle anywhere)::

    app | cli            entry points: compose the service (store -> fleet -> engine ->
                         apply loop -> FastAPI); the command line
    api                  HTTP only: routes, the plain-ASGI hot path, auth, request bodies,
                         OpenAPI, KServe v2; turns domain errors into HTTP
    engine               the models this process hosts: the registry (a table), the
                         engine facade and the modules implementing its verbs
    fleet                membership, ownership, placement; gets hooks, never the engine
    models | store       model adapters and wire codecs | the store contract and its
                         implementations (SQLite, Redis, Redis Cluster)
    observability : settings : errors      leaves: metrics, settings, domain errors
    learners             (a package of its own) below everything; never imports service

``client`` stands apart: it imports nothing of the server (it needs only httpx and
orjson), so it can ship alone. This file imports nothing, so that importing
``service.client`` loads nothing of the server.
"""
