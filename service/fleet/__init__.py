"""Who holds which model when many workers share one store.

- :mod:`~service.fleet.membership`: live members as heartbeat leases in the store;
- :mod:`~service.fleet.ownership`: owners of a model by rendezvous hashing;
- :mod:`~service.fleet.placement`: this worker's role per model (owner or guest)
  and the LRU of guests.

May import: ``service.store`` and the leaves. Never ``service.engine``: placement
acts on the engine's table through the hooks it is given
(:class:`~service.fleet.placement.PlacementHooks`).
"""
