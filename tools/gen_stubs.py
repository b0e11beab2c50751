"""Write ``tenferro_cuda/_session_ops.pyi`` from the op families' METHODS tables, and
``docs/api.md`` (``tools/gen_api.py``) from the same methods.

    python tools/gen_stubs.py          # rewrite the stub and docs/api.md
    python tools/gen_stubs.py --check  # exit 1 when either is out of date
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen_api  # noqa: E402

from tenferro_cuda._session_ops import stub_text  # noqa: E402

STUB = Path(__file__).resolve().parent.parent / "tenferro_cuda" / "_session_ops.pyi"


def main(argv: list[str]) -> int:
    text = stub_text()
    if "--check" in argv:
        if not STUB.is_file() or STUB.read_text() != text:
            print(f"{STUB} is out of date: run python tools/gen_stubs.py", file=sys.stderr)
            return 1
        return gen_api.main(argv)
    STUB.write_text(text)
    print(f"wrote {STUB}")
    return gen_api.main(argv)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
