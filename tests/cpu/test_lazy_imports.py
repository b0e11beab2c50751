"""``import tenferro_cuda`` stays light: ml_dtypes (bfloat16's host type, most of a second to
import), the native bindings and the kernel families load on first need only, and the
bfloat16 host paths still work once they are needed.

Each check runs in a fresh interpreter, so the set of imported modules is its own.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

LAZY = ("ml_dtypes", "cuda", "nvmath", "nccl", "tqdm", "tenferro_cuda.kernels.families",
        "tenferro_cuda.collectives", "tenferro_cuda._nccl")


def _run(code: str) -> dict:
    head = "import json, sys\n"
    head += f"def loaded():\n    return sorted(m for m in sys.modules if m.startswith({LAZY!r}))\n"
    proc = subprocess.run([sys.executable, "-c", head + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"subprocess failed:\n{proc.stdout}\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_import_and_eager_names_load_none_of_the_lazy_modules():
    out = _run("""
        import numpy as np
        import tenferro_cuda as tc
        from tenferro_cuda import DType, Tensor, as_dtype
        # what needs no host bfloat16 dtype works without ml_dtypes
        facts = [DType.BFLOAT16.itemsize, DType.BFLOAT16.ctype, DType.BFLOAT16.is_float,
                 as_dtype("bfloat16").value, as_dtype(np.float16).value,
                 Tensor.from_numpy(np.arange(3.0)).dtype.value, tc.bfloat16.value]
        for bad in ("datetime64[s]", "U3", object):
            try:
                as_dtype(bad)
            except tc.UnsupportedDTypeError:
                facts.append("rejected")
        print(json.dumps({"loaded": loaded(), "facts": facts}))
    """)
    assert out["loaded"] == [], f"`import tenferro_cuda` imported {out['loaded']}"
    assert out["facts"] == [2, "tf::bfloat16", True, "bfloat16", "float16", "float64",
                            "bfloat16", "rejected", "rejected", "rejected"]


def test_bfloat16_host_round_trip_imports_ml_dtypes_on_first_need():
    out = _run("""
        import numpy as np
        from tenferro_cuda import DType, Tensor, as_dtype
        before = loaded()
        host = DType.BFLOAT16.numpy               # the first need
        import ml_dtypes
        a = np.array([[1.5, -2.0, 3.0e38], [0.0, -0.0, 2.0**-133]], dtype=host)
        t = Tensor.from_numpy(a)
        back = t.numpy()
        view = t[:, ::-2].numpy()
        print(json.dumps({
            "before": before, "ml_dtypes": "ml_dtypes" in sys.modules,
            "host_is_ml_dtypes": host == np.dtype(ml_dtypes.bfloat16),
            "dtype": t.dtype.value, "as_dtype": as_dtype(host).value,
            "as_dtype_type": as_dtype(ml_dtypes.bfloat16).value,
            "itemsize": [host.itemsize, DType.BFLOAT16.itemsize],
            "same": back.dtype == a.dtype and back.tobytes() == a.tobytes(),
            "view": view.tobytes() == a[:, ::-2].tobytes(),
            "empty": Tensor.from_numpy(np.zeros((0, 2), host)).numpy().dtype == host}))
    """)
    assert out["before"] == []
    assert out == {**out, "ml_dtypes": True, "host_is_ml_dtypes": True, "dtype": "bfloat16",
                   "as_dtype": "bfloat16", "as_dtype_type": "bfloat16", "itemsize": [2, 2],
                   "same": True, "view": True, "empty": True}


def test_a_bfloat16_array_made_by_the_user_maps_before_any_accessor():
    # ml_dtypes imported by the caller, not by tenferro_cuda: as_dtype still knows it
    out = _run("""
        import ml_dtypes
        import numpy as np
        import tenferro_cuda as tc
        a = np.arange(4, dtype=ml_dtypes.bfloat16)
        t = tc.Tensor.from_numpy(a)
        other = []
        for bad in (ml_dtypes.float8_e4m3fn, np.dtype(ml_dtypes.int4)):
            try:
                tc.as_dtype(bad)
            except tc.UnsupportedDTypeError:
                other.append("rejected")
        print(json.dumps({"dtype": t.dtype.value, "is": t.dtype is tc.bfloat16,
                          "back": t.numpy().tobytes() == a.tobytes(), "other": other}))
    """)
    assert out == {"dtype": "bfloat16", "is": True, "back": True,
                   "other": ["rejected", "rejected"]}


def test_one_kernel_family_imports_only_its_own_module():
    out = _run("""
        from tenferro_cuda.kernels import registry
        fam = registry.family("copy")
        first = loaded()
        names = registry.family_names()
        after_listing = loaded()
        print(json.dumps({"first": first, "listed": after_listing == first,
                          "name": fam.name, "names": list(names)}))
    """)
    assert out["first"] == ["tenferro_cuda.kernels.families",
                            "tenferro_cuda.kernels.families.copy"]
    assert out["listed"] and out["name"] == "copy" and "copy" in out["names"]
