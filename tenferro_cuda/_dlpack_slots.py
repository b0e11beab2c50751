"""The blocks of exported DLPack capsules, and how their release is seen.

A consumer lets go of an exported tensor by calling the capsule's deleter, a C function
pointer, from C, on any thread; a capsule it never took just dies. Neither runs Python
here unless the release has work to do:

- **The deleter is ``sigemptyset``** of the C library when the release needs no work of
  ours (``_dlpack_export``: the consumer asked for ``stream=-1`` or named a stream of its
  own). It clears the signal set at its argument: zeros over its first 8 bytes (at most
  128 bytes, checked with the C library's own function when this module is imported;
  where the check fails, every export takes the callback below). A block starts with a
  word that is never zero while the consumer holds it -- the version of a versioned
  capsule (major 1), the data address of a legacy one -- so that word reading zero means
  the consumer called the deleter. (C calls it as ``void (*)(DLManagedTensor*)``; the
  ``int`` it returns is ignored on every ABI that CUDA runs on.)
- **Otherwise the deleter is a ctypes callback** (a default-stream consumer, whose release
  orders our stream after its own; a legacy capsule with a null data address). It runs
  the export's ``release(tensor)`` at once, drops the tensor, then clears the word its
  record watches: a shared slot's deleter field, the first word of a tensor's own block
  (``_dlpack_lease``, which registers its record in ``_waiting`` too). ctypes callbacks
  take the GIL; CPython cannot hand a pending exception through one (a consumer that
  failed and then dropped our capsule), so the callback clears it first, does its work,
  and prints it to stderr.
- **The capsule has no destructor.** Its record keeps a reference to it; when that is the
  only one left and the capsule still has its name (a consumer renames it to
  ``used_...``), nobody took it, and the export ends.
- **Records are looked at** when an export finds as many as the last look left behind,
  doubled (at least ``LOOK_AFTER``), when ``pending`` or ``over`` count them, after each
  full garbage collection (``gc.collect()``), and when an allocation runs out of memory
  or over the pool's limit (``memory.relieve``, which ``CudaExecSession.memory_stats``
  also runs). An ended record gives its block back and drops the tensor, if the callback
  has not dropped it already: after a release through ``sigemptyset`` the tensor's memory
  stays with us a little longer than the consumer holds it, never less.

Blocks are 256-byte slots of shared chunks (a tensor of up to 10 dimensions); a larger
one gets a block of its own. A tensor exported again and again reuses a block of its own
in place (``_dlpack_lease``): its *resident* record is registered here (``resident``), and
each look ends it as it ends a record, dropping its tensor. A slot is reused only after
its record ended, and after every other free slot (first in, first out).
"""

from __future__ import annotations

import ctypes
import gc
import struct
import sys
from collections import deque

from . import memory
from .dlpack import (
    _NAME,
    _NAME_V,
    DELETER,
    TENSOR_LAYOUT,
    _capsule_name_address,
    _capsule_new,
    _raise_pending,
)

__all__ = ["CALLBACK", "CLEAR", "LOOK_AFTER", "HEAD", "HEAD_SIZE", "NAMES", "export",
           "export_head", "own_block", "resident", "look", "look_after", "pending", "over"]

SLOT = 256  # bytes
CHUNK = 64  # slots per shared chunk
LOOK_AFTER = 16  # records an export leaves unlooked-at at least
_PROBE = 128  # the most a deleter may write past the block's start
_refs = sys.getrefcount
_finalizing = sys.is_finalizing


def _find_clear() -> int | None:
    """The address of the C library's ``sigemptyset`` if it zeros the 8 bytes at its
    argument and writes nothing outside the first ``_PROBE`` bytes, else None."""
    try:
        fn = ctypes.CDLL(None).sigemptyset
    except (AttributeError, OSError, TypeError):  # no such symbol, or no C library to ask
        return None
    fn.restype, fn.argtypes = ctypes.c_int, [ctypes.c_void_p]
    for fill in (0xAB, 0x01):
        probe = (ctypes.c_ubyte * (3 * _PROBE))(*([fill] * (3 * _PROBE)))
        if fn(ctypes.addressof(probe) + _PROBE) != 0:
            return None
        written = [i for i in range(3 * _PROBE) if probe[i] != fill]
        if bytes(probe[_PROBE:_PROBE + 8]) != bytes(8):
            return None
        if written[0] < _PROBE or written[-1] >= 2 * _PROBE:
            return None
    return ctypes.cast(fn, ctypes.c_void_p).value


CLEAR = _find_clear()
NAMES = (ctypes.addressof(_NAME), ctypes.addressof(_NAME_V))

# (ndim, versioned) -> (the block's struct: header, shape, strides; bytes before shape)
_LAYOUTS: dict[tuple[int, bool], tuple[struct.Struct, int]] = {}


def layout(n: int, versioned: bool) -> tuple[struct.Struct, int]:
    """The struct of a capsule block (the managed tensor, then shape and strides), and
    the offset of the shape in it."""
    key = (n, versioned)
    hit = _LAYOUTS.get(key)
    if hit is None:
        head = ("<IIQQQ" + TENSOR_LAYOUT) if versioned else ("<" + TENSOR_LAYOUT + "QQ")
        hit = _LAYOUTS[key] = (struct.Struct(f"{head}{n}q{n}q"), struct.calcsize(head))
    return hit


# free slots: (chunk, offset in it, address, its words, index of its first word, whether
# the chunk is shared); first in, first out, so that a slot given back is taken again as
# late as can be (a consumer that calls a deleter twice clears a free slot, not a live one)
Slot = tuple[bytearray, int, int, memoryview, int, bool]
_free: deque[Slot] = deque()
_chunks: list[bytearray] = []  # (kept: a slot's address must stay valid)


def _grow() -> None:
    chunk = bytearray(SLOT * CHUNK)
    base = ctypes.addressof((ctypes.c_char * len(chunk)).from_buffer(chunk))
    words = memoryview(chunk).cast("Q")
    _chunks.append(chunk)
    _free.extend((chunk, k * SLOT, base + k * SLOT, words, k * SLOT // 8, True)
                 for k in range(CHUNK))


def own_block(size: int) -> Slot:
    """A block of its own for a tensor of more dimensions than a slot holds."""
    chunk = bytearray(max(size, _PROBE))  # given back to nobody
    base = ctypes.addressof((ctypes.c_char * len(chunk)).from_buffer(chunk))
    return chunk, 0, base, memoryview(chunk).cast("Q"), 0, False


# records: [slot, tensor, capsule or None, index of the word that ends it]
# resident records of ``_dlpack_lease`` (a block of a tensor's own, reused in place):
# id -> [block, tensor or None, capsule or None, index of the word, token, words]
resident: dict[int, list] = {}
_records: deque[list] = deque()
_look_at = [LOOK_AFTER]
# address of a block whose deleter is the callback -> (its record, its release or None)
_waiting: dict[int, tuple[list, object]] = {}
_DELETER_WORD = (7, 2)  # the deleter field, in words: legacy, versioned


def export(tensor, shape: tuple, strides: tuple, version, flags: int, data: int,
           ordinal: int, code: int, bits: int, kind: int, release=None):
    """A capsule over ``tensor``; ``release(tensor)`` runs when the consumer lets go
    (None: nothing to do then). See the module doc."""
    n = len(shape)
    versioned = version is not None
    hit = _LAYOUTS.get((n, versioned))
    block, head = hit if hit is not None else layout(n, versioned)
    if block.size <= SLOT:
        try:
            slot = _free.popleft()
        except IndexError:
            _grow()
            slot = _free.popleft()
    else:
        slot = own_block(block.size)
    address = slot[2]
    shape_p = address + head
    if release is None and CLEAR is not None and (versioned or data):
        deleter, watch = CLEAR, slot[4]
    else:
        deleter, watch = _CALLBACK, slot[4] + _DELETER_WORD[versioned]
    try:
        if versioned:
            block.pack_into(slot[0], slot[1], version[0], version[1], 0, deleter, flags,
                            data, kind, ordinal, n, code, bits, 1, shape_p,
                            shape_p + 8 * n, 0, *shape, *strides)
        else:
            block.pack_into(slot[0], slot[1], data, kind, ordinal, n, code, bits, 1,
                            shape_p, shape_p + 8 * n, 0, 0, deleter, *shape, *strides)
        capsule = _capsule_new(address, NAMES[versioned], None)
    except BaseException:  # (nothing was handed out: the slot is free again)
        if slot[5]:
            _free.append(slot)
        raise
    if len(_records) >= _look_at[0]:
        look()
    record = [slot, tensor, capsule, watch]
    if deleter is _CALLBACK:
        _waiting[address] = (record, release)
    _records.append(record)
    return capsule


HEAD_SIZE = 80  # bytes of a header given to export_head (a legacy one padded with zeros)
HEAD = struct.Struct(f"{HEAD_SIZE}s")


def export_head(tensor, head: bytes, name: int, release=None):
    """A capsule over ``tensor`` whose block is ``head``, a header of ``HEAD_SIZE`` bytes
    packed before (its shape and strides elsewhere); recorded as ``export`` records. Its
    deleter is ``CLEAR``, or ``CALLBACK`` when ``release`` is given (run as ``export``
    runs it)."""
    try:
        slot = _free.popleft()
    except IndexError:
        _grow()
        slot = _free.popleft()
    try:
        HEAD.pack_into(slot[0], slot[1], head)
        capsule = _capsule_new(slot[2], name, None)
    except BaseException:  # (nothing was handed out: the slot is free again)
        _free.append(slot)
        raise
    if len(_records) >= _look_at[0]:
        look()
    record = [slot, tensor, capsule, slot[4]]
    if release is not None:
        record[3] += _DELETER_WORD[name == NAMES[1]]
        _waiting[slot[2]] = (record, release)
    _records.append(record)
    return capsule


@DELETER
def _deleter(address):
    # first: any call that returns a value (a builtin's included) fails while the
    # consumer's exception is pending, and the release would be lost
    try:
        _raise_pending()
        pending = None
    except BaseException as exc:  # noqa: BLE001 - the consumer's: printed below
        pending = exc
    if _finalizing():  # the interpreter is going: nothing to order, nobody to tell
        return
    try:
        hit = _waiting.pop(address, None)
        if hit is not None:
            record, release = hit
            try:
                if release is not None and record[1] is not None:
                    release(record[1])
            finally:
                record[1] = None  # the tensor goes now; the block at the next look
                record[0][3][record[3]] = 0
    except BaseException as exc:  # noqa: BLE001 - deleters never raise
        print(f"tenferro_cuda: DLPack deleter failed: {exc!r}", file=sys.stderr)
    if pending is not None:
        print(f"tenferro_cuda: an exception was pending when the DLPack deleter ran and "
              f"could not be passed on: {pending!r}", file=sys.stderr)


_CALLBACK: int = ctypes.cast(_deleter, ctypes.c_void_p).value or 0
CALLBACK = _CALLBACK  # (the deleter of a header packed for ``export_head(release=...)``)


def _ended(record: list) -> bool:
    """Whether an export whose deleter has not been called ended anyway: its capsule died
    unconsumed. (A consumed capsule is forgotten here; its deleter is still to come.)"""
    if record[2] is not None and _refs(record[2]) == 2:  # only this record holds it
        if _capsule_name_address(record[2]) in NAMES:  # not renamed: never consumed
            _waiting.pop(record[0][2], None)
            return True
        record[2] = None  # consumed: its deleter is still to come
    return False


def look() -> None:
    """End the records whose consumer let go (see the module doc). Safe on several
    threads at once: each record is taken by one look only."""
    kept: list[list] = []
    ended: list[list] = []
    try:
        for _ in range(len(_records)):
            try:
                record = _records.popleft()
            except IndexError:  # another look took the rest
                break
            if record[0][3][record[3]] == 0:  # the consumer called the deleter
                ended.append(record)
                continue
            # kept until it is known to have ended: an interrupted look loses no record
            kept.append(record)
            if _ended(record):
                ended.append(kept.pop())
    finally:
        _records.extend(kept)
    _look_at[0] = max(LOOK_AFTER, 2 * len(kept))
    for record in ended:
        if record[0][5]:
            _free.append(record[0])
    if resident:
        ended.extend(_look_resident())
    del ended  # the tensors go here, after the bookkeeping


def look_after() -> int:
    """How many records (or resident records) start a look."""
    return _look_at[0]


def _look_resident() -> list:
    """End the resident records whose consumer let go (``_dlpack_lease``'s module doc):
    the word zero, or the capsule dropped unconsumed (its word is then zeroed, so that
    the block is reused). Returns the tensors they held."""
    dropped = []
    for record in list(resident.values()):
        token = record[4]
        try:
            token.pop()
        except IndexError:  # an export is reusing it now: the next look
            continue
        try:
            words, watch, capsule = record[0][3], record[3], record[2]
            if words[watch] != 0:
                if capsule is None or _refs(capsule) != 3 \
                        or _capsule_name_address(capsule) not in NAMES:
                    continue  # held (or consumed, its deleter still to come)
                _waiting.pop(record[0][2], None)  # (its callback will never come)
                words[watch] = 0  # dropped unconsumed
            del capsule
            resident.pop(id(record), None)
            dropped.append(record[1])
            record[1] = None
        finally:
            token.append(True)
    return dropped


def pending(tensor=None) -> int:
    """How many exports (of ``tensor``, or all) are still held."""
    look()
    if tensor is None:
        return len(_records) + len(resident)
    return sum(1 for record in [*_records, *resident.values()] if record[1] is tensor)


def over(buffer) -> int:
    """How many exports over ``buffer`` (any tensor or view of it) are still held."""
    look()
    return sum(1 for record in [*_records, *resident.values()]
               if record[1] is not None and record[1].base.buffer is buffer)


def _after_full_collection(phase: str, info: dict) -> None:
    if phase == "stop" and info.get("generation") == 2 and (_records or resident):
        look()


memory.install_pressure_hook(look)
gc.callbacks.append(_after_full_collection)
