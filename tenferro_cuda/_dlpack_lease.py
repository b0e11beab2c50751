"""A block of its own for a tensor exported again and again (the export's kit, in
``_dlpack_export``), reused in place once its consumer has let go.

An export through ``_dlpack_slots.export_head`` takes a shared slot, makes a capsule and
leaves a record that a later look ends: about half of what a kit export costs. A kit
holds instead one *resident* record (``holder``: a list, empty until the first export)
over a block of its own:

- ``[block, tensor or None, capsule or None, index of the watched word, token, the
  capsule's words or None]``, registered in ``_dlpack_slots.resident`` while its consumer
  may hold the block: a look ends it there as it ends other records (the word zero, or
  the capsule dropped unconsumed) and then drops the tensor, so the tensor's memory stays
  with us as long as the consumer holds it, never less.
- **Reused** when the kit exports again and the word is zero: the header is packed again
  (the word is never zero while a consumer holds the block), and a record a look ended
  gets its tensor back and is registered again. As many resident records as the
  ``_dlpack_slots`` records that start a look start one too.
- **The capsule is reused** too when nobody else holds it: its name (a consumer renames
  it ``used_...``), context and destructor are written back in place. Its four words
  (pointer, name, context, destructor, after the object's header) are found by a probe
  when this module is imported; where the probe fails, or where the interpreter runs
  without the GIL, each reuse makes a new capsule.
- **An ordered export** (a consumer on a default stream) packs the header whose deleter
  is ``_dlpack_slots.CALLBACK`` and registers the record in ``_dlpack_slots._waiting``
  under the block's address: the callback runs its release, drops the tensor and zeros
  the watched word, as it does for a shared slot. A look that finds its capsule dropped
  unconsumed takes the record out of ``_waiting`` first.
- **The token** (a one-element list) is taken with one ``list.pop`` by whoever changes
  the record -- a kit export or a look, on any thread -- and put back after: the other
  leaves the record alone meanwhile (a look skips it until its next run; an export takes
  a shared slot). While the consumer holds the block, the export takes a shared slot too.
- **A consumer that calls the deleter twice** (against the protocol) clears whatever the
  block holds by then: with a shared slot, a slot given back is handed out again as late
  as can be (``_dlpack_slots``), so the stale call lands on a free slot; the tensor's own
  block is handed out again at once, so the stale call may clear a later export of the
  same tensor, which a look then ends early: if nothing else holds the tensor, its memory
  may go while that later consumer still reads it. (When the later export is an ordered
  one, the stale call through the callback also runs its release then, one ordering
  early, and ends it at once.)
"""

from __future__ import annotations

import ctypes
import sys

from . import _dlpack_slots as _slots
from .dlpack import _NAME, _capsule_get_pointer, _capsule_name_address, _capsule_new

__all__ = ["FIELDS", "export"]

_refs = sys.getrefcount
_resident = _slots.resident
_waiting = _slots._waiting
_pack = _slots.HEAD.pack_into
_export_head = _slots.export_head


def _words_at(capsule, offset: int) -> memoryview:
    """The pointer, name, context and destructor words of ``capsule``, writable."""
    words = (ctypes.c_uint64 * 4).from_address(id(capsule) + offset)
    return memoryview(words).cast("B").cast("Q")


def _find_fields() -> int | None:
    """How far into a capsule object its four words lie, if a capsule made here shows
    them there and reads back what is written there; None otherwise, or without the
    GIL (module doc)."""
    if getattr(sys, "_is_gil_enabled", lambda: True)() is False:
        return None
    offset = 2 * ctypes.sizeof(ctypes.c_void_p)  # past the reference count and the type
    try:
        probe = ctypes.create_string_buffer(16)
        at = ctypes.addressof(probe)
        capsule = _capsule_new(at, _slots.NAMES[1], None)
        words = _words_at(capsule, offset)
        if list(words) != [at, _slots.NAMES[1], 0, 0]:
            return None
        words[0], words[1] = at + 8, _slots.NAMES[0]
        if (_capsule_get_pointer(capsule, _NAME.value), _capsule_name_address(capsule)) \
                != (at + 8, _slots.NAMES[0]):
            return None
    except (AttributeError, OSError, TypeError, ValueError):
        return None
    return offset


FIELDS = _find_fields()


def _words_of(capsule) -> memoryview | None:
    """The words of a new capsule, if the probe found where they lie."""
    return _words_at(capsule, FIELDS) if FIELDS is not None else None


def _first(tensor, holder: list, head: bytes, name: int, release):
    """The first export of a kit: its block, capsule and record, made and registered."""
    block = _slots.own_block(_slots.HEAD_SIZE)
    _pack(block[0], 0, head)
    capsule = _capsule_new(block[2], name, None)
    record = [block, tensor, capsule, block[4], [True], _words_of(capsule)]
    if release is not None:
        _waiting[block[2]] = (record, release)
    _resident[id(record)] = record
    holder.append(record)
    if len(_resident) >= _slots.look_after():
        _slots.look()
    return capsule


def export(tensor, holder: list, head: bytes, name: int, release=None):
    """A capsule of ``name`` over ``tensor`` whose header is ``head`` (``export_head``'s,
    with its deleter, ``CALLBACK`` when ``release`` is given): in the block of
    ``holder``'s record when its consumer let go, else in a shared slot."""
    if not holder:
        return _first(tensor, holder, head, name, release)
    record = holder[0]
    token = record[4]
    try:
        token.pop()
    except IndexError:  # a look or another export has it now
        return _export_head(tensor, head, name, release)
    try:
        block = record[0]
        if block[3][record[3]] != 0:  # its consumer holds it still
            return _export_head(tensor, head, name, release)
        _pack(block[0], 0, head)
        capsule = record[2]
        words = record[5]
        if capsule is not None and words is not None and _refs(capsule) == 3:
            words[1], words[2], words[3] = name, 0, 0  # (the pointer is this block's)
        else:  # someone holds the capsule still, or it went
            try:
                capsule = _capsule_new(block[2], name, None)
            except BaseException:  # (nothing was handed out: the block is free again)
                block[3][record[3]] = 0
                raise
            record[2] = capsule
            record[5] = _words_of(capsule)
        if release is not None:  # (the callback, which the header names, finds it here)
            _waiting[block[2]] = (record, release)
        if record[1] is None:  # a look ended it: registered again
            record[1] = tensor
            _resident[id(record)] = record
            if len(_resident) >= _slots.look_after():
                _slots.look()
        return capsule
    finally:
        token.append(True)
