"""Write ``tenferro_cuda/_session_ops.pyi`` from the op families' METHODS tables.

    python tools/gen_stubs.py          # rewrite the stub
    python tools/gen_stubs.py --check  # exit 1 when the stub is out of date
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tenferro_cuda._session_ops import stub_text  # noqa: E402

STUB = Path(__file__).resolve().parent.parent / "tenferro_cuda" / "_session_ops.pyi"


def main(argv: list[str]) -> int:
    text = stub_text()
    if "--check" in argv:
        if not STUB.is_file() or STUB.read_text() != text:
            print(f"{STUB} is out of date: run python tools/gen_stubs.py", file=sys.stderr)
            return 1
        return 0
    STUB.write_text(text)
    print(f"wrote {STUB}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
