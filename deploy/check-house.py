#!/usr/bin/env python3
"""Checks the house rules that a compiler does not (docs/DESIGN.md, "The house rules"):

  1. no .cc file over 600 lines and no function over 80 lines, outside test/, bench/ and fuzz targets;
  2. client/ includes no header from meganode/ or server/ (dependencies point down);
  3. with --lib=PATH: libcell.so neither exports, needs nor contains a symbol of the storage engine (the B-link
     tree's writer and the code of meganode/, logging/ and server/).

Prints one line per violation and exits 1 if there is any; `--self-test` proves each check rejects a bad input.

  deploy/check-house.py [--root=DIR] [--lib=build/libcell.so]
  deploy/check-house.py --self-test [--lib=build/libcell_meganode.a]   (the library given must fail the check)
"""
import os
import re
import subprocess
import sys
import tempfile

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
SOURCE_DIRS = ["btree", "client", "common", "examples", "include", "logging", "meganode", "membership", "rpc",
               "selector", "server", "sql", "tools"]
# The storage engine: btree/'s writer and everything in meganode/, logging/ and server/ (the client needs btree/'s
# node format and readers for its one-sided searches, and nothing else of the engine).
STORAGE_SYMBOLS = ["cell::btree::BLinkTree::", "cell::meganode::", "cell::logging::", "cell::server::"]
CONTROL = re.compile(r"^(if|for|while|switch|catch|else|do|try)\b|^(else\s+if)\b")
AGGREGATE = re.compile(r"(^|\s)(namespace|class|struct|union|enum)(\s|$)|^extern\s+\"C\"")


def strip_code(text):
    """The text with comments, strings and character literals blanked (newlines kept, so line numbers hold)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = ")" + m.group(1) + '"'
            j = text.find(end, i)
            j = n if j < 0 else j + len(end)
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 2:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (j - i - 1) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def long_functions(path, text):
    """(name, first line, lines) of every function body longer than MAX_FUNCTION_LINES."""
    code = strip_code(text)
    code = re.sub(r"^\s*#.*$", "", code, flags=re.M)  # preprocessor lines
    found, stack, header, line = [], [], [], 1
    for c in code:
        if c == "\n":
            line += 1
            header.append(" ")
        elif c == "{":
            h = " ".join("".join(header).split())
            header = []
            in_function = any(kind == "function" for kind, _, _ in stack)
            kind = "other"
            if AGGREGATE.search(h) and "(" not in h.split("{")[0].split(":")[0]:
                kind = "aggregate"
            elif not in_function and "(" in h and not CONTROL.match(h) and not h.endswith("="):
                kind = "function"
            stack.append((kind, line, h))
        elif c == "}":
            header = []
            if not stack:
                continue
            kind, start, h = stack.pop()
            if kind == "function" and line - start + 1 > MAX_FUNCTION_LINES:
                name = re.findall(r"([~\w:]+)\s*\(", h)
                found.append((name[0] if name else h[:60], start, line - start + 1))
        elif c == ";":
            header = []
        else:
            header.append(c)
    return found


def house_sources(root):
    for d in SOURCE_DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, d)):
            for f in sorted(files):
                if f.endswith((".cc", ".h")) and "fuzz" not in f:
                    yield os.path.join(dirpath, f)


def check_sizes(root):
    problems = []
    for path in house_sources(root):
        text = open(path, encoding="utf-8").read()
        rel = os.path.relpath(path, root)
        lines = text.count("\n")
        if path.endswith(".cc") and lines > MAX_FILE_LINES:
            problems.append(f"{rel}: {lines} lines (at most {MAX_FILE_LINES} in a .cc file)")
        for name, start, n in long_functions(path, text):
            problems.append(f"{rel}:{start}: {name} is {n} lines (at most {MAX_FUNCTION_LINES} in a function)")
    return problems


def check_client_includes(root):
    problems = []
    include = re.compile(r'^\s*#\s*include\s+"((meganode|server)/[^"]+)"', re.M)
    for dirpath, _, files in os.walk(os.path.join(root, "client")):
        for f in sorted(files):
            path = os.path.join(dirpath, f)
            for m in include.finditer(open(path, encoding="utf-8").read()):
                problems.append(f"{os.path.relpath(path, root)}: includes {m.group(1)} (client/ must not reach up "
                                f"into meganode/ or server/)")
    return problems


def check_library(lib):
    """Every storage-engine symbol in `lib`'s symbol table: exported, undefined or linked in and hidden."""
    symbols = subprocess.run(["nm", "-C", lib], capture_output=True, text=True).stdout
    symbols += subprocess.run(["nm", "-D", "-C", lib], capture_output=True, text=True).stdout
    problems = []
    for row in sorted(set(symbols.splitlines())):
        if any(ns in row for ns in STORAGE_SYMBOLS):
            problems.append(f"{lib}: {row.strip()[:160]} (the client library must not carry storage-engine code)")
    return problems


def self_test(bad_lib):
    long_body = "int F(int x) {\n" + "  x++;\n" * MAX_FUNCTION_LINES + "  return x;\n}\n"
    short_body = "int G(int x) {\n  if (x) {\n    return 1;\n  }\n  return 0;\n}\n"
    assert [f[0] for f in long_functions("t.cc", long_body)] == ["F"], "a long function was not found"
    assert long_functions("t.cc", short_body) == [], "a short function was reported"
    in_class = "class A {\n public:\n  void M() {\n" + "    y();\n" * MAX_FUNCTION_LINES + "  }\n};\n"
    assert [f[0] for f in long_functions("t.h", in_class)] == ["M"], "a long inline method was not found"
    in_namespace = "namespace n {\n" + short_body * 40 + "}  // namespace n\n"
    assert long_functions("t.cc", in_namespace) == [], "a namespace was taken for a function"
    braces_in_text = 'void H() {\n  s = "{";  // }\n  c = \'}\';\n' + "  y();\n" * MAX_FUNCTION_LINES + "}\n"
    assert [f[0] for f in long_functions("t.cc", braces_in_text)] == ["H"], "braces in strings were counted"
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "client"))
        with open(os.path.join(root, "client", "a.cc"), "w") as f:
            f.write('#include "rpc/frame.h"\n#include "meganode/local_store.h"\n')
        assert len(check_client_includes(root)) == 1, "a client include of meganode/ was not found"
        with open(os.path.join(root, "client", "big.cc"), "w") as f:
            f.write("// x\n" * (MAX_FILE_LINES + 1))
        assert len(check_sizes(root)) == 1, "a long file was not found"
    if bad_lib:
        assert check_library(bad_lib), f"no storage-engine symbol found in {bad_lib}"
    print("check-house self-test: every check rejects its bad input")


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    lib, test = None, False
    for arg in sys.argv[1:]:
        if arg.startswith("--root="):
            root = arg.split("=", 1)[1]
        elif arg.startswith("--lib="):
            lib = arg.split("=", 1)[1]
        elif arg == "--self-test":
            test = True
        else:
            print(f"check-house.py: unknown argument {arg}", file=sys.stderr)
            return 2
    if test:
        self_test(lib)
        return 0
    problems = check_sizes(root) + check_client_includes(root)
    if lib:
        problems += check_library(lib)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
