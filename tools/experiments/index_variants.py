"""Experiment (issue 5): candidate indexing kernels beside the library op on the same data.

    PYTHONPATH=. python3 tools/experiments/index_variants.py [--only gather,scatter] [--no-torch]
    PYTHONPATH=. python3 tools/experiments/index_variants.py --compile-only [--arch 90]

Kernels: tools/experiments/index_variants.cu (float32 data, int64 indices); variant lists:
index_variants_cases.py. Each case builds its data on the device, runs the library op (the
reference result and the "library" row), then each variant: one launch, a check against
the library result (bit-exact; scatter-add within 1e-5 relative, atomics reorder sums),
then the CUDA-event median of 5 samples after warm-up (tools/benches/common.py). Output:

    case        variant                                  ms       GB/s  check

GB/s uses the formulas of tools/benches/indexing.py; a wrong result prints
"!!! MISMATCH"; a failed variant prints FAILED and the run goes on. Every case has a
time budget. --compile-only compiles every variant for --arch with NVRTC (no GPU needed)
and prints registers and spill bytes per kernel.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tools"), str(Path(__file__).resolve().parent)]

import index_variants_cases as sp  # noqa: E402

from tenferro_cuda.kernels.compiler import compile_cached  # noqa: E402

SRC = Path(__file__).with_name("index_variants.cu")
OPTIONS = ("--ptxas-options=-v",)
N2 = 16384
WARMUP, ITERS = 2, 5
CASE_BUDGET_S, TOTAL_BUDGET_S = 25.0, 150.0


def compile_group(exprs, arch):
    """[(program, its expressions)] and {expr: exception}: one NVRTC program for the group;
    when that fails, one program per expression so that only the broken ones drop out."""
    src, failed = SRC.read_text(), {}
    try:
        return [(compile_cached(src, "index_variants.cu", tuple(exprs), arch, OPTIONS),
                 list(exprs))], failed
    except Exception:  # isolate the failing expressions below
        progs = []
        for e in exprs:
            try:
                progs.append((compile_cached(src, "index_variants.cu", (e,), arch, OPTIONS),
                              [e]))
            except Exception as exc:
                failed[e] = exc
        return progs, failed


def ptxas_stats(prog) -> dict[str, tuple[int, int]]:
    """mangled name -> (registers, spill store bytes) from the ptxas -v log."""
    stats, name, spill = {}, "", 0
    for line in prog.log.splitlines():
        if m := re.search(r"Function properties for (\S+)", line):
            name = m.group(1)
        elif m := re.search(r"(\d+) bytes spill stores", line):
            spill = int(m.group(1))
        elif (m := re.search(r"Used (\d+) registers", line)) and name:
            stats[name] = (int(m.group(1)), spill)
    return stats


def compile_only(arch: int) -> int:
    bad = 0
    for group, exprs in sp.all_groups():
        t0 = time.perf_counter()
        progs, failed = compile_group(exprs, arch)
        print(f"[{group}] {len(exprs)} kernels, sm_{arch}, {time.perf_counter() - t0:.1f} s")
        for prog, es in progs:
            stats = ptxas_stats(prog)
            for e in es:
                regs, spill = stats.get(prog.lowered[e], (-1, -1))
                flag = "  <-- SPILLS" if spill > 0 else ""
                print(f"    {e:<40} regs {regs:3d}  spill {spill} B{flag}")
        for e, exc in failed.items():
            bad += 1
            print(f"    {e:<40} !!! COMPILE FAILED: {str(exc).splitlines()[0][:200]}")
    print("all variants compiled" if not bad else f"!!! {bad} variants failed to compile")
    return 1 if bad else 0


class Harness:
    """Launches, timing, checks and the printed table, on one session's stream."""

    def __init__(self, s, ks, torch) -> None:
        import tenferro_cuda as tc
        from tenferro_cuda import _driver

        self.s, self.ks, self.torch, self.tc, self.drv = s, ks, torch, tc, _driver
        self.stream = _driver.stream_handle(s.stream_handle)
        info = s.device_info()
        self.sms, self.arch = info.multiprocessor_count, info.arch
        self.packs: dict = {}
        self.results: dict[str, list[tuple[str, float]]] = {}
        self.util = self.load(list(sp.UTIL))
        self.count = ks.alloc_output(tc.int64, (1,))
        self.case_start = time.perf_counter()

    # --- kernels ---------------------------------------------------------------------------
    def load(self, exprs) -> dict:
        progs, fns = compile_group(exprs, self.arch)
        rt = self.s.runtime()
        for prog, es in progs:
            module = rt.load_module(prog.image, "index_variants")
            stats = ptxas_stats(prog)
            for e in es:
                fns[e] = self.drv.module_get_function(module, prog.lowered[e])
                if stats.get(prog.lowered[e], (0, 0))[1]:
                    print(f"# note: {e} spills {stats[prog.lowered[e]][1]} B")
        return fns

    def launch(self, fn, grid, block, codes, *args) -> None:
        from tenferro_cuda.kernels.args import ArgPack

        pack = self.packs.get(codes)
        if pack is None:
            pack = self.packs[codes] = ArgPack(codes)
        self.drv.launch(fn, grid, (block, 1, 1), 0, self.stream, pack.pack(*args))

    def occupancy(self, fn, block: int) -> int:
        from cuda.bindings import driver as cud

        return int(self.drv.check(cud.cuOccupancyMaxActiveBlocksPerMultiprocessor(
            fn, block, 0), "cuOccupancyMaxActiveBlocksPerMultiprocessor"))

    def grid1(self, v, fn, n: int, cap: int) -> tuple[int, int, int]:
        cover = -(-n // v.tile)
        if v.grid == "lib":
            return (min(cover, self.sms * cap), 1, 1)
        if v.grid == "wave":
            return (min(cover, self.sms * self.occupancy(fn, v.block)), 1, 1)
        return (cover, 1, 1)

    @staticmethod
    def grid2(v, cols: int, rows: int) -> tuple[int, int, int]:
        return (1 if v.grid == "loop" else -(-cols // v.tile), min(rows, 65535), 1)

    # --- data --------------------------------------------------------------------------------
    def alloc(self, dtype, shape):
        return self.ks.alloc_output(dtype, shape)

    def fill(self, t, kind: str, seed: int, mod: int = 0) -> None:
        grid = (self.sms * 16, 1, 1)
        if kind == "index":
            self.launch(self.util["fill_index"], grid, 256, "PQQQ", t.data_ptr(), t.size, mod,
                        seed)
        else:
            name = "fill_bits" if kind == "bits" else "fill_unit"
            self.launch(self.util[name], grid, 256, "PQQ", t.data_ptr(), t.size, seed)

    def diff(self, a: int, b: int, n: int, tol: float) -> int:
        self.drv.memset_d8_async(self.count.data_ptr(), 0, 8, self.stream)
        self.launch(self.util["count_diff"], (self.sms * 16, 1, 1), 256, "PPQfP", a, b, n, tol,
                    self.count.data_ptr())
        return int(self.s.download_to_host(self.count).numpy()[0])

    def free(self, *ts) -> None:
        for t in ts:
            self.s.reclaim_buffer(t)

    # --- measurement ---------------------------------------------------------------------
    def time(self, fn) -> float:
        from benches.common import event_median_ms

        return event_median_ms(self.stream, fn, WARMUP, ITERS)

    def row(self, case: str, label: str, ms: float | None, nbytes: int, check: str = "") -> None:
        if ms is None:
            print(f"{case:<11} {label:<42} {'-':>8} {'-':>8}  {check}", flush=True)
            return
        gb = nbytes / (ms * 1e-3) / 1e9
        print(f"{case:<11} {label:<42} {ms:8.3f} {gb:8.0f}  {check}", flush=True)
        if "MISMATCH" not in check:
            self.results.setdefault(case, []).append((label, gb))

    def begin(self, case: str) -> None:
        self.case_start = time.perf_counter()
        print(f"# {case}", flush=True)

    def over_budget(self) -> bool:
        return time.perf_counter() - self.case_start > CASE_BUDGET_S

    def variants(self, case, specs, nbytes, make, out: int, ref: int, n: int, tol=0.0,
                 pre=None) -> dict:
        """Check and time every spec; ``make(v, fn)`` returns the zero-argument launch."""
        fns = self.load(list(dict.fromkeys(v.expr for v in specs)))
        for v in specs:
            if self.over_budget():
                self.row(case, v.label, None, nbytes, "skipped (case time budget)")
                continue
            try:
                fn = fns[v.expr]
                if isinstance(fn, Exception):
                    raise fn
                call = make(v, fn)
                self.drv.memset_d8_async(out, 0xFF, n * 4, self.stream)
                if pre:
                    pre()
                call()
                bad = self.diff(out, ref, n, tol)
                check = "ok" if bad == 0 else f"!!! MISMATCH: {bad} of {n} elements differ"
                ms = self.time((lambda c=call: (pre(), c())) if pre else call)
                self.row(case, v.label, ms, nbytes, check)
            except Exception as exc:  # one failure must not stop the rest
                self.row(case, v.label, None, nbytes,
                         f"FAILED {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
        return fns

    def lib_row(self, case: str, label: str, fn, nbytes: int) -> None:
        try:
            self.row(case, label, self.time(fn), nbytes, "(reference)")
        except Exception as exc:
            self.row(case, label, None, nbytes, f"FAILED {type(exc).__name__}: {exc}")

    def torch_row(self, case: str, label: str, setup, nbytes: int) -> None:
        """``setup(torch)`` returns the call to time; its tensors are dropped afterwards."""
        if self.torch is None:
            return
        from benches.common import torch_ms

        try:
            call = setup(self.torch)
            self.row(case, label, torch_ms(call, WARMUP, ITERS), nbytes, "(peer)")
        except Exception as exc:
            self.row(case, label, None, nbytes, f"FAILED {type(exc).__name__}: {exc}")
        finally:
            call = None
            self.torch.cuda.empty_cache()

    def l2_sweep(self, case: str, calls, nbytes: int) -> None:
        """Report only: the same launches under CU_LIMIT_MAX_L2_FETCH_GRANULARITY 32/64/128,
        the context's default restored afterwards."""
        from cuda.bindings import driver as cud

        limit = cud.CUlimit.CU_LIMIT_MAX_L2_FETCH_GRANULARITY
        try:
            default = int(self.drv.check(cud.cuCtxGetLimit(limit), "cuCtxGetLimit"))
        except Exception as exc:
            print(f"# {case}: cannot read the L2 fetch granularity: {exc}")
            return
        print(f"# {case}: CU_LIMIT_MAX_L2_FETCH_GRANULARITY default = {default} B", flush=True)
        try:
            for value in (32, 64, 128):
                if value == default:
                    continue
                self.drv.stream_synchronize(self.stream)
                self.drv.check(cud.cuCtxSetLimit(limit, value), "cuCtxSetLimit")
                got = int(self.drv.check(cud.cuCtxGetLimit(limit), "cuCtxGetLimit"))
                for label, call in calls:
                    self.row(case, f"{label} @L2 fetch {value} (reads {got})", self.time(call),
                             nbytes, "(limit, report only)")
        except Exception as exc:
            print(f"# {case}: L2 fetch granularity sweep failed: {exc}")
        finally:
            try:
                self.drv.stream_synchronize(self.stream)
                self.drv.check(cud.cuCtxSetLimit(limit, default), "cuCtxSetLimit")
                now = int(self.drv.check(cud.cuCtxGetLimit(limit), "cuCtxGetLimit"))
                print(f"# {case}: L2 fetch granularity restored to {now} B")
            except Exception as exc:
                print(f"# {case}: !!! could not restore the L2 fetch granularity: {exc}")

    def summary(self) -> None:
        print("\n# best per case (library row first; target in brackets)")
        for case, rows in self.results.items():
            lib = next((gb for label, gb in rows if label.startswith("library")), None)
            skip = ("library", "torch", "memcpy", "diag")
            cands = [(gb, label) for label, gb in rows
                     if not label.startswith(skip) and "@L2" not in label]
            if not cands:
                continue
            gb, label = max(cands)
            peer = next((f", torch {g:,.0f}" for lb, g in rows if lb.startswith("torch")), "")
            lib_s = f"{lib:,.0f}" if lib else "-"
            print(f"{case:<11} library {lib_s:>6}{peer}; best {gb:,.0f}: {label} "
                  f"[target {sp.TARGETS.get(case, '')}]")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compile-only", action="store_true")
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--only", default="", help="comma-separated case groups: " +
                    ",".join(sp.CASES))
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()
    if args.compile_only:
        return compile_only(args.arch)
    from benches.common import peers

    import tenferro_cuda as tc

    torch = None if args.no_torch else peers()[0]
    wanted = [c for c in args.only.split(",") if c] or list(sp.CASES)
    t0 = time.perf_counter()
    with tc.cuda_exec_session(0) as s, s.kernels("index_variants") as ks:
        h = Harness(s, ks, torch)
        info = s.device_info()
        print(f"# {info.name}, {info.multiprocessor_count} SMs, L2 {info.l2_cache_bytes >> 20} "
              f"MiB; warm-up {WARMUP}, median of 5 x {ITERS} calls; torch "
              f"{'yes' if torch is not None else 'no'}")
        print(f"{'case':<11} {'variant':<42} {'ms':>8} {'GB/s':>8}  check")
        for name in wanted:
            if time.perf_counter() - t0 > TOTAL_BUDGET_S:
                print(f"# {name}: skipped (total time budget)")
                continue
            try:
                sp.CASES[name](h)
            except Exception as exc:
                print(f"# {name}: case FAILED {type(exc).__name__}: {exc}", flush=True)
        h.summary()
    print(f"# total {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
