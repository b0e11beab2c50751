"""tenferro_cuda.kernels.args: ArgPack offsets, alignment and contents; tf::Layout bytes.

The packed parameters are read back through the ``void*[]`` exactly as cuLaunchKernel
would: entry i of the array at ``pack.address`` points at parameter i.
"""

from __future__ import annotations

import ctypes
import struct

import numpy as np
import pytest

from tenferro_cuda.kernels.args import LAYOUT_SIZE, MAX_RANK, ArgPack, layout_bytes

# code -> (ctypes reader, alignment)
SCALAR = {
    "P": (ctypes.c_uint64, 8),
    "q": (ctypes.c_int64, 8),
    "Q": (ctypes.c_uint64, 8),
    "i": (ctypes.c_int32, 4),
    "I": (ctypes.c_uint32, 4),
    "f": (ctypes.c_float, 4),
    "d": (ctypes.c_double, 8),
}
SAMPLE = {
    "P": 0x7F00_1234_5678_0000,
    "q": -(2**62) - 5,
    "Q": 2**64 - 3,
    "i": -123456,
    "I": 4_000_000_000,
    "f": 1.5,
    "d": -2.25e300,
}


def _tokens(codes: str) -> list[str]:
    out, i = [], 0
    while i < len(codes):
        j = i + 1
        if codes[i] in "SX":
            while j < len(codes) and codes[j].isdigit():
                j += 1
        out.append(codes[i:j])
        i = j
    return out


def _value(tok: str, n: int):
    if tok in SAMPLE:
        return SAMPLE[tok]
    if tok == "L":
        return layout_bytes([2, 3, 4][: n % 3 + 1], [12, 4, 1][: n % 3 + 1], n)
    size = int(tok[1:])
    return bytes((n * 7 + k) % 256 for k in range(size))


def _pointers(pack: ArgPack, count: int) -> list[int]:
    arr = ctypes.cast(pack.address, ctypes.POINTER(ctypes.c_void_p))
    return [arr[k] for k in range(count)]


def _read(tok: str, addr: int):
    if tok in SCALAR:
        return SCALAR[tok][0].from_address(addr).value
    size = LAYOUT_SIZE if tok == "L" else int(tok[1:])
    return ctypes.string_at(addr, size)


def _align(tok: str) -> int:
    if tok in SCALAR:
        return SCALAR[tok][1]
    return 16 if tok.startswith("X") else 8


# (codes, expected offsets relative to the first parameter)
LAYOUTS = [
    ("P", [0]),
    ("iP", [0, 8]),
    ("ii", [0, 4]),
    ("iq", [0, 8]),
    ("fd", [0, 8]),
    ("PPPI", [0, 8, 16, 24]),
    ("IPi", [0, 8, 16]),
    ("iX16", [0, 16]),
    ("iX8", [0, 16]),
    ("PX16i", [0, 16, 32]),
    ("iS4", [0, 8]),
    ("S12i", [0, 12]),
    ("S3S3", [0, 8]),
    ("iL", [0, 8]),
    ("LL", [0, LAYOUT_SIZE]),
    ("iLP", [0, 8, 8 + LAYOUT_SIZE]),
    ("PPLLqdfiIQ", [0, 8, 16, 16 + LAYOUT_SIZE, 16 + 2 * LAYOUT_SIZE,
                    24 + 2 * LAYOUT_SIZE, 32 + 2 * LAYOUT_SIZE, 36 + 2 * LAYOUT_SIZE,
                    40 + 2 * LAYOUT_SIZE, 48 + 2 * LAYOUT_SIZE]),
    ("S16X16", [0, 16]),
    ("iiiX32", [0, 4, 8, 16]),
]


@pytest.mark.parametrize(("codes", "offsets"), LAYOUTS, ids=[c for c, _ in LAYOUTS])
def test_offsets(codes, offsets):
    pack = ArgPack(codes)
    ptrs = _pointers(pack, len(offsets))
    assert [p - ptrs[0] for p in ptrs] == offsets


@pytest.mark.parametrize(("codes", "offsets"), LAYOUTS, ids=[c for c, _ in LAYOUTS])
def test_alignment_in_memory(codes, offsets):
    pack = ArgPack(codes)
    for tok, ptr in zip(_tokens(codes), _pointers(pack, len(offsets)), strict=True):
        assert ptr % _align(tok) == 0, f"{tok} at {ptr:#x}"


@pytest.mark.parametrize(("codes", "offsets"), LAYOUTS, ids=[c for c, _ in LAYOUTS])
def test_packed_values_read_back(codes, offsets):
    pack = ArgPack(codes)
    toks = _tokens(codes)
    values = [_value(t, n) for n, t in enumerate(toks)]
    assert pack.pack(*values) == pack.address
    for tok, ptr, value in zip(toks, _pointers(pack, len(toks)), values, strict=True):
        assert _read(tok, ptr) == value, tok


def test_repack_overwrites_in_place():
    pack = ArgPack("Pi")
    ptrs = _pointers(pack, 2)
    pack.pack(1, 2)
    pack.pack(0xDEAD_BEEF, -7)
    assert _pointers(pack, 2) == ptrs
    assert _read("P", ptrs[0]) == 0xDEAD_BEEF
    assert _read("i", ptrs[1]) == -7


def test_empty_signature():
    pack = ArgPack("")
    assert pack.pack() == pack.address


BAD_CODES = ["Z", "S", "X", "Pz", "P P", "p", "l", "SX4", "i,i", "x"]


@pytest.mark.parametrize("codes", BAD_CODES)
def test_bad_codes_raise(codes):
    with pytest.raises(ValueError, match="bad argument codes"):
        ArgPack(codes)


BAD_VALUES = [("Pi", (1,)), ("i", (1, 2)), ("i", ("x",)), ("I", (-1,)), ("i", (2**31,))]


@pytest.mark.parametrize(("codes", "values"), BAD_VALUES, ids=[f"{c}{v}" for c, v in BAD_VALUES])
def test_bad_values_raise(codes, values):
    with pytest.raises(struct.error):
        ArgPack(codes).pack(*values)


def test_raw_bytes_slot_is_fixed_size():
    pack = ArgPack("S4")
    pack.pack(b"toolong")  # struct truncates fixed-size byte fields
    assert _read("S4", _pointers(pack, 1)[0]) == b"tool"


# --- tf::Layout ------------------------------------------------------------------------------

def test_layout_size_is_144():
    assert LAYOUT_SIZE == 144
    assert MAX_RANK == 8
    assert len(layout_bytes([2, 3], [3, 1], 5)) == 144


LAYOUT_CASES = [
    ((), (), 0),
    ((7,), (1,), 0),
    ((2, 3), (3, 1), 5),
    ((4, 1, 6), (-6, 0, -1), 23),
    ((1,) * 8, tuple(range(8)), 2**40),
    ((2**33, 3), (3, 1), 0),
]


@pytest.mark.parametrize(("shape", "strides", "offset"), LAYOUT_CASES,
                         ids=[f"rank{len(c[0])}-{i}" for i, c in enumerate(LAYOUT_CASES)])
def test_layout_field_positions(shape, strides, offset):
    blob = layout_bytes(shape, strides, offset)
    n = len(shape)
    fields = np.frombuffer(blob[:136], dtype="<i8")
    assert list(fields[:n]) == list(shape)  # i64 shape[8] at byte 0
    assert not fields[n:8].any()
    assert list(fields[8:8 + n]) == list(strides)  # i64 stride[8] at byte 64
    assert not fields[8 + n:16].any()
    assert int(fields[16]) == offset  # i64 offset at byte 128
    assert struct.unpack_from("<i", blob, 136)[0] == n  # i32 ndim at byte 136
    assert struct.unpack_from("<i", blob, 140)[0] == 0  # i32 pad_ at byte 140


def test_layout_slot_in_pack_holds_layout():
    pack = ArgPack("PLi")
    lay = layout_bytes([5, 6], [6, 1], 3)
    pack.pack(0, lay, 9)
    ptr = _pointers(pack, 2)[1]
    assert ctypes.string_at(ptr, LAYOUT_SIZE) == lay
    assert ctypes.c_int64.from_address(ptr + 128).value == 3
    assert ctypes.c_int32.from_address(ptr + 136).value == 2


def test_prepared_launch_tail_words(monkeypatch):
    """``PreparedLaunch.put_tail`` rewrites one tail value for the launches that follow;
    the head written by ``run`` and the other tail values stay as they were."""
    from types import SimpleNamespace

    from tenferro_cuda.kernels import launch as launch_mod

    seen = []

    def fake_launch(fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        arr = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
        seen.append([_read(t, arr[k]) for k, t in enumerate(_tokens("PPIiPiQQQ"))])
        return (0,)

    monkeypatch.setattr(launch_mod, "_launch", fake_launch)
    monkeypatch.setattr(launch_mod, "_handle", lambda h: h)  # fake functions
    info = SimpleNamespace(max_threads_per_block=1024, max_block_dims=(1024, 1024, 64),
                           max_grid_dims=(2**31 - 1, 65535, 65535),
                           max_shared_per_block=48 << 10)
    pl = launch_mod.PreparedLaunch("fn", "PPIiPiQQQ", None, info, tail=(77, 5, 0, 0, 0))
    pl.run(1, 10, 20, 3, 4)
    pl.put_tail(3, 2**64 - 1)
    pl.run(1, 11, 21, 5, 6)
    pl.put_tail(3, 0)
    pl.put_tail(4, 9)
    pl.run(1, 12, 22, 7, 8)
    assert seen == [[10, 20, 3, 4, 77, 5, 0, 0, 0], [11, 21, 5, 6, 77, 5, 0, 2**64 - 1, 0],
                    [12, 22, 7, 8, 77, 5, 0, 0, 9]]
    with pytest.raises(IndexError):
        pl.put_tail(5, 1)
