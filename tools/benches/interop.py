"""Interop figures: host cost of one zero-copy hand-off, ours beside the peers' own
hand-offs of the same array, in the same run.

Every figure is a whole cycle as a user pays it, per call in us (median of 5 runs of
``CALLS`` calls, then one synchronize): the import or export, the consumer's array
dropped again, and so its release (our deferred release or the producer's deleter).
Ours and the peers of a row with a target are timed in the same interleaved rounds
(``host_us_group``), so that a change in the host's load between them does not decide
the ratio. Rows:

- import via DLPack from PyTorch, CuPy and JAX: ``session.from_dlpack(x)`` beside
  ``cupy.from_dlpack(x)`` / ``torch.from_dlpack(x)`` (jax's in ``extra``); the issue's
  target: ours <= CuPy's import of the same PyTorch tensor;
- the same import with ``stream=session.stream`` (the producer's data is on our stream:
  no event on either side), and the producer's own ``__dlpack__`` for each ``stream=``
  value we could pass (why we pass 1);
- export via DLPack to PyTorch, CuPy and JAX: ``torch.from_dlpack(ours)`` beside
  ``torch.from_dlpack(cupy array)`` and ``torch.from_dlpack(torch tensor)``, and so on;
  target: <= 1.2x the fastest peer-to-peer export of the same kind;
- the CUDA Array Interface both ways: ``session.from_cuda_array_interface(x)`` beside
  ``cupy.asarray(x)`` / ``torch.as_tensor(x)`` of the same producer; target: <= CuPy's.
"""

from __future__ import annotations

import os

import numpy as np

from .common import Row, host_us, host_us_group, peers

FAMILY = "interop"
TARGET = "<= 1.2x the fastest peer"
CALLS = 2000
N = 1 << 16


def _jax():
    """jax.numpy when JAX has a GPU, else None (imported after disabling preallocation)."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    try:
        import jax
        import jax.numpy as jnp

        return jnp if jax.devices("gpu") else None
    except Exception:  # noqa: BLE001 - no jax, or no GPU backend
        return None


def run(s) -> list[Row]:
    torch, cupy = peers()
    jnp = _jax()

    def sync() -> None:
        s.synchronize()
        if torch is not None:
            torch.cuda.synchronize()
        if cupy is not None:
            cupy.cuda.Device().synchronize()

    def cost(fn) -> float:
        return host_us(fn, sync, calls=CALLS, repeats=5)

    def maybe(ok, fn) -> float | None:
        return cost(fn) if ok else None

    def together(**fns) -> dict:
        """The figures of ours and the peers of one row (None: no such peer), timed in
        the same interleaved rounds; an entry is a function, or (function, scope) to run
        its batches under ``scope()`` (``host_us_group``)."""
        return host_us_group(
            {k: None if f is None else (f[0], sync, f[1]) if type(f) is tuple else (f, sync)
             for k, f in fns.items()}, calls=CALLS, repeats=5)

    ours = s.upload_host_tensor(np.arange(N, dtype=np.float32).reshape(256, 256))
    arrays = {
        "torch": torch.arange(N, device="cuda:0", dtype=torch.float32) if torch else None,
        "cupy": cupy.arange(N, dtype=cupy.float32) if cupy else None,
        "jax": jnp.arange(N, dtype=jnp.float32) if jnp is not None else None,
    }
    tt, cc = arrays["torch"], arrays["cupy"]
    rows = []
    for name, x in arrays.items():
        if x is None:
            continue
        us = together(
            ours=lambda x=x: s.from_dlpack(x),
            torch=(lambda x=x: torch.from_dlpack(x)) if torch else None,
            cupy=(lambda x=x: cupy.from_dlpack(x)) if cupy else None,
            jax=(lambda x=x: jnp.from_dlpack(x)) if jnp is not None else None)
        rows.append(Row(
            FAMILY, f"import: session.from_dlpack({name} array)", "us", us["ours"],
            torch=us["torch"], cupy=us["cupy"],
            target="<= cupy" if name == "torch" else "", extra={"jax": us["jax"]},
            note=f"peers: their from_dlpack of the same {name} array (jax in extra)"))
    if tt is not None:
        stream = s.stream
        rows.append(Row(
            FAMILY, "import: session.from_dlpack(torch tensor, stream=session.stream)", "us",
            cost(lambda: s.from_dlpack(tt, stream=stream)),
            cupy=maybe(cupy, lambda: cupy.from_dlpack(tt)),
            note="the producer wrote on our stream: __dlpack__(stream=-1), no event"))
        ptr = torch.cuda.Stream()
        for value, label in ((1, "1"), (-1, "-1"), (ptr.cuda_stream, "a side stream")):
            rows.append(Row(
                FAMILY, f"producer: torch __dlpack__(stream={label}, max_version=(1, 0))",
                "us", cost(lambda v=value: tt.__dlpack__(stream=v, max_version=(1, 0))),
                note="the producer's part of an import: what each stream= costs"))
    consumers = {"torch": (torch, lambda x: torch.from_dlpack(x)),
                 "cupy": (cupy, lambda x: cupy.from_dlpack(x)),
                 "jax": (jnp, lambda x: jnp.from_dlpack(x))}
    for name, (module, take) in consumers.items():
        if module is None:
            continue
        us = together(ours=lambda take=take: take(ours), **{
            k: (lambda k=k, take=take: take(arrays[k])) if arrays[k] is not None else None
            for k in arrays})
        rows.append(Row(
            FAMILY, f"export: {name}.from_dlpack(our tensor)", "us", us["ours"],
            torch=us["torch"], cupy=us["cupy"], extra={"jax": us["jax"]},
            note=f"columns: {name}.from_dlpack of a torch / cupy (/ jax) array, handed "
                 f"over on one stream; ours orders (the target rows are below)"))
    if torch is not None and cupy is not None:
        rows += _exports_by_ordering(s, torch, cupy, ours, together)
    for name, x in (("torch", tt), ("cupy", cc)):
        if x is None:
            continue
        us = together(
            ours=lambda x=x: s.from_cuda_array_interface(x),
            torch=(lambda x=x: torch.as_tensor(x, device="cuda:0"))
            if torch and name != "torch" else None,
            cupy=(lambda x=x: cupy.asarray(x)) if cupy and name != "cupy" else None)
        rows.append(Row(
            FAMILY, f"import: session.from_cuda_array_interface({name} array)", "us",
            us["ours"], torch=us["torch"], cupy=us["cupy"], target="<= cupy",
            note=f"peers: torch.as_tensor / cupy.asarray of the same {name} array"))
    if cupy is not None:
        rows.append(Row(
            FAMILY, "export: cupy.asarray(our tensor) through the CAI", "us",
            cost(lambda: cupy.asarray(ours)),
            torch=maybe(torch, lambda: torch.as_tensor(ours, device="cuda:0")),
            cupy=maybe(tt is not None, lambda: cupy.asarray(tt)),
            note="torch column: torch.as_tensor(our tensor); cupy: cupy.asarray(torch)"))
    return rows


def _exports_by_ordering(s, torch, cupy, ours, together) -> list[Row]:
    """Export figures that compare like with like, the issue's target rows (<= 1.2x the
    fastest peer-to-peer export of the same kind), each timed with its peer in the same
    interleaved rounds. Our tensor lives on the session's own non-blocking stream, so an
    export to a consumer on another stream orders: an event recorded and waited for, and,
    for a consumer on a default stream, again when the consumer lets go
    (docs/interop.md). The peer-to-peer figures of the export rows above hand over on the
    default stream their consumer uses too: no event. Here:

    - ours with the consumer's current stream set to our stream (no event on either side),
      beside the peers' hand-offs on the default stream (no event either);
    - ours to a consumer on the default stream (ordered), beside the peers' hand-offs of
      an array whose producer's current stream is a non-blocking side stream, so that
      they order too (CuPy and PyTorch record an event and make the consumer wait).
    """
    ours_torch = torch.cuda.ExternalStream(int(s.stream))
    ours_cupy = cupy.cuda.ExternalStream(int(s.stream))
    c_default = cupy.arange(N, dtype=cupy.float32)
    c_side_stream = cupy.cuda.Stream(non_blocking=True)
    with c_side_stream:
        c_side = cupy.arange(N, dtype=cupy.float32)
    t_side_stream = torch.cuda.Stream()
    with torch.cuda.stream(t_side_stream):
        t_side = torch.arange(N, device="cuda:0", dtype=torch.float32)

    def on_torch(stream):
        return lambda: torch.cuda.stream(stream)

    def on_cupy(stream):
        return lambda: stream  # (a CuPy stream is its own context manager)

    rows = []
    us = together(ours=(lambda: torch.from_dlpack(ours), on_torch(ours_torch)),
                  cupy=lambda: torch.from_dlpack(c_default))
    rows.append(Row(
        FAMILY, "export: torch.from_dlpack(our tensor), torch's current stream ours", "us",
        us["ours"], cupy=us["cupy"], target=TARGET,
        note="no event on either side; cupy: torch.from_dlpack(cupy array), both on the "
             "default stream"))
    us = together(ours=(lambda: cupy.from_dlpack(ours), on_cupy(ours_cupy)),
                  cupy=lambda: cupy.from_dlpack(c_default))
    rows.append(Row(
        FAMILY, "export: cupy.from_dlpack(our tensor), cupy's current stream ours", "us",
        us["ours"], cupy=us["cupy"], target=TARGET,
        note="no event on either side; cupy: cupy.from_dlpack(cupy array) on the default "
             "stream (the fastest peer: CuPy's from PyTorch is in the row above)"))
    us = together(ours=lambda: torch.from_dlpack(ours),
                  cupy=(lambda: torch.from_dlpack(c_side), on_cupy(c_side_stream)))
    rows.append(Row(
        FAMILY, "export: torch.from_dlpack(our tensor) beside an ordering peer", "us",
        us["ours"], cupy=us["cupy"], target=TARGET,
        note="torch on the default stream; cupy: torch.from_dlpack(cupy array) with CuPy's "
             "current stream a non-blocking side stream (CuPy orders with an event)"))
    us = together(ours=lambda: cupy.from_dlpack(ours),
                  torch=(lambda: cupy.from_dlpack(t_side), on_torch(t_side_stream)))
    rows.append(Row(
        FAMILY, "export: cupy.from_dlpack(our tensor) beside an ordering peer", "us",
        us["ours"], torch=us["torch"], target=TARGET,
        note="cupy on the default stream; torch: cupy.from_dlpack(torch tensor) with "
             "PyTorch's current stream a side stream (PyTorch orders with an event)"))
    return rows
