"""HTTP, and nothing but: the routes (one small module per area), the plain-ASGI hot
path (``hot``) and the one request pipeline it shares with the routes
(``pipeline``), API keys (``auth``), request bodies (``request_bodies``), the error
body (``errors``: the only place a :class:`service.errors.ServiceError` becomes a
status and headers), OpenAPI, and the Open Inference Protocol (``v2*``).

May import: ``service.engine`` and everything below it. Routes call the engine's
verbs (:class:`service.engine.facade.Engine`); the store only through it.

==========================================  ========  ===========================================
route                                       scope     what
==========================================  ========  ===========================================
``PUT /models/{name}``                      admin     create an online model (201; same body: 200;
                                                      other body: 409)
``GET /models``, ``GET /models/{name}``     predict   list / describe (config, version, labels,
                                                      online metrics, last checkpoint, digest)
``DELETE /models/{name}``                   admin     remove the model and all it stored (204)
``POST /models/{name}/checkpoint``          admin     checkpoint now
``PUT /models/{name}/artifact``             admin     deploy a batch-model artifact (octet-stream)
``GET /models/{name}/artifacts``            predict   stored artifact versions, active one
``PUT /models/{name}/active``               admin     serve another stored version (rollback)
``POST /update``                            update    learn; answers once durable and applied
``POST /predict``                           predict   score; ``min_version`` for read-your-writes
``GET /healthz``, ``/readyz``, ``/metrics``  none      liveness, readiness, Prometheus
``GET /v2/health/live``, ``/ready``         none      Open Inference Protocol (KServe v2) health
``GET /v2``, ``/v2/models/{name}[/ready]``  predict   v2 server / model metadata, model readiness
``POST /v2/models/{name}/infer``            predict   v2 inference on a tensor (``api/v2.py``)
==========================================  ========  ===========================================

Errors have the shape ``{"detail": {"error", "message", "field"?}}``, except on the
``/v2`` routes, which answer the protocol's ``{"error": message}`` (plus ``code``, ``field``).
"""
