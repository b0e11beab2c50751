"""Variant lists and cases of tools/experiments/index_variants.py (kernels in
index_variants.cu).

Labels: uUN = vectors in flight per thread, vVEC = int64 indices (or floats) per vector
load, bBS = block size. Grid: "lib" = the library's cap (blocks <= SMs x 64; x 32 for
embedding rows), "wave" = one resident wave, "loop" = one block per row that loops along
it (the library's copy_rows / pad_rows shape here), none = the grid covers the work in one
step; "pipelined" = the next tile's indices load before this tile's table loads. Hints:
nc.noalloc = table loads ld.global.nc.L1::no_allocate, ld.cs / ld.cg = table loads
ld.global.cs / .cg, cs = index/update loads ld.global.cs and stores st.global.cs.
"""

from __future__ import annotations

from dataclasses import dataclass

import tenferro_cuda as tc
from tenferro_cuda.configs.indexing import GatherConfig, PadConfig, ScatterConfig, SliceConfig

N2 = 16384
EL = 4 * N2 * N2  # bytes of 2^28 float32


@dataclass(frozen=True)
class V:
    label: str
    expr: str
    block: int
    tile: int  # items one block covers per step: elements, rows (embedding) or row columns
    grid: str = "cover"


_HINT = {0: "", 1: " nc.noalloc", 2: " ld.cs", 3: " ld.cg"}


def _g(grid: str) -> str:
    return "" if grid == "cover" else f" {grid}"


def gv(bs, un, vec, th=0, sh=0, grid="cover", ph=0) -> V:
    label = (f"{un * vec:2d} in flight: u{un} v{vec} b{bs}{_g(grid)}{_HINT[th]}{' cs' * sh}"
             f"{' pipelined' * ph}")
    return V(label, f"gather_v<{bs}, {un}, {vec}, {th}, {sh}, {ph}>", bs, bs * un * vec, grid)


def ev(bs, g, r, th=0, sh=0, grid="cover") -> V:
    label = f"{g:2d} lanes/row, {r} row(s): b{bs}{_g(grid)}{_HINT[th]}{' st.cs' * sh}"
    return V(label, f"embed_v<{bs}, 64, {g}, {r}, {th}, {sh}>", bs, bs // g * r, grid)


_ATOMIC = {0: "atomicAdd", 1: "red.add", 2: "red.add+evict_last"}


def sv(bs, un, vec, at=0, sh=0, grid="cover") -> V:
    label = f"{_ATOMIC[at]} u{un} v{vec} b{bs}{_g(grid)}{' ld.cs' * sh}"
    return V(label, f"scatter_v<{bs}, {un}, {vec}, {at}, {sh}>", bs, bs * un * vec, grid)


def rv(bs, un, rev=0, sh=0, grid="cover") -> V:
    return V(f"v4 u{un} b{bs}{_g(grid)}{' st.cs' * sh}", f"rows_v4<{bs}, {un}, {rev}, {sh}>",
             bs, bs * un, grid)


def _sh(kind, un, sh=0, grid="cover") -> V:
    name = {"shfl": "shift_v4", "ld4": "shift_v4s", "f32": "shift_u32"}[kind]
    label = {"shfl": "v4 shfl", "ld4": "v4 from 4x ld.f32", "f32": "f32"}[kind]
    expr = f"{name}<256, {un}>" if kind == "f32" else f"{name}<256, {un}, {sh}>"
    return V(f"{label} u{un} b256{_g(grid)}{' st.cs' * sh}", expr, 256, 256 * un, grid)


G_LIB, G_V4, G_PIPE = gv(256, 8, 1, grid="lib"), gv(256, 4, 4), gv(256, 4, 4, grid="wave", ph=1)
GATHER = [G_LIB, gv(256, 8, 1), gv(256, 16, 1), gv(256, 32, 1),
          gv(256, 4, 2), gv(256, 8, 2), gv(256, 2, 4), G_V4, gv(256, 8, 4),
          gv(256, 4, 4, grid="wave"), gv(256, 4, 4, grid="lib"), gv(256, 4, 4, th=1),
          gv(256, 4, 4, th=2), gv(256, 4, 4, th=3), gv(256, 4, 4, sh=1),
          gv(256, 8, 4, th=1, sh=1), gv(128, 4, 4), gv(512, 4, 4), gv(1024, 4, 2),
          gv(256, 8, 1, grid="lib", ph=1), gv(256, 16, 1, grid="lib", ph=1),
          gv(256, 4, 4, grid="lib", ph=1), G_PIPE, gv(256, 8, 4, grid="wave", ph=1),
          gv(512, 4, 4, grid="wave", ph=1)]
GATHER_L2 = (G_LIB, G_V4, G_PIPE)  # also timed under other L2 fetch granularities
EMBED = [ev(256, 16, 1, grid="lib"), ev(256, 16, 1), ev(256, 16, 2), ev(256, 8, 1),
         ev(256, 32, 1), ev(256, 32, 2), ev(256, 32, 4), ev(256, 32, 1, sh=1),
         ev(256, 32, 2, sh=1), ev(256, 32, 2, th=1, sh=1), ev(128, 32, 2), ev(512, 32, 2),
         ev(256, 32, 2, grid="wave")]
S_LIB, S_V4 = sv(256, 4, 1, grid="lib"), sv(256, 4, 4)
SCATTER = [S_LIB, sv(256, 4, 1), sv(256, 4, 1, at=1), sv(256, 8, 1), sv(256, 16, 1),
           sv(256, 4, 2), S_V4, sv(256, 8, 4), sv(256, 4, 4, sh=1), sv(128, 4, 4),
           sv(512, 4, 4), sv(256, 4, 4, grid="wave"), sv(256, 4, 4, grid="lib"),
           sv(256, 4, 4, at=2), sv(256, 4, 4, at=2, sh=1)]  # evict_last last (see scatter())
SCATTER_L2 = (S_LIB, S_V4)


def rows(rev: int) -> list[V]:
    return [rv(256, 1, rev), rv(256, 2, rev), rv(256, 4, rev), rv(256, 4, rev, grid="loop"),
            rv(256, 2, rev, sh=1), rv(512, 2, rev), rv(128, 4, rev)]


SHIFT = [_sh("shfl", 1), _sh("shfl", 2), _sh("shfl", 4), _sh("shfl", 2, sh=1),
         _sh("shfl", 4, grid="loop"), _sh("ld4", 1), _sh("ld4", 2), _sh("f32", 4),
         _sh("f32", 8), _sh("f32", 16), _sh("f32", 16, grid="loop")]
CONCAT = rows(0) + [V("v4 u2 b256, one launch per input", "rows_v4<256, 2, 0, 0>", 256, 512,
                      "two")]
UTIL = ("fill_bits", "fill_unit", "fill_index", "count_diff", "l2_normal")
TARGETS = {"gather": ">= 800", "embedding": ">= 3,500", "scatter": "> torch index_add_",
           "slice16": "aligned, info", "slice4": ">= 3,420", "pad": ">= 3,420",
           "concat1": ">= 3,420", "reverse1": ">= 3,420", "reverse0": ">= 3,420"}


def all_groups() -> list[tuple[str, list[str]]]:
    copies = rows(0) + rows(1) + SHIFT
    groups = [("gather", GATHER), ("embedding", EMBED), ("scatter", SCATTER),
              ("copies", copies)]
    return [(n, list(dict.fromkeys(v.expr for v in g))) for n, g in groups] + \
        [("util", list(UTIL))]


# --- cases --------------------------------------------------------------------------------------
def scalar_gather_data(h, n: int, tn: int):
    """(table, idx, out, cfg): tn float32 bit patterns, n uniform int64 indices into them,
    an n-element result buffer and the config of ``table[idx]``."""
    table, idx = h.alloc(tc.float32, (tn,)), h.alloc(tc.int64, (n,))
    out = h.alloc(tc.float32, (n,))
    h.fill(table, "bits", 1)
    h.fill(idx, "index", 2, tn)
    cfg = GatherConfig(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,),
                       index_vector_dim=1, slice_sizes=(1,))
    return table, idx, out, cfg


def gather(h) -> None:
    h.begin("gather")
    s, n, tn = h.s, 1 << 26, 1 << 28
    table, idx, out, cfg = scalar_gather_data(h, n, tn)

    def lib():
        return s.gather(table, idx, cfg)

    ref, nbytes = lib(), 16 * n
    h.lib_row("gather", "library gather_scalar", lib, nbytes)

    def make(v, fn):
        grid, args = h.grid1(v, fn, n, 64), (out.data_ptr(), table.data_ptr(), idx.data_ptr(),
                                             n, tn - 1)
        return lambda: h.launch(fn, grid, v.block, "PPPqq", *args)

    fns = h.variants("gather", GATHER, nbytes, make, out.data_ptr(), ref.data_ptr(), n)
    near = h.alloc(tc.int64, (n,))  # diagnostic: the same gather from a 16 MiB (L2) slice
    h.fill(near, "index", 9, 1 << 22)
    h.row("gather", "diag: library, indices < 2^22 (16 MiB)", h.time(
        lambda: s.gather(table, near, cfg)), nbytes, "(L2-resident rows, not checked)")
    if not isinstance(fns[G_V4.expr], Exception):
        grid = h.grid1(G_V4, fns[G_V4.expr], n, 64)
        h.row("gather", f"diag: {G_V4.label.split(': ')[1]}, same", h.time(lambda: h.launch(
            fns[G_V4.expr], grid, G_V4.block, "PPPqq", out.data_ptr(), table.data_ptr(),
            near.data_ptr(), n, tn - 1)), nbytes, "(L2-resident rows, not checked)")
    h.free(near)
    h.l2_sweep("gather", [("library", lib)] + [(v.label, make(v, fns[v.expr])) for v in GATHER_L2
                                               if not isinstance(fns[v.expr], Exception)], nbytes)
    h.free(table, idx, out, ref)

    def peer(t):
        tt, ti = t.rand(tn, device="cuda"), t.randint(0, tn, (n,), device="cuda")
        return lambda: tt[ti]

    h.torch_row("gather", "torch x[idx]", peer, nbytes)


def embedding(h) -> None:
    h.begin("embedding")
    s, nrows, vocab, width = h.s, 1 << 20, 1 << 20, 256
    table, idx = h.alloc(tc.float32, (vocab, width)), h.alloc(tc.int64, (nrows,))
    out = h.alloc(tc.float32, (nrows, width))
    h.fill(table, "bits", 3)
    h.fill(idx, "index", 4, vocab)
    cfg = GatherConfig(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,),
                       index_vector_dim=1, slice_sizes=(1, width))

    def lib():
        return s.gather(table, idx, cfg)

    ref, nbytes = lib(), nrows * (8 * width + 8)
    h.lib_row("embedding", "library gather_rows", lib, nbytes)

    def make(v, fn):
        grid, args = h.grid1(v, fn, nrows, 32), (out.data_ptr(), table.data_ptr(),
                                                 idx.data_ptr(), nrows, vocab - 1)
        return lambda: h.launch(fn, grid, v.block, "PPPqq", *args)

    h.variants("embedding", EMBED, nbytes, make, out.data_ptr(), ref.data_ptr(), nrows * width)
    h.free(table, idx, out, ref)

    def peer(t):
        tt, ti = t.rand(vocab, width, device="cuda"), t.randint(0, vocab, (nrows,), device="cuda")
        return lambda: t.nn.functional.embedding(ti, tt)

    h.torch_row("embedding", "torch embedding", peer, nbytes)


def scatter(h) -> None:
    h.begin("scatter")
    s, n, size = h.s, 1 << 26, 1 << 24
    operand, out = h.alloc(tc.float32, (size,)), h.alloc(tc.float32, (size,))
    upd, idx = h.alloc(tc.float32, (n,)), h.alloc(tc.int64, (n,))
    h.fill(operand, "unit", 5)
    h.fill(upd, "unit", 6)
    h.fill(idx, "index", 7, size)
    cfg = ScatterConfig(update_window_dims=(), inserted_window_dims=(0,),
                        scatter_dims_to_operand_dims=(0,), index_vector_dim=1)

    def lib():
        return s.scatter(operand, idx, upd, cfg)

    ref, nbytes = lib(), 12 * n
    h.lib_row("scatter", "library (memcpy + scatter_add)", lib, nbytes)

    def copy():
        h.drv.memcpy_dtod_async(out.data_ptr(), operand.data_ptr(), 4 * size, h.stream)

    h.row("scatter", "memcpy of the operand alone", h.time(copy), nbytes, "(in every row)")
    near = h.alloc(tc.int64, (n,))  # diagnostic: all updates into a 4 MiB (L2) slice
    h.fill(near, "index", 8, 1 << 20)
    h.row("scatter", "diag: library, indices < 2^20 (4 MiB)", h.time(
        lambda: s.scatter(operand, near, upd, cfg)), nbytes, "(L2-resident, not checked)")
    h.free(near)

    def make(v, fn):
        grid, args = h.grid1(v, fn, n, 64), (out.data_ptr(), upd.data_ptr(), idx.data_ptr(), n,
                                             size - 1)
        return lambda: h.launch(fn, grid, v.block, "PPPqq", *args)

    def with_copy(call):
        return lambda: (copy(), call())

    def peer(t):  # before the variants: their evict_last lines must not skew it
        to, tu = t.zeros(size, device="cuda"), t.rand(n, device="cuda")
        ti = t.randint(0, size, (n,), device="cuda")
        return lambda: to.index_add_(0, ti, tu)

    h.torch_row("scatter", "torch index_add_ (in place, no copy)", peer, nbytes)
    fns = h.variants("scatter", SCATTER, nbytes, make, out.data_ptr(), ref.data_ptr(), size,
                     tol=1e-5, pre=copy)
    h.launch(h.util["l2_normal"], (h.sms * 16, 1, 1), 256, "PQ", out.data_ptr(), 4 * size)
    h.l2_sweep("scatter", [("library", lib)] + [
        (v.label, with_copy(make(v, fns[v.expr]))) for v in SCATTER_L2
        if not isinstance(fns[v.expr], Exception)], nbytes)
    h.free(operand, out, upd, idx, ref)


def _copy_case(h, case, shapes, lib, nbytes, specs, make, extra_lib=None) -> None:
    h.begin(case)
    xs = [h.alloc(tc.float32, shp) for shp in shapes]
    for i, x in enumerate(xs):
        h.fill(x, "bits", 10 + i)
    out = h.alloc(tc.float32, (N2 * N2,))
    ref = lib(h.s, xs)
    h.lib_row(case, "library", lambda: lib(h.s, xs), nbytes)
    if extra_lib is not None:
        h.lib_row(case, extra_lib[0], lambda: extra_lib[1](h.s, xs), nbytes)
    ptrs = [x.data_ptr() for x in xs]
    h.variants(case, specs, nbytes, lambda v, fn: make(h, v, fn, out.data_ptr(), ptrs),
               out.data_ptr(), ref.data_ptr(), N2 * N2)
    h.free(out, ref, *xs)


def _rows(src, cols4, seg4, sld4, second=None):
    """make() for rows_v4 over N2 output rows of cols4 vectors; src(ptrs) -> address."""
    def make(h, v, fn, out, ptrs):
        a, b = src(ptrs), (second or src)(ptrs)
        if v.grid == "two":  # one launch per input, as the library does
            grid = (-(-seg4 // v.tile), N2, 1)
            return lambda: [h.launch(fn, grid, v.block, "PPPqqqqq", out + k * seg4 * 16, p, p,
                                     N2, seg4, seg4, cols4, sld4) for k, p in ((0, a), (1, b))]
        grid = h.grid2(v, cols4, N2)
        return lambda: h.launch(fn, grid, v.block, "PPPqqqqq", out, a, b, N2, cols4, seg4,
                                cols4, sld4)
    return make


def _shift(sld, rlo, srows, lo, ext):
    """make() for shift_v4 / shift_v4s / shift_u32 over N2 x N2 output elements."""
    def make(h, v, fn, out, ptrs):
        cols = N2 if v.expr.startswith("shift_u32") else N2 // 4
        grid = h.grid2(v, cols, N2)
        return lambda: h.launch(fn, grid, v.block, "PPqqqqqqqf", out, ptrs[0], N2, cols, sld,
                                rlo, srows, lo, ext, 0.0)
    return make


def _first(p):
    return p[0]


def slice16(h) -> None:
    _copy_case(h, "slice16", [(N2, N2 + 8)],
               lambda s, xs: s.slice(xs[0], SliceConfig((0, 4), (N2, N2 + 4))), 2 * EL,
               rows(0), _rows(lambda p: p[0] + 16, N2 // 4, N2 // 4, (N2 + 8) // 4))


def slice4(h) -> None:
    _copy_case(h, "slice4", [(N2, N2 + 8)],
               lambda s, xs: s.slice(xs[0], SliceConfig((0, 1), (N2, N2 + 1))), 2 * EL,
               SHIFT, _shift(N2 + 8, 0, N2, -1, N2 + 8))


def pad(h) -> None:
    m = N2 - 2
    _copy_case(h, "pad", [(m, m)], lambda s, xs: s.pad(xs[0], PadConfig((1, 1), (1, 1))),
               4 * (m * m + N2 * N2), SHIFT, _shift(m, 1, m, 1, m))


def concat1(h) -> None:
    _copy_case(h, "concat1", [(N2, N2 // 2)] * 2, lambda s, xs: s.concatenate(xs, 1), 2 * EL,
               CONCAT, _rows(_first, N2 // 4, N2 // 8, N2 // 8, second=lambda p: p[1]),
               extra_lib=("library [x, x] (the benchmark's inputs)",
                          lambda s, xs: s.concatenate([xs[0], xs[0]], 1)))


def reverse1(h) -> None:
    _copy_case(h, "reverse1", [(N2, N2)], lambda s, xs: s.reverse(xs[0], (1,)), 2 * EL,
               rows(1), _rows(_first, N2 // 4, N2 // 4, N2 // 4))


def reverse0(h) -> None:
    _copy_case(h, "reverse0", [(N2, N2)], lambda s, xs: s.reverse(xs[0], (0,)), 2 * EL,
               rows(0), _rows(lambda p: p[0] + (N2 - 1) * N2 * 4, N2 // 4, N2 // 4, -(N2 // 4)))


CASES = {"gather": gather, "embedding": embedding, "scatter": scatter, "slice16": slice16,
         "slice4": slice4, "pad": pad, "concat1": concat1, "reverse1": reverse1,
         "reverse0": reverse0}
