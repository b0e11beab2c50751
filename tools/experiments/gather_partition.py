"""Experiment (issue 5): a three-pass random scalar gather that reads the table chunk by
chunk while each chunk sits in L2 (kernels: gather_partition.cu), beside the library's
one-pass gather and PyTorch on the same data.

    PYTHONPATH=. python3 tools/experiments/gather_partition.py [--no-torch]
    PYTHONPATH=. python3 tools/experiments/gather_partition.py --compile-only [--arch 90]

Cases: n random int64 indices into a float32 table of tn elements (n, tn) = (2^26, 2^28)
(the issue's target), (2^24, 2^28), (2^22, 2^28) and (2^26, 2^30). Every variant is
checked bit-exactly against the library result, then timed (CUDA-event median after
warm-up) as one call of all three passes; GB/s counts 16 B per element as
tools/benches/indexing.py does. Labels: R = indices per split block, chunk = table bytes
per L2 pass, pf = prefetch of the next chunk (line = prefetch.global.L2 per 128-byte line,
bulk = cp.async.bulk.prefetch.L2), item = split blocks per work item, u = loads in flight
per lane.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tools"), str(Path(__file__).resolve().parent)]

from index_variants import Harness  # noqa: E402
from index_variants_cases import scalar_gather_data  # noqa: E402

from tenferro_cuda.kernels.compiler import compile_cached  # noqa: E402

SRC = Path(__file__).with_name("gather_partition.cu")
OPTIONS = ("--ptxas-options=-v",)
PF_NAME = {0: "none", 1: "line", 2: "bulk"}


@dataclass(frozen=True)
class P:
    r: int = 4096
    shift: int = 22  # elements per chunk = 2^shift (float32: 22 -> 16 MiB)
    pf: int = 1
    item: int = 8
    u: int = 4
    bs: int = 256
    lf: int = 1
    th: int = 0

    @property
    def label(self) -> str:
        return (f"R{self.r} chunk {4 << self.shift >> 20} MiB pf {PF_NAME[self.pf]} "
                f"item {self.item} u{self.u}{' b512' * (self.bs == 512)}"
                f"{' split-interleaved' * (1 - self.lf)}{' ld.cg' * self.th}")

    def exprs(self) -> tuple[str, str, str]:
        return (f"gp_split<{self.bs}, {self.r}, {self.lf}>",
                f"gp_gather<{self.bs}, {self.u}, {self.pf}, {self.item}, {self.th}>",
                f"gp_place<{self.bs}, {self.r}>")


VARIANTS = [P(pf=0), P(pf=0, lf=0), P(), P(pf=0, th=1), P(th=1), P(pf=0, u=2),
            P(pf=0, u=2, th=1), P(shift=23, pf=0), P(shift=23, pf=0, th=1),
            P(pf=0, item=16), P(pf=0, bs=512), P(pf=0, r=2048)]
CASES = [(1 << 26, 1 << 28), (1 << 24, 1 << 28), (1 << 22, 1 << 28), (1 << 26, 1 << 30)]
QUICK = [P(pf=0), P(pf=0, th=1), P(), P(shift=23, pf=0)]  # for the cases after the first


def all_exprs(variants) -> list[str]:
    return list(dict.fromkeys(e for v in variants for e in v.exprs()))


def load(h, exprs) -> dict:
    prog = compile_cached(SRC.read_text(), "gather_partition.cu", tuple(exprs), h.arch,
                          OPTIONS)
    module = h.s.runtime().load_module(prog.image, "gather_partition")
    return {e: h.drv.module_get_function(module, prog.lowered[e]) for e in exprs}


class ThreePass:
    """The three launches of one variant over (out, table, idx) with its scratch."""

    def __init__(self, h, fns, v: P, out, table, idx, n: int, tn: int) -> None:
        import tenferro_cuda as tc

        self.h, self.v = h, v
        self.split, self.gather, self.place = (fns[e] for e in v.exprs())
        self.nb = -(-n // v.r)
        self.T = -(-tn // (1 << v.shift))
        if self.T > 512 or v.r > 65536:
            raise ValueError(f"{self.T} chunks or {v.r} indices per block: out of range")
        self.pos = h.alloc(tc.int8, (2 * n,))  # u16 positions
        self.offs = h.alloc(tc.int32, ((self.T + 1) * self.nb + 1,))
        self.counter = self.offs.data_ptr() + 4 * (self.T + 1) * self.nb
        self.args = (out.data_ptr(), table.data_ptr(), idx.data_ptr(), n, tn)
        self.wave = h.sms * h.occupancy(self.gather, v.bs)

    def split_call(self) -> None:
        out, _, idx, n, tn = self.args
        self.h.launch(self.split, (self.nb, 1, 1), self.v.bs, "PqqIIIPPPP", idx, n, tn - 1,
                      self.v.shift, self.T, self.nb, out, self.pos.data_ptr(),
                      self.offs.data_ptr(), self.counter)

    def gather_call(self) -> None:
        out, table, _, _, tn = self.args
        self.h.launch(self.gather, (self.wave, 1, 1), self.v.bs, "PQIIIIPPP", table, tn,
                      self.v.shift, self.T, self.nb, self.v.r, self.offs.data_ptr(), out,
                      self.counter)

    def place_call(self) -> None:
        out, _, _, n, _ = self.args
        self.h.launch(self.place, (self.nb, 1, 1), self.v.bs, "PPq", out,
                      self.pos.data_ptr(), n)

    def split_gather(self) -> None:  # the gather pass overwrites its keys: split again
        self.split_call()
        self.gather_call()

    def __call__(self) -> None:
        self.split_call()
        self.gather_call()
        self.place_call()

    def free(self) -> None:
        self.h.free(self.pos, self.offs)


def run_case(h, fns, n: int, tn: int, variants, detail: bool, diag: bool) -> None:
    import tenferro_cuda as tc

    case = f"2^{n.bit_length() - 1}/2^{tn.bit_length() - 1}"
    h.begin(case)
    s = h.s
    table, idx, out, cfg = scalar_gather_data(h, n, tn)
    ref, nbytes = s.gather(table, idx, cfg), 16 * n
    h.lib_row(case, "library gather_scalar", lambda: s.gather(table, idx, cfg), nbytes)
    for v in variants:
        tp = None
        try:
            tp = ThreePass(h, fns, v, out, table, idx, n, tn)
            h.drv.memset_d8_async(out.data_ptr(), 0xFF, n * 4, h.stream)
            tp()
            bad = h.diff(out.data_ptr(), ref.data_ptr(), n, 0.0)
            check = "ok" if bad == 0 else f"!!! MISMATCH: {bad} of {n} elements differ"
            h.row(case, v.label, h.time(tp), nbytes, check)
            if detail and bad == 0:
                for name, call in (("split", tp.split_call), ("split + gather", tp.split_gather),
                                   ("place", tp.place_call)):
                    h.row(case, f"  {name} pass alone", h.time(call), nbytes, "(part)")
        except Exception as exc:
            h.row(case, v.label, None, nbytes,
                  f"FAILED {type(exc).__name__}: {str(exc)[:160]}")
        finally:
            if tp is not None:
                tp.free()
            detail = False
    if diag:  # diagnostic: the first variant with every index < 2^22 (16 MiB)
        near = h.alloc(tc.int64, (n,))
        h.fill(near, "index", 9, 1 << 22)
        tp = ThreePass(h, fns, variants[0], out, table, near, n, tn)
        h.row(case, "diag: first variant, indices < 2^22", h.time(tp), nbytes, "(unchecked)")
        h.row(case, "diag:   split alone", h.time(tp.split_call), nbytes, "(part)")
        h.row(case, "diag: library, indices < 2^22", h.time(
            lambda: s.gather(table, near, cfg)), nbytes, "(unchecked)")
        tp.free()
        h.free(near)
    h.free(table, idx, out, ref)

    def peer(t):
        tt, ti = t.rand(tn, device="cuda"), t.randint(0, tn, (n,), device="cuda")
        return lambda: tt[ti]

    h.torch_row(case, "torch x[idx]", peer, nbytes)


def compile_only(arch: int) -> int:
    prog = compile_cached(SRC.read_text(), "gather_partition.cu", tuple(all_exprs(VARIANTS)),
                          arch, OPTIONS)
    for line in prog.log.splitlines():
        if "registers" in line or "spill" in line or "Function properties" in line:
            print(line.strip())
    print("all variants compiled")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compile-only", action="store_true")
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()
    if args.compile_only:
        return compile_only(args.arch)
    from benches.common import peers

    import tenferro_cuda as tc

    torch = None if args.no_torch else peers()[0]
    t0 = time.perf_counter()
    with tc.cuda_exec_session(0) as s, s.kernels("gather_partition") as ks:
        h = Harness(s, ks, torch)
        info = s.device_info()
        print(f"# {info.name}, {info.multiprocessor_count} SMs, L2 "
              f"{info.l2_cache_bytes >> 20} MiB")
        fns = load(h, all_exprs(VARIANTS))
        for i, (n, tn) in enumerate(CASES):
            run_case(h, fns, n, tn, VARIANTS if i == 0 else QUICK, detail=True,
                     diag=i == 0)
        h.summary()
    print(f"# total {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
