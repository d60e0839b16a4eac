"""Benchmarks: scripts that print a table and write ``bench/results/<name>.json``."""
