"""The hot driver calls through the real bindings, against a stub driver library
(``reference/stub_libcuda.c``, built with the host C compiler and loaded as
``libcuda.so.1``): the arguments that reach the driver, through the _v2 module and
through the legacy one, a refused call as ``Failure`` or the typed error, and a stream
query's three answers (idle, busy, refused)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STUB = ROOT / "tests" / "reference" / "stub_libcuda.c"

PROBE = textwrap.dedent('''
    from cuda.bindings import driver as d
    from tenferro_cuda import _driver_fast as f
    from tenferro_cuda.errors import BackendSourceError
    print("bindings", f.BINDINGS)
    fn, stream = f.handle(d.CUfunction(0x11)), f.handle(d.CUstream(0x22))
    f.launch(fn, 4, 1, 1, 256, 1, 1, 64, stream, 0x1000, 0)
    try:
        f.launch(fn, 0xDEAD, 1, 1, 256, 1, 1, 0, stream, 0x1000, 0)
    except f.Failure as exc:
        print("failure", exc.status)
    print("current", hex(f.current()))
    f.order(d.CUevent(0x7), d.CUstream(0x5), d.CUstream(0x6))
    print("ordinal", f.pointer_ordinal(0x1000))
    try:
        f.pointer_ordinal(0xBAD)
    except BackendSourceError as exc:
        print("refused", "cuPointerGetAttribute" in str(exc))
    print("query", f.stream_query(d.CUstream(0x22)), f.stream_query(d.CUstream(0xB05)))
    try:
        f.stream_query(d.CUstream(0xBAD))
    except BackendSourceError as exc:
        print("refused", "cuStreamQuery" in str(exc))
''')


@pytest.fixture(scope="module")
def stub_dir(tmp_path_factory):
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        pytest.skip("no host C compiler for the stub driver")
    out = tmp_path_factory.mktemp("stub_libcuda")
    done = subprocess.run([cc, "-shared", "-fPIC", "-o", str(out / "libcuda.so.1"), str(STUB),
                           "-ldl"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return out


def _has_v2() -> bool:
    try:
        from cuda.bindings._v2 import driver  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("mode", ["v2", "legacy"])
def test_the_hot_calls_reach_the_driver_with_their_arguments(stub_dir, mode):
    if mode == "v2" and not _has_v2():
        pytest.skip("cuda.bindings._v2 is not installed")
    env = dict(os.environ, LD_LIBRARY_PATH=str(stub_dir), PYTHONPATH=str(ROOT))
    env.pop("TENFERRO_CUDA_DRIVER_BINDINGS", None)
    if mode == "legacy":
        env["TENFERRO_CUDA_DRIVER_BINDINGS"] = "legacy"
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout.split("\n")
    want = "cuda.bindings._v2.driver" if mode == "v2" else "cuda.bindings.driver"
    assert out[:8] == [f"bindings {want}", "failure 1", "current 0x5000", "ordinal 3",
                       "refused True", "query True False", "refused True", ""], done.stdout
    calls = [line for line in done.stderr.split("\n")
             if line.split(" ")[0] in ("launch", "record", "wait", "pointer", "query")]
    assert calls == [
        "launch 0x11 4 1 1 256 1 1 64 0x22 0x1000 (nil)",
        "launch 0x11 57005 1 1 256 1 1 0 0x22 0x1000 (nil)",
        "record 0x7 0x5",
        "wait 0x6 0x7 0",
        "pointer 9 1000",
        "pointer 9 bad",
        "query 0x22",
        "query 0xb05",
        "query 0xbad",
    ], done.stderr
