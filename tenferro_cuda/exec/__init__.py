"""The execution core (DESIGN 9): one execution context per (runtime, thread) and the
objects that each hold one rule of the session contract.

- ``context.ExecContext`` -- stream, pool arena, error word, BLAS, bounded caches;
- ``guard`` -- the only code that changes the thread's CUDA context;
- ``residency`` -- the one residency check;
- ``aliasing`` -- the one overlap rule for outputs;
- ``authority`` -- scopes, and the refusal to copy or pickle what carries authority;
- ``memo.BoundedCache`` -- the one memo utility;
- ``device_errors`` -- the codes of deferred device errors;
- ``entry`` -- the op entry of the session facade (thread, scope, runtime, context);
- ``blas`` -- cuBLAS for one execution context.

Kernel launches go through ``kernels/launch.py`` (the launcher and prepared launches).
This package imports nothing at import time, so that low layers may use ``authority`` and
``memo`` without cycles.
"""
