"""The execution core (DESIGN 9): one execution context per (runtime, thread) and the
objects that each hold one rule of the session contract.

- ``context.ExecContext`` -- stream, pool arena, error word, BLAS, bounded caches;
- ``guard`` -- the only code that changes the thread's CUDA context;
- ``residency`` -- the one residency check;
- ``device_errors`` -- the codes of deferred device errors;
- ``entry`` -- the op entry of the session facade (thread, scope, runtime, context);
- ``blas`` -- cuBLAS for one execution context.

Kernel launches go through ``kernels/launch.py`` (the launcher and prepared launches).
Three rules that lower layers need too live below this package: ``authority.py`` (scopes,
and the refusal to copy or pickle what carries authority), ``memo.py`` (the one
bounded-cache utility of every memo) and ``shapes/aliasing.py`` (the one overlap rule for
outputs, pure Python like the rest of ``shapes/``).
"""
