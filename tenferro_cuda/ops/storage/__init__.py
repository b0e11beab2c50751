"""Storage: copies between views, compaction, fills and scaling -- the shared needs every
other family calls by name (DESIGN 1). Plain functions over an ``ExecContext``."""

from .copy import copy_into, copy_layout, materialize, permute_into
from .fill import fill, scale

__all__ = ["copy_into", "copy_layout", "materialize", "permute_into", "fill", "scale"]
