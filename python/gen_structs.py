#!/usr/bin/env python3
"""Generate python/deepinfer_sm80/_structs.py from the public headers include/dsv4/*.h.

    python3 python/gen_structs.py            # rewrite _structs.py
    python3 python/gen_structs.py --check    # exit 1 if _structs.py differs from the headers

It reads the plain C the headers are written in, nothing more:
  typedef struct name { type field; /* comment */ ... } name_t;     -> ctypes.Structure
  typedef existing_t alias_t;                                       -> alias
  typedef enum name { NAME = value, ... } name_t;                   -> integer constants
  #define DSV4_NAME <number>                                        -> constants
  dsv4_status_t dsv4_op(const dsv4_op_desc_t *desc, ...);           -> PROTOTYPES (restype, argtypes)
numerics.h (static inline code) is skipped. Anything it cannot parse is an error, so a header
that outgrows this generator fails loudly instead of producing a silently wrong binding.
python/tests/test_structs.py regenerates the file and fails if it differs from the committed one.
"""
import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
HEADERS = ROOT / "include" / "dsv4"
OUT = ROOT / "python" / "deepinfer_sm80" / "_structs.py"
SKIP = {"numerics.h"}  # static inline host/device code, no structs or exported symbols

SCALARS = {
    "int": "ctypes.c_int",
    "unsigned": "ctypes.c_uint",
    "float": "ctypes.c_float",
    "double": "ctypes.c_double",
    "size_t": "ctypes.c_size_t",
    "char": "ctypes.c_char",
    "int8_t": "ctypes.c_int8",
    "uint8_t": "ctypes.c_uint8",
    "int16_t": "ctypes.c_int16",
    "uint16_t": "ctypes.c_uint16",
    "int32_t": "ctypes.c_int32",
    "uint32_t": "ctypes.c_uint32",
    "int64_t": "ctypes.c_int64",
    "uint64_t": "ctypes.c_uint64",
}
OPAQUE_HANDLES = {"dsv4_stream_t"}  # typedef struct x *y_t: passed as void *


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


class Parsed:
    def __init__(self):
        self.structs = []  # (name, [(field, ctype_expr, c_decl)], header)
        self.struct_names = set()
        self.enums = []  # (name, value, header)
        self.defines = []  # (name, literal, header)
        self.aliases = []  # (alias, target)
        self.typedef_ints = {}  # enum typedef name -> "ctypes.c_int"
        self.protos = []  # (name, restype, [argtypes], header)


def ctype_of(decl_type, pointer, parsed, where):
    """ctypes expression for a declared type (pointer: number of '*')."""
    if pointer:
        base = decl_type
        if pointer == 1 and base in parsed.struct_names:
            return f"ctypes.POINTER({base})"
        if pointer == 1 and base == "char":
            return "ctypes.c_char_p"
        return "ctypes.c_void_p"
    if decl_type in SCALARS:
        return SCALARS[decl_type]
    if decl_type in parsed.struct_names:
        return decl_type
    if decl_type in parsed.typedef_ints:
        return parsed.typedef_ints[decl_type]
    if decl_type in OPAQUE_HANDLES:
        return "ctypes.c_void_p"
    if decl_type == "void":
        return None
    raise SystemExit(f"gen_structs: {where}: unknown type {decl_type!r}")


def parse_decl(decl, where):
    """'const uint16_t *k' -> (type, pointers, name, array_len or None)."""
    toks = re.findall(r"\w+|\*|\[\s*\w+\s*\]|\S", decl)
    arr = None
    if toks and toks[-1].startswith("["):
        arr = toks.pop()[1:-1].strip()
    if len(toks) < 2 or not re.fullmatch(r"[A-Za-z_]\w*", toks[-1]):
        raise SystemExit(f"gen_structs: {where}: cannot parse declaration {' '.join(decl.split())!r}")
    name = toks.pop()
    words = [t for t in toks if t not in ("const", "struct", "*")]
    if any(not re.fullmatch(r"\w+", t) for t in toks if t != "*"):
        raise SystemExit(f"gen_structs: {where}: cannot parse declaration {' '.join(decl.split())!r}")
    if words == ["unsigned", "int"]:
        words = ["unsigned"]
    if len(words) != 1:
        raise SystemExit(f"gen_structs: {where}: unsupported type {' '.join(words)!r} in {' '.join(decl.split())!r}")
    return words[0], toks.count("*"), name, arr


def parse_header(path, parsed, defines_seen):
    raw = path.read_text()
    hname = path.name
    for m in re.finditer(r"^\s*#\s*define\s+(DSV4_\w+)\s+([^\n]*?)\s*(?:/\*.*)?$", raw, flags=re.M):
        name, value = m.group(1), m.group(2).strip()
        num = re.fullmatch(r"\(?\s*(-?(?:0x[0-9A-Fa-f]+|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?))[uUlLfF]*\s*\)?", value)
        if num and name not in defines_seen:
            defines_seen.add(name)
            parsed.defines.append((name, num.group(1), hname))
    text = strip_comments(raw)
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    text = text.replace('extern "C" {', " ")

    pos = 0
    stmt_re = re.compile(
        r"typedef\s+struct\s+(\w+)\s*\{(?P<body>[^{}]*)\}\s*(?P<tname>\w+)\s*;"
        r"|typedef\s+enum\s+(\w+)\s*\{(?P<ebody>[^{}]*)\}\s*(?P<ename>\w+)\s*;"
        r"|typedef\s+struct\s+\w+\s*\*\s*(?P<opaque>\w+)\s*;"
        r"|typedef\s+(?P<atarget>\w+)\s+(?P<alias>\w+)\s*;"
        r"|(?P<ret>(?:const\s+)?\w+\s*\**)\s*\b(?P<fname>dsv4_\w+)\s*\((?P<params>[^;{}()]*)\)\s*;"
        r"|(?P<close>\})"
    )
    for m in stmt_re.finditer(text):
        gap = text[pos:m.start()].strip()
        if gap:
            raise SystemExit(f"gen_structs: {hname}: cannot parse {gap[:80]!r}")
        pos = m.end()
        if m.group("tname"):
            tname = m.group("tname")
            fields = []
            for decl in m.group("body").split(";"):
                if not decl.strip():
                    continue
                base, ptrs, fname, arr = parse_decl(decl, f"{hname}: {tname}")
                ct = ctype_of(base, ptrs, parsed, f"{hname}: {tname}.{fname}")
                if arr:
                    ct = f"{ct} * {arr}"
                fields.append((fname, ct, " ".join(decl.split())))
            parsed.structs.append((tname, fields, hname))
            parsed.struct_names.add(tname)
        elif m.group("ename"):
            parsed.typedef_ints[m.group("ename")] = "ctypes.c_int"
            value = -1
            for item in m.group("ebody").split(","):
                item = item.strip()
                if not item:
                    continue
                em = re.fullmatch(r"(\w+)(?:\s*=\s*(-?\d+))?", item)
                if not em:
                    raise SystemExit(f"gen_structs: {hname}: cannot parse enum item {item!r}")
                value = int(em.group(2)) if em.group(2) is not None else value + 1
                parsed.enums.append((em.group(1), value, hname))
        elif m.group("opaque"):
            if m.group("opaque") not in OPAQUE_HANDLES:
                raise SystemExit(f"gen_structs: {hname}: unknown opaque handle {m.group('opaque')}")
        elif m.group("alias"):
            target, alias = m.group("atarget"), m.group("alias")
            if target not in parsed.struct_names:
                raise SystemExit(f"gen_structs: {hname}: typedef of unknown struct {target}")
            parsed.aliases.append((alias, target))
            parsed.struct_names.add(alias)
        elif m.group("fname"):
            fname = m.group("fname")
            ret = " ".join(m.group("ret").split())
            rbase, rptr, _, _ = parse_decl(ret + " x", f"{hname}: {fname}")
            restype = ctype_of(rbase, rptr, parsed, f"{hname}: {fname} return")
            params = [p.strip() for p in m.group("params").split(",")]
            argtypes = []
            if params != ["void"]:
                for p in params:
                    base, ptrs, pname, arr = parse_decl(p, f"{hname}: {fname}")
                    if arr:
                        raise SystemExit(f"gen_structs: {hname}: {fname}: array parameter {p!r}")
                    argtypes.append(ctype_of(base, ptrs, parsed, f"{hname}: {fname}({pname})"))
            parsed.protos.append((fname, restype, argtypes, hname))
        # a lone '}' closes the extern "C" block of a C++ guard
    rest = text[pos:].strip()
    if rest:
        raise SystemExit(f"gen_structs: {hname}: cannot parse {rest[:80]!r}")


def generate():
    parsed = Parsed()
    defines_seen = set()
    # dsv4.h first (the common types), then the rest in name order.
    headers = sorted(HEADERS.glob("*.h"), key=lambda p: (p.name != "dsv4.h", p.name))
    for path in headers:
        if path.name not in SKIP:
            parse_header(path, parsed, defines_seen)

    out = [
        '"""ctypes mirrors of the public headers include/dsv4/*.h.',
        "",
        "GENERATED by python/gen_structs.py: do not edit. Run `python3 python/gen_structs.py` after",
        "changing a header; python/tests/test_structs.py fails while this file is out of date.",
        "Every pointer field is a c_void_p (set it to an address or None); the C declaration is kept",
        "in a comment next to each field.",
        '"""',
        "import ctypes",
        "",
        "# ---- constants (#define and enum values) ----",
    ]
    for name, lit, h in parsed.defines:
        out.append(f"{name} = {lit}  # {h}")
    for name, value, h in parsed.enums:
        out.append(f"{name} = {value}  # {h}")
    out.append("")
    header = None
    for tname, fields, h in parsed.structs:
        if h != header:
            out += ["", f"# ---- {h} ----"]
            header = h
        out += ["", "", f"class {tname}(ctypes.Structure):", "    _fields_ = ["]
        for fname, ct, decl in fields:
            out.append(f'        ("{fname}", {ct}),  # {decl}')
        out.append("    ]")
        for alias, target in parsed.aliases:
            if target == tname:
                out += ["", "", f"{alias} = {tname}"]
    out += ["", "", "STRUCTS = ["]
    out += [f"    {t}," for t, _, _ in parsed.structs]
    out += ["]", "", "# name -> (restype, [argtypes]) of every exported function", "PROTOTYPES = {"]
    for fname, restype, argtypes, _ in parsed.protos:
        out.append(f'    "{fname}": ({restype}, [{", ".join(argtypes)}]),')
    out += ["}", ""]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the committed file is out of date")
    args = ap.parse_args()
    text = generate()
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT.relative_to(ROOT)} is out of date: run python3 python/gen_structs.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
