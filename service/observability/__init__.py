"""Metrics (prometheus-client), process statistics and the event-loop lag monitor.

A leaf: imports nothing of the service but ``service.settings``.
"""
