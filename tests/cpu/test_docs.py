"""The documentation agrees with the code: docs/api.md is what tools/gen_api.py writes
(every public session method, its signature and summary); docs/errors.md names every
error class and every kind; no page points outside the repository (no web links, every
relative link resolves to a file of the repository); the README's examples are complete
programs (every name they read is bound in them) and the kernel author's CUDA source
compiles with NVRTC."""

from __future__ import annotations

import ast
import importlib.util
import re

import pytest
from readme_blocks import README, ROOT, block, free_names

from tenferro_cuda import _nvrtc, errors
from tenferro_cuda.kernels.compiler import options_for
from tenferro_cuda.session import CudaExecSession

PAGES = sorted([README, *(ROOT / "docs").glob("*.md")])


def _gen_api():
    spec = importlib.util.spec_from_file_location("gen_api", ROOT / "tools" / "gen_api.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_api_page_is_generated_from_the_code():
    text = (ROOT / "docs" / "api.md").read_text()
    assert text == _gen_api().api_text(), "docs/api.md is stale: run python tools/gen_api.py"


def test_api_page_lists_every_public_method_with_a_summary():
    text = (ROOT / "docs" / "api.md").read_text()
    entries = dict(re.findall(r"^- `(\w+)\(.*?`: (.+)$", text, re.M))
    public = {n for n in dir(CudaExecSession) if not n.startswith("_")
              and callable(getattr(CudaExecSession, n))}
    assert public <= set(entries), sorted(public - set(entries))
    assert all(entries[n].strip() for n in public)
    assert "`add(lhs: Tensor | TensorView | Scalar, rhs: Tensor | TensorView | Scalar) -> " \
           "Tensor`" in text
    assert "`iota(dtype: DType | str, shape: int | Sequence[int], dimension: int) -> " \
           "Tensor`" in text


ERROR_CLASSES = [n for n in errors.__all__ if n != "VALIDATION_KINDS"]


def test_errors_page_covers_every_class_and_kind():
    text = (ROOT / "docs" / "errors.md").read_text()
    for name in ERROR_CLASSES:
        assert f"`{name}`" in text, name
    kinds = text[text.index("## `ValidationError` kinds"):]
    for kind in errors.VALIDATION_KINDS:
        assert re.search(rf"^\| `{kind}` \|", kinds, re.M), kind
    entry = text[text.index("## `SessionEntryError` kinds"):]
    for kind in ("reentered", "contended"):
        assert f"| `{kind}` |" in entry


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_page_points_outside_the_repository(page):
    text = page.read_text()
    web = re.findall(r"(?:https?|ftp)://\S+|\bwww\.\S+", text)
    assert not web, f"{page.name} links outside the repository: {web}"
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        path = (page.parent / target.split("#", 1)[0]).resolve()
        assert ROOT in path.parents or path == ROOT, f"{page.name}: {target} leaves the repo"
        assert path.exists(), f"{page.name}: {target} does not exist"


@pytest.mark.parametrize("heading", ["For library users", "For kernel authors"])
def test_readme_examples_are_complete_programs(heading):
    code = block(heading)
    compile(code, f"README: {heading}", "exec")
    assert not free_names(code), f"README '{heading}' uses unbound names"
    assert "import tenferro_cuda as tc" in code and "import numpy as np" in code


def test_free_names_finds_what_an_example_forgot():
    assert free_names("x = np.ones(3)\ndef f(a):\n    return a + y\n") == {"np", "y"}
    assert not free_names("import numpy as np\nx = np.ones(3)\nprint(len(x))\n")


@pytest.mark.parametrize("arch", [80, 90])
def test_readme_kernel_source_compiles(arch):
    tree = ast.parse(block("For kernel authors"))
    src = next(ast.literal_eval(node.value) for node in tree.body
               if isinstance(node, ast.Assign) and node.targets[0].id == "SRC")
    prog = _nvrtc.compile_program(src, "readme_axpy.cu", options_for(arch), op="readme")
    assert b"axpy" in prog.image
