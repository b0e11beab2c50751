"""The op families (DESIGN 1 and 9): one package per family, each a set of plain
functions ``fn(ctx, ...)`` over an execution context (``exec/context.py``) and a
``METHODS`` table of (session method name, function) pairs that the session facade
(``_session_ops.py``) turns into methods.

Layers, bottom up: ``storage`` (copies, compaction, fills, scaling: what other families
call by name), then ``elementwise`` (with cast) and ``analytic`` on its engine,
``structural``, ``reduction``, ``blas1``, ``indexing``, ``dot``, ``fusion``, ``transfer``
and ``interop``. A family validates with ``shapes/``, checks residency and aliasing with
``exec/``, allocates through the context, and launches through prepared launches
(``kernels/launch.py``); it never reaches the native bindings, and never another
family's internals.
"""
