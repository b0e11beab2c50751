"""NVRTC compilation, the kernel cache, the registry of ``ptx/`` families, and launch
argument packing."""
