"""The README's Python examples as code (for the tests of both tiers; defines no tests).

``block(heading)`` is the first ```` ```python ```` block under the ``## heading`` of
README.md; ``free_names(code)`` the names it reads that nothing in it binds (neither an
import, an assignment, a ``def`` or a parameter) and that are not builtins: an example
that runs as written has none.
"""

from __future__ import annotations

import builtins
import re
import symtable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def block(heading: str) -> str:
    text = README.read_text()
    start = text.index(f"\n## {heading}\n")
    m = re.compile(r"```python\n(.*?)```", re.S).search(text, start)
    assert m is not None, f"no python block under {heading!r}"
    nxt = text.find("\n## ", start + 1)
    assert nxt == -1 or m.start() < nxt, f"the first python block is not under {heading!r}"
    return m.group(1)


def free_names(code: str) -> set[str]:
    top = symtable.symtable(code, "README", "exec")
    bound = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    missing: set[str] = set()

    def visit(table: symtable.SymbolTable) -> None:
        for sym in table.get_symbols():
            name = sym.get_name()
            if not sym.is_referenced():
                continue
            local = table is not top and (sym.is_local() or sym.is_parameter())
            if not local and name not in bound and not hasattr(builtins, name):
                missing.add(name)
        for child in table.get_children():
            visit(child)
    visit(top)
    return missing
