"""One module per kernel family (``ptx/<file>.cu``); each defines ``FAMILY``."""
