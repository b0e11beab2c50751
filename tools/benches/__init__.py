"""Benchmark cases, one module per op family; ``tools/bench.py`` runs them all."""
