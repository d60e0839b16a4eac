"""Model adapters and wire codecs: what the service hosts and how bodies become batches.

- :mod:`~service.models.kinds`: the kinds (``ADAPTERS``) and algorithms, and the
  adapter class for each; :mod:`~service.models.base`, the adapter contract;
  one adapter module per kind (``linear``, ``ranksvm``, ``lambdamart``, ``llsvm``,
  ``fastxml``, over :mod:`~service.models.batch`).
- Wire codecs: the log entry's payload (``payload``), request JSON fields
  (``json_fields``), compiled JSON scanners (``fast_json*``, ``json_scan_*``),
  feature names, weights, queries, delayed-label rows.
- :mod:`~service.models.warmup`: the kernels compiled ahead of traffic.

May import: ``learners``, ``service.errors``, ``service.settings``,
``service.observability``. Never ``service.api``, ``service.engine`` or the store:
nothing here knows HTTP or where state is kept.
"""

# Before any kernel module here imports numba: ``learners`` names numba's cache
# locators that also watch the modules a kernel inlines (learners._kernel_cache).
import learners  # noqa: F401
