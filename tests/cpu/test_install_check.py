"""``python -m tenferro_cuda`` and ``tools/precompile.py``: what they compile (one
instantiation per family and arch by default, every one with ``--all``), the truthful
"compiled N, from the cache M" report, ``--help``, the one no-GPU line, and the progress
display (a tqdm bar on a terminal, plain lines otherwise). Compiles use the real NVRTC
into a temporary ``TENFERRO_CUDA_CACHE_DIR``."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tenferro_cuda.__main__ import main, no_gpu_line
from tenferro_cuda.errors import CompileError, CudaDeviceError, ValidationError
from tenferro_cuda.kernels import compiler, precompile
from tenferro_cuda.kernels.precompile import Job, Progress, plan, run
from tenferro_cuda.kernels.registry import family, family_names

ROOT = Path(__file__).resolve().parents[2]
REPORT = re.compile(r"(\d+) kernels of (\d+) famil(?:y|ies) for ([sm_0-9, ]+): "
                    r"compiled (\d+), from the cache (\d+)")


def _cli(args: list[str], cache: Path) -> tuple[str, tuple[int, int, int]]:
    """Run a command with ``cache`` as the kernel cache; (stdout, (kernels, compiled,
    from the cache)) of its report line."""
    env = {**os.environ, "TENFERRO_CUDA_CACHE_DIR": str(cache)}
    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          timeout=600, cwd=ROOT)
    assert proc.returncode == 0, f"{args} failed:\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    found = REPORT.findall(proc.stdout)
    assert len(found) == 1, proc.stdout
    kernels, _, _, compiled, cached = found[0]
    return proc.stdout, (int(kernels), int(compiled), int(cached))


def _entries(cache: Path) -> int:
    return len(list(cache.glob("*.tfk")))


# --- what is compiled ----------------------------------------------------------------------

def test_default_plan_is_one_instantiation_per_family_and_arch():
    jobs = plan([80, 90])
    names = family_names()
    assert [(j.arch, j.family) for j in jobs] == [(a, n) for a in (80, 90) for n in names]
    for job in jobs:
        assert job.expression == family(job.family).all_expressions()[0]


def test_every_plan_covers_every_instantiation_once():
    jobs = plan([90], every=True)
    expected = [(n, e) for n in family_names() for e in family(n).all_expressions()]
    assert [(j.family, j.expression) for j in jobs] == expected
    assert {j.arch for j in jobs} == {90}
    some = plan([90, 90, 80], every=True, names=["copy", "structural", "copy"])
    assert len(some) == 2 * (len(family("copy").all_expressions())
                             + len(family("structural").all_expressions()))


@pytest.mark.parametrize("archs", [[], [12], [True], ["90"], [90, 7.5]])
def test_plan_rejects_bad_archs(archs):
    with pytest.raises(ValidationError, match=re.escape(repr(list(archs)))):
        plan(archs)


def test_plan_rejects_an_unknown_family():
    with pytest.raises(ValidationError, match="no kernel family 'nope'.*known: .*copy"):
        plan([90], names=["copy", "nope"])


# --- the command line ------------------------------------------------------------------------

def test_default_check_compiles_one_per_family_then_reads_the_cache(tmp_path, gpu_present):
    n = len(family_names())
    out, counts = _cli(["-m", "tenferro_cuda", "--arch", "80"], tmp_path)
    assert counts == (n, n, 0)
    assert "one instantiation per family" in out
    if not gpu_present:
        assert _entries(tmp_path) == n
        (line,) = [ln for ln in out.splitlines() if ln.startswith("no GPU")]
        assert len(line) < 120 and line.lower().count("driver") <= 1
    out, counts = _cli(["-m", "tenferro_cuda", "--arch", "80"], tmp_path)
    assert counts == (n, 0, n)
    # the entries are the ones the runtime looks up: one program per instantiation
    for name in family_names():
        expr = family(name).all_expressions()[0]
        assert compiler.warm_family(name, (expr,), 80, cache=compiler.KernelCache(tmp_path)) \
            is False


def test_all_and_the_precompile_tool_compile_every_instantiation(tmp_path):
    n = len(family("structural").all_expressions())
    _, counts = _cli(["tools/precompile.py", "--family", "structural", "--arch", "80",
                      "--jobs", "2"], tmp_path)
    assert counts == (n, n, 0) and _entries(tmp_path) == n
    out, counts = _cli(["-m", "tenferro_cuda", "--all", "--family", "structural", "--arch",
                        "80", "--jobs", "1"], tmp_path)
    assert counts == (n, 0, n) and "every instantiation" in out
    _, counts = _cli(["-m", "tenferro_cuda", "--all", "--family", "structural", "--family",
                      "copy", "--arch", "80", "--jobs", "2"], tmp_path)
    copies = len(family("copy").all_expressions())
    assert counts == (n + copies, copies, n)


def test_help_and_bad_arguments(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert "usage: python -m tenferro_cuda" in text and "--all" in text and "--arch" in text
    for bad, message in ((["--arch", "12"], "ints >= 50"), (["--family", "nope"], "nope"),
                         (["--jobs", "0"], "--jobs must be >= 1"), (["--frobnicate"], "")):
        with pytest.raises(SystemExit) as exit_:
            main(bad)
        assert exit_.value.code == 2
        assert message in capsys.readouterr().err


def test_the_no_gpu_line_names_the_missing_driver_once():
    loader = ('DynamicLibNotFoundError: "cuda" is an NVIDIA driver library and can only be '
              "found via system search. Ensure the NVIDIA display driver is installed.")
    exc = CudaDeviceError(f"no NVIDIA driver: libcuda could not be loaded ({loader})",
                          op="cuInit")
    line = no_gpu_line(exc)
    assert line == "no GPU: no NVIDIA driver: libcuda could not be loaded"
    assert no_gpu_line(CudaDeviceError("no CUDA device: the driver reports 0 devices")) == (
        "no GPU: no CUDA device: the driver reports 0 devices")
    long = no_gpu_line(CudaDeviceError("x" * 300, op="cuInit"))
    assert len(long) < 120 and long.endswith("...")


# --- running a plan, progress ----------------------------------------------------------------

def test_a_compile_error_stops_the_run(monkeypatch):
    jobs = [Job("copy", "tf::fill<tf::u8>", 80), Job("copy", "tf::fill<tf::u32>", 80)]
    seen = []

    def build(job):
        seen.append(job)
        raise CompileError("error: boom", op="compile:copy")

    monkeypatch.setattr(precompile, "_build", build)
    stream = io.StringIO()
    progress = Progress(len(jobs), stream)
    with pytest.raises(CompileError, match="boom"):
        run(jobs, progress=progress)
    assert seen == jobs[:1] and progress.done == 0
    with pytest.raises(ValidationError, match="workers must be >= 1"):
        run(jobs, workers=0)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_progress_lines_off_a_terminal():
    stream = io.StringIO()
    progress = Progress(3, stream, every_s=0.0)
    for compiled in (True, False, True):
        progress.update(compiled)
    progress.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 3 and progress.bar is None
    assert lines[-1].startswith("kernels: 3/3 (2 compiled, 1 from the cache, ")
    quiet = io.StringIO()
    progress = Progress(3, quiet, every_s=1e9)
    for _ in range(3):
        progress.update(True)
    (line,) = quiet.getvalue().splitlines()  # the last kernel always gets its line
    assert line.startswith("kernels: 3/3 (3 compiled, 0 from the cache, ")


def test_a_terminal_gets_a_tqdm_bar():
    pytest.importorskip("tqdm")
    stream = _Tty()
    progress = Progress(4, stream)
    assert progress.bar is not None
    for compiled in (True, True, False, True):
        progress.update(compiled)
    progress.close()
    assert "4/4" in stream.getvalue() and "3 compiled" in stream.getvalue()


def test_a_terminal_without_tqdm_gets_plain_lines(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm raises ImportError
    stream = _Tty()
    progress = Progress(2, stream, every_s=1e9)
    progress.update(False)
    progress.update(False)
    assert progress.bar is None
    assert stream.getvalue().startswith("kernels: 2/2 (0 compiled, 2 from the cache, ")
