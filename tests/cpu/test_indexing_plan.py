"""Launch plans of the indexing family (pure Python): which kernel path each call takes,
the unit and group sizes, the packed structs, and that every planned launch names a
registered instantiation whose C++ parameter list matches its ArgPack codes."""

from __future__ import annotations

import dataclasses
import re
import struct

import pytest

from tenferro_cuda.kernels.args import ArgPack
from tenferro_cuda.kernels.registry import family
from tenferro_cuda.ops.indexing.partition import gather_partition
from tenferro_cuda.ops.indexing.plan import (
    GatherArgs,
    ScatterArgs,
    compact,
    gather_launch,
    geometry,
    index_map,
    is_dense,
    keeps_l2,
    l2_normal_launch,
    row_group,
    scatter_launch,
    scatter_passes,
)
from tenferro_cuda.ops.indexing.plan_copy import Dynamic, copy_launch, pad_launch, pad_map

SMS = 132
A = 1 << 20  # an aligned device address


def gargs(oshape, slice_sizes, offset_dims, collapsed, smap, ishape, ivd, *, item=4,
          ostrides=None, istrides=None, optr=A, obd=(), ibd=(), out_ptr=2 * A):
    skip = set(collapsed) | set(obd)
    window = tuple(d for d in range(len(oshape)) if d not in skip)
    ib = tuple(d for d in range(len(ishape)) if d != ivd)
    rank = len(ib) + len(window)
    batch = tuple(d for d in range(rank) if d not in offset_dims)
    w, b = iter(slice_sizes[d] for d in window), iter(ishape[d] for d in ib)
    result = tuple(next(w) if d in offset_dims else next(b) for d in range(rank))
    return GatherArgs(item, (optr, oshape, ostrides or compact(oshape)),
                      (3 * A, ishape, istrides or compact(ishape)), True, out_ptr, result,
                      tuple(offset_dims), batch, ib, window, tuple(slice_sizes), tuple(smap),
                      ivd, tuple(obd), tuple(ibd))


EMB = dict(oshape=(1000, 256), slice_sizes=(1, 256), offset_dims=(1,), collapsed=(0,),
           smap=(0,), ishape=(4096,), ivd=1)


def test_scalar_gather_path():
    g = gargs((1 << 20,), (1,), (), (0,), (0,), (1 << 16,), 1)
    launch = gather_launch(g, SMS)
    assert launch.expression == "tf::gather_scalar<tf::u32>"
    assert launch.args[-1] == 1 << 16


def test_scalar_gather_two_components():
    g = gargs((64, 32), (1, 1), (), (0, 1), (1, 0), (10, 2), 1)
    assert gather_launch(g, SMS).expression == "tf::gather_scalar<tf::u32>"


def test_embedding_gather_uses_rows_of_16_bytes():
    launch = gather_launch(gargs(**EMB), SMS)
    assert launch.expression == "tf::gather_rows<tf::b128>"
    rows, units, group = launch.args[-3:]
    assert (rows, units, group) == (4096, 64, 16)  # 4 units of 16 bytes per thread


@pytest.mark.parametrize("optr,width,unit,units", [
    (A, 256, "tf::b128", 64), (A + 8, 256, "tf::u64", 128), (A + 4, 256, "tf::u32", 256),
    (A, 6, "tf::u64", 3), (A, 3, "tf::u32", 3),
], ids=["aligned", "8-aligned", "4-aligned", "width-6", "width-3"])
def test_row_gather_units(optr, width, unit, units):
    cfg = {**EMB, "oshape": (1000, width), "slice_sizes": (1, width)}
    launch = gather_launch(gargs(**cfg, optr=optr), SMS)
    assert launch.expression == f"tf::gather_rows<{unit}>"
    assert launch.args[-2] == units
    assert launch.args[-1] == min(32, 1 << (-(-units // 4) - 1).bit_length())


def test_row_gather_with_strided_indices():
    g = gargs((100,), (1,), (), (0,), (0,), (50, 2), 1, istrides=(2, 1))
    g = GatherArgs(**{**g.__dict__, "indices": (3 * A, (50,), (2,)), "index_batch_dims": (0,),
                      "index_vector_dim": 1})
    launch = gather_launch(g, SMS)
    assert launch.expression == "tf::gather_rows<tf::u32>"
    assert launch.args[-1] == 1


@pytest.mark.parametrize("units,group", [(1, 1), (4, 1), (5, 2), (64, 16), (128, 32),
                                         (1000, 32)])
def test_row_group_keeps_four_units_per_thread(units, group):
    assert row_group(units) == group


def test_general_gather_when_offsets_lead():
    cfg = {**EMB, "offset_dims": (0,)}
    launch = gather_launch(gargs(**cfg), SMS)
    assert launch.expression == "tf::gather_general<tf::u32, tf::u32>"


def test_general_gather_when_window_is_strided():
    cfg = {**EMB, "slice_sizes": (2, 128), "collapsed": (), "offset_dims": (1, 2)}
    launch = gather_launch(gargs(**cfg), SMS)
    assert launch.expression.startswith("tf::gather_general<")


def test_batching_gather_rows():
    g = gargs((8, 100, 16), (1, 1, 16), (2,), (1,), (1,), (8, 5, 1), 2, obd=(0,), ibd=(0,))
    launch = gather_launch(g, SMS)
    assert launch.expression == "tf::gather_rows<tf::b128>"


def test_index_map_and_geometry_images():
    raw = index_map([5, 7], [9, 11], 3, True)
    assert len(raw) == 144
    vals = struct.unpack("<8q8qqii", raw)
    assert vals[:2] == (5, 7) and vals[8:10] == (9, 11) and vals[16:] == (3, 2, 1)
    geom = geometry((4, 1, 3), (3, 0, 1), (0, 0, 0))
    assert len(geom) == 3 * 144
    assert struct.unpack_from("<8q", geom, 0)[:2] == (12, 0)  # one axis in a, b and c
    keyed = geometry((4, 1, 3), (3, 0, 1), (0, 0, 0), (1, 0, 0))
    assert struct.unpack_from("<8q", keyed, 0)[:2] == (4, 3)  # c does not merge


def test_is_dense_and_compact():
    assert is_dense((3, 4), (4, 1)) and is_dense((3, 1, 4), (4, 99, 1))
    assert not is_dense((3, 4), (1, 3)) and not is_dense((3, 4), (-4, 1))
    assert compact((2, 0, 3)) == (3, 3, 1)


# --- scatter --------------------------------------------------------------------------------
def sargs(oshape, ushape, uwd, ins, smap, ishape, ivd, *, ctype="float", item=4, ibd=(),
          sibd=(), istrides=None):
    skip = set(ins) | set(ibd)
    window = tuple(d for d in range(len(oshape)) if d not in skip)
    sizes = [1] * len(oshape)
    for ud, od in zip(uwd, window):
        sizes[od] = ushape[ud]
    return ScatterArgs(ctype, item, oshape, A, (2 * A, ushape), (3 * A, ishape,
                       istrides or compact(ishape)), False, tuple(uwd),
                       tuple(d for d in range(len(ushape)) if d not in uwd),
                       tuple(d for d in range(len(ishape)) if d != ivd), window, tuple(sizes),
                       tuple(smap), ivd, tuple(ibd), tuple(sibd))


def test_scalar_scatter_add():
    s = sargs((1 << 24,), (1 << 26,), (), (0,), (0,), (1 << 26,), 1)
    launch = scatter_launch(s, "add", 0, False, SMS, 90)
    assert launch.expression == "tf::scatter_add<float>"
    assert launch.args[-2:] == (1, 1)  # vector loads, evict_last reductions
    assert launch.grid == ((1 << 26) // 4096, 1, 1)  # 256 threads x 4 vectors x 4 updates
    assert keeps_l2(s, "add", 90) and not keeps_l2(s, "add", 75)
    assert not keeps_l2(s, "max", 90)
    demote = l2_normal_launch(s, SMS)
    assert demote.expression == "tf::scatter_l2_normal" and demote.args == (A, 4 << 24)
    assert demote.expression in family("scatter").all_expressions()
    assert scatter_launch(s, "add", 0, False, SMS).args[-1] == 0  # arch unknown: plain red


@pytest.mark.parametrize("shift,item,vec", [(0, 4, 1), (8, 4, 0), (4, 2, 0), (8, 2, 1),
                                            (8, 16, 0), (16, 16, 1)])
def test_scatter_add_vector_loads_need_alignment(shift, item, vec):
    s = sargs((1 << 10,), (99,), (), (0,), (0,), (99, 1), 1, item=item)
    s = dataclasses.replace(s, updates=(s.updates[0] + shift, s.updates[1]))
    launch = scatter_launch(s, "add", 0, False, SMS, 90)
    assert launch.args[-2:] == (vec, 0)  # 4 KiB result: no evict_last
    shifted_idx = dataclasses.replace(s, indices=(s.indices[0] + 8,) + s.indices[1:])
    assert scatter_launch(shifted_idx, "add", 0, False, SMS, 90).args[-2] == 0


def test_sparse_or_small_scatter_add_skips_evict_last():
    big = sargs((1 << 24,), (1 << 10,), (), (0,), (0,), (1 << 10,), 1)
    assert not keeps_l2(big, "add", 90)  # 64 MiB result, few updates: demotion costs more
    small = sargs((1 << 16,), (1 << 26,), (), (0,), (0,), (1 << 26,), 1)
    assert not keeps_l2(small, "add", 90)  # 256 KiB result stays in L2 anyway


def test_general_scatter_and_key_layout():
    s = sargs((6, 4), (3, 4), (1,), (0,), (0,), (3, 1), 1)
    launch = scatter_launch(s, "commit", 5 * A, False, SMS)
    assert launch.expression == "tf::scatter_general<tf::u32, 5, tf::u32>"
    geom = launch.args[2]
    c_strides = struct.unpack_from("<8q", geom, 2 * 144 + 64)
    assert c_strides[:2] == (1, 0)  # key: the window index, 0 along the window
    assert launch.args[-2:] == (5 * A, 0)


@pytest.mark.parametrize("combiner,unique,windows,passes", [
    ("add", False, 9, ("add",)), ("max", False, 9, ("max",)),
    ("replace", False, 9, ("claim", "commit")), ("replace", True, 9, ("store",)),
    ("replace", False, 1, ("store",)),
])
def test_scatter_passes(combiner, unique, windows, passes):
    assert scatter_passes(combiner, unique, windows) == passes


def test_claim_uses_one_instantiation():
    s = sargs((6,), (3,), (), (0,), (0,), (3, 1), 1, ctype="double", item=8)
    assert scatter_launch(s, "claim", A, True, SMS).expression == \
        "tf::scatter_scalar<tf::u8, 4>"
    assert scatter_launch(s, "commit", A, True, SMS).expression == \
        "tf::scatter_scalar<tf::u64, 5>"


# --- copies and pad ---------------------------------------------------------------------------
def test_copy_rows_vectorised():
    launch = copy_launch(4, (1024, 4096), (A, (4096, 1)), (A + 64, (4104, 1)), SMS)
    assert launch.expression == "tf::copy_rows<tf::b128>"
    assert launch.args[5] == 1024  # columns in units


def test_copy_rows_misaligned_falls_back_to_elements_of_rows():
    launch = copy_launch(4, (1024, 4096), (A, (4096, 1)), (A + 4, (4098, 1)), SMS)
    assert launch.expression == "tf::copy_rows<tf::u32>"


def test_copy_reversed_inner_axis():
    launch = copy_launch(2, (8, 4096), (A, (4096, 1)), (A, (4096, -1)), SMS)
    assert launch.expression == "tf::copy_rows<unsigned short>"
    assert launch.args[6:8] == (1, -1)


def test_copy_short_rows_go_element_wise():
    launch = copy_launch(8, (1000, 3), (A, (3, 1)), (A, (1, 1000)), SMS)
    assert launch.expression == "tf::copy_elems<tf::u64, tf::u32>"


def test_dynamic_axes_that_cannot_move_do_not_block_units():
    dyn = Dynamic(4 * A, 1, True, (256, 1), (999, 0), on_dst=False)
    launch = copy_launch(4, (1, 256), (A, (256, 1)), (A, (256, 1)), SMS, dyn)
    assert launch.expression == "tf::copy_elems<tf::b128, tf::u32>"
    vals = struct.unpack("<8q8qqii", launch.args[6])
    assert vals[:2] == (64, 0) and vals[8:10] == (999, 0) and vals[-2:] == (2, 1)
    moving = Dynamic(4 * A, 1, True, (256, 1), (999, 3), on_dst=True)
    assert copy_launch(4, (1, 256), (A, (256, 1)), (A, (256, 1)), SMS,
                       moving).expression == "tf::copy_elems<tf::u32, tf::u32>"


def test_pad_map_layout_and_paths():
    raw = pad_map((5, 9), (0, 1), (1, 2), (2, 3), (3, 1))
    vals = struct.unpack("<40qqii", raw)
    assert vals[0] == 5 and vals[7] == 9  # row axis in slot 0, last axis in slot 7
    assert vals[16] == 2 and vals[23] == 3  # interior + 1
    assert vals[-2] == 1
    assert pad_launch(4, (5, 9), A, (0, 1), (1, 2), (A, (2, 3), (3, 1)), b"\0" * 4,
                      SMS).expression == "tf::pad_elems<tf::u32, tf::u32>"
    assert pad_launch(16, (3, 600), A, (0, 0), (0, 0), (A, (3, 600), (600, 1)),
                      b"\0" * 16, SMS).expression == "tf::pad_rows<tf::b128>"


# --- launches against the registry and the C++ signatures ------------------------------------
_SIZES = {"tf::u8": 1, "unsigned short": 2, "tf::u32": 4, "tf::u64": 8, "tf::b128": 16,
          "signed char": 1, "unsigned char": 1, "int": 4, "long long": 8, "tf::half": 2,
          "tf::bfloat16": 2, "float": 4, "double": 8, "tf::complex<float>": 8,
          "tf::complex<double>": 16}
_STRUCTS = {"Layout": "L", "IndexMap": "S144", "Geometry": "S432", "PadMap": "S336",
            "i64": "q", "int": "i", "u32": "I", "u64": "Q"}


def _signature(fam: str, entry: str) -> tuple[list[str], list[str]]:
    src = family(fam).read_source()
    m = re.search(r"template <([^>]*)>\s*__global__ void (?:__launch_bounds__\([^)]*\)\s*)?"
                  + entry + r"\(([^)]*)\)", src)
    tparams = [p.split()[-1] for p in m.group(1).split(",")]
    params = [" ".join(p.split()[:-1]) for p in m.group(2).split(",")]
    return tparams, params


def _codes_for(launch) -> str:
    fam = launch.family
    entry, targs = re.match(r"tf::(\w+)<(.*)>$", launch.expression).groups()
    targs = [t.strip() for t in re.split(r",\s*(?![^<]*>)", targs)]
    tparams, params = _signature(fam, entry)
    bind = dict(zip(tparams, targs))
    out = []
    for p in params:
        base = p.replace("const", "").replace("__restrict__", "").strip()
        if "*" in base:
            out.append("P")
            continue
        t = bind.get(base, base)
        if t in ("tf::u32", "tf::u64") and base == "I":
            out.append("I" if t == "tf::u32" else "Q")
        elif t in _STRUCTS:
            out.append(_STRUCTS[t])
        else:
            size = _SIZES[t]
            out.append("X16" if size == 16 else f"S{size}")
    return "".join(out)


LAUNCHES = {
    "gather-scalar": lambda: gather_launch(gargs((99,), (1,), (), (0,), (0,), (7,), 1), SMS),
    "gather-rows": lambda: gather_launch(gargs(**EMB), SMS),
    "gather-general": lambda: gather_launch(gargs(**{**EMB, "offset_dims": (0,)}), SMS),
    **{f"gather-{name}-{item}": (lambda i=i, item=item: gather_partition(
        gargs((1 << 26,), (1,), (), (0,), (0,), (1 << 24,), 1, item=item), 60 << 20,
        SMS).launches(4 * A)[i]) for i, name in enumerate(("split", "chunks", "place"))
       for item in (4, 8, 16)},
    "scatter-scalar": lambda: scatter_launch(sargs((6,), (3,), (), (0,), (0,), (3, 1), 1),
                                             "add", 0, False, SMS),
    "scatter-scalar-max": lambda: scatter_launch(sargs((6,), (3,), (), (0,), (0,), (3, 1), 1),
                                                 "max", 0, False, SMS),
    "scatter-general": lambda: scatter_launch(sargs((6, 4), (3, 4), (1,), (0,), (0,),
                                                    (3, 1), 1, ctype="tf::complex<double>",
                                                    item=16), "add", 0, False, SMS),
    "copy-rows": lambda: copy_launch(4, (8, 4096), (A, (4096, 1)), (A, (4096, 1)), SMS,
                                     Dynamic(A, 1, False, (4096, 1), (3, 0), False)),
    "copy-elems": lambda: copy_launch(1, (5, 3), (A, (3, 1)), (A, (1, 5)), SMS),
    "pad-rows": lambda: pad_launch(16, (3, 600), A, (0, 0), (0, 0), (A, (3, 600), (600, 1)),
                                   b"\0" * 16, SMS),
    "pad-elems": lambda: pad_launch(2, (3, 6), A, (0, 1), (0, 0), (A, (3, 5), (5, 1)),
                                    b"\0" * 2, SMS),
}


@pytest.mark.parametrize("make", LAUNCHES.values(), ids=LAUNCHES.keys())
def test_launch_matches_registry_and_signature(make):
    launch = make()
    assert launch.expression in family(launch.family).all_expressions()
    assert launch.codes == _codes_for(launch)
    ArgPack(launch.codes).pack(*launch.args)  # values fit their codes
    assert all(g >= 1 for g in launch.grid) and launch.grid[1] <= 65535
