"""The ctypes structs are generated from the headers and must match them: regenerate and diff,
compare every size and field offset with the C compiler's, and resolve every prototype."""
import ctypes
import pathlib
import shutil
import subprocess

import pytest

import gen_structs
from deepinfer_sm80 import _structs
from deepinfer_sm80._lib import lib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_structs_file_is_up_to_date():
    fresh = gen_structs.generate()
    committed = gen_structs.OUT.read_text()
    assert committed == fresh, (
        "python/deepinfer_sm80/_structs.py differs from what include/dsv4/*.h generate: "
        "run `python3 python/gen_structs.py` and commit the result"
    )


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_layout_matches_the_c_compiler(tmp_path):
    lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "dsv4/dsv4.h"', "int main(void) {"]
    expect = []
    for cls in _structs.STRUCTS:
        n = cls.__name__
        lines.append(f'    printf("%zu\\n", sizeof({n}));')
        expect.append((f"sizeof({n})", ctypes.sizeof(cls)))
        for field, _ in cls._fields_:
            lines.append(f'    printf("%zu\\n", offsetof({n}, {field}));')
            expect.append((f"offsetof({n}, {field})", getattr(cls, field).offset))
    lines += ["    return 0;", "}"]
    src, exe = tmp_path / "layout.c", tmp_path / "layout"
    src.write_text("\n".join(lines) + "\n")
    subprocess.run(["cc", "-std=c11", "-I", str(ROOT / "include"), str(src), "-o", str(exe)], check=True)
    got = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()
    assert len(got) == len(expect)
    bad = [f"{what}: C {c}, ctypes {py}" for (what, py), c in zip(expect, map(int, got)) if py != c]
    assert not bad, "ctypes layout differs from the C compiler's:\n" + "\n".join(bad)


def test_every_prototype_is_exported():
    missing = [name for name in _structs.PROTOTYPES if not hasattr(lib, name)]
    assert not missing, f"declared in include/dsv4/*.h but not exported by libdsv4.so: {missing}"


def test_generator_rejects_what_it_cannot_parse(tmp_path, monkeypatch):
    (tmp_path / "x.h").write_text("typedef struct s { int a, b; } s_t;\n")
    monkeypatch.setattr(gen_structs, "HEADERS", tmp_path)
    with pytest.raises(SystemExit, match="cannot parse|unsupported"):
        gen_structs.generate()
