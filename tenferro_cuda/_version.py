"""The package version: one place, read by the package, the kernel cache key and setuptools."""

__version__ = "0.1.0"
