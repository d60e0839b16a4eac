"""The models this process hosts, and every verb on them.

- :mod:`~service.engine.facade`: :class:`~service.engine.facade.Engine`, the verbs
  (find, create, delete, import, submit an update, wait for a version, deploy,
  activate, roll back, checkpoint), over
- :mod:`~service.engine.registry`: the table of models (and the lock rules);
  :mod:`~service.engine.model_handle`: one hosted model and the checkpoint format;
- the modules that implement the verbs, each given the table: ``catalog``,
  ``log_application`` (the log applied in order, and its integrity),
  ``update_submission``, ``update_outcomes``, ``checkpoints``, ``batch_versions``,
  ``transfers`` (export/import);
- above the façade: ``requests`` (the ``/update`` and ``/predict`` bodies served),
  ``delayed_labels`` and ``apply_loop`` (every worker applies every log).

May import: ``service.fleet``, ``service.models``, ``service.store`` and the leaves
(``errors``, ``settings``, ``observability``), and ``learners``. Never
``service.api``: errors are :class:`service.errors.ServiceError`, not HTTP.
"""
