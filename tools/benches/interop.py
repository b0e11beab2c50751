"""Interop figures: host cost of one zero-copy hand-off, ours beside the peers' own
hand-offs of the same array, in the same run.

Every figure is a whole cycle as a user pays it, per call in us (median of 5 runs of
``CALLS`` calls, then one synchronize): the import or export, the consumer's array
dropped again, and so its release (our deferred release or the producer's deleter).
Rows:

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

from .common import Row, host_us, peers

FAMILY = "interop"
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
        rows.append(Row(
            FAMILY, f"import: session.from_dlpack({name} array)", "us",
            cost(lambda x=x: s.from_dlpack(x)),
            torch=maybe(torch, lambda x=x: torch.from_dlpack(x)),
            cupy=maybe(cupy, lambda x=x: cupy.from_dlpack(x)),
            target="<= cupy" if name == "torch" else "",
            extra={"jax": maybe(jnp is not None, lambda x=x: jnp.from_dlpack(x))},
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
        peer = {k: maybe(arrays[k] is not None, lambda k=k, take=take: take(arrays[k]))
                for k in arrays}
        rows.append(Row(
            FAMILY, f"export: {name}.from_dlpack(our tensor)", "us",
            cost(lambda take=take: take(ours)), torch=peer["torch"], cupy=peer["cupy"],
            target="<= 1.2x the fastest peer", extra={"jax": peer["jax"]},
            note=f"columns: {name}.from_dlpack of a torch / cupy (/ jax) array"))
    for name, x in (("torch", tt), ("cupy", cc)):
        if x is None:
            continue
        rows.append(Row(
            FAMILY, f"import: session.from_cuda_array_interface({name} array)", "us",
            cost(lambda x=x: s.from_cuda_array_interface(x)),
            torch=maybe(torch and name != "torch",
                        lambda x=x: torch.as_tensor(x, device="cuda:0")),
            cupy=maybe(cupy and name != "cupy", lambda x=x: cupy.asarray(x)),
            target="<= cupy",
            note=f"peers: torch.as_tensor / cupy.asarray of the same {name} array"))
    if cupy is not None:
        rows.append(Row(
            FAMILY, "export: cupy.asarray(our tensor) through the CAI", "us",
            cost(lambda: cupy.asarray(ours)),
            torch=maybe(torch, lambda: torch.as_tensor(ours, device="cuda:0")),
            cupy=maybe(tt is not None, lambda: cupy.asarray(tt)),
            note="torch column: torch.as_tensor(our tensor); cupy: cupy.asarray(torch)"))
    return rows
