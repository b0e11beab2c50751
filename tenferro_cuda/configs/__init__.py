"""Frozen, validated configuration dataclasses, one module per op family; the public
ones are re-exported from ``tenferro_cuda``."""
