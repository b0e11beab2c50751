"""The headers a caller's source reaches through its include options, for the cache key.

A program compiled with ``-I<dir>`` / ``--include-path=<dir>`` (or a pre-included header,
``-include <file>`` / ``--pre-include=<file>``) depends on files the kernel cache would not
see otherwise: an edited header must not be served the image of the old one. ``digest``
follows the ``#include`` directives of the source, and of every header found, through the
caller's include directories (a quoted name is looked up next to the including header
first), and hashes each file found: its path and its bytes. A name found nowhere is
hashed as a name, so a header that appears later changes the key too. What the directives
do not spell -- a header picked by a macro (``#include MACRO``), or one behind an ``#if``
that is never taken -- is not followed the first way and is hashed the second. The
package's own headers (``ptx/include``) are in the key already; a source compiled with no
include option has no digest and keeps its key.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable

__all__ = ["include_dirs", "digest"]

_DIRECTIVE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\r\n]+)[>"]', re.MULTILINE)
MAX_FILES = 4096  # a bound on the walk (a directory of system headers, say)
MAX_BYTES = 1 << 26  # a header larger than this is hashed by its size and time only


def include_dirs(options: Iterable[str]) -> tuple[list[str], list[str]]:
    """(include directories, pre-included headers) named by NVRTC options, in order."""
    dirs: list[str] = []
    pre: list[str] = []
    items = list(options)
    i = 0
    while i < len(items):
        opt = items[i]
        i += 1
        for flags, into in ((("-I", "--include-path"), dirs),
                            (("-include", "--pre-include"), pre)):
            if opt in flags:  # the value is the next option
                if i < len(items):
                    into.append(items[i])
                    i += 1
                break
            long = flags[1] + "="
            if opt.startswith(long):
                into.append(opt[len(long):])
                break
            if flags[0] == "-I" and opt.startswith("-I"):
                into.append(opt[2:])
                break
    return dirs, pre


def _find(name: str, near: str | None, dirs: list[str]) -> str | None:
    places = ([near] if near is not None else []) + dirs
    for place in places:
        path = os.path.join(place, name)
        if os.path.isfile(path):
            return os.path.abspath(path)
    return None


def _read(path: str, h) -> bytes:
    """The bytes of ``path`` (hashed into ``h`` with the path), or b"" when unreadable."""
    try:
        info = os.stat(path)
        if info.st_size > MAX_BYTES:
            h.update(f"{path}\0{info.st_size}\0{info.st_mtime_ns}\0".encode())
            return b""
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        h.update(f"{path}\0unreadable {exc.errno}\0".encode())
        return b""
    h.update(f"{path}\0{len(data)}\0".encode())
    h.update(data)
    return data


def digest(source: str | bytes, options: Iterable[str]) -> str:
    """The sha256 of what ``source`` reaches through the include options in ``options``
    ("" when they name none; see the module docstring)."""
    dirs, pre = include_dirs(options)
    if not dirs and not pre:
        return ""
    h = hashlib.sha256()
    text = source.encode() if isinstance(source, str) else bytes(source)
    # (text, the directory of its file: None for the source itself)
    queue: list[tuple[bytes, str | None]] = [(text, None)]
    seen: set[str] = set()
    for name in pre:
        path = _find(name, None, dirs) if not os.path.isabs(name) else \
            (name if os.path.isfile(name) else None)
        h.update(f"pre\0{name}\0".encode())
        if path is not None and path not in seen:
            seen.add(path)
            queue.append((_read(path, h), os.path.dirname(path)))
    while queue and len(seen) < MAX_FILES:
        data, here = queue.pop()
        for kind, raw in _DIRECTIVE.findall(data):
            name = raw.decode(errors="replace").strip()
            path = _find(name, here if kind == b'"' else None, dirs)
            if path is None:
                h.update(f"missing\0{name}\0".encode())
                continue
            if path in seen:
                continue
            seen.add(path)
            queue.append((_read(path, h), os.path.dirname(path)))
    return h.hexdigest()
