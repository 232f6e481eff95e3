"""Regenerate the op list in README.md from what lucid exports (lucid.ops.__all__),
grouped by the family module that defines each op. tests/test_dispatch.py checks that
the README and the exports agree.

    python tools/readme_ops.py          # rewrite README.md in place
    python tools/readme_ops.py --print  # print the list only
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN, END = "<!-- ops: begin -->", "<!-- ops: end -->"
TITLES = {"unary": "Element-wise (one tensor)", "binary": "Element-wise (two operands)",
          "compare": "Comparisons, logical ops, where", "reduce": "Reductions",
          "shape": "Shape and indexing", "linalg": "Linear algebra", "creation": "Creation",
          "core": "Copies", "_sorting": "Sorting and selection", "special": "Special functions",
          "_vmap": "Transforms"}


def op_list():
    sys.path.insert(0, ROOT)       # the checkout's lucid when built in place
    import lucid
    groups = {}
    for name in lucid.ops.__all__:
        mod = getattr(getattr(lucid.ops, name), "__module__", "") or ""
        family = mod.rsplit(".", 1)[-1]
        groups.setdefault(family, []).append(name)
    lines = [BEGIN]
    for family in sorted(groups, key=lambda f: list(TITLES).index(f) if f in TITLES else 99):
        names = ", ".join(f"`{n}`" for n in sorted(groups[family]))
        lines.append(f"- **{TITLES.get(family, family)}**: {names}")
    lines.append(END)
    return "\n".join(lines)


def main():
    text = op_list()
    if "--print" in sys.argv:
        print(text)
        return 0
    path = os.path.join(ROOT, "README.md")
    readme = open(path).read()
    if BEGIN in readme:
        head, rest = readme.split(BEGIN, 1)
        readme = head + text + rest.split(END, 1)[1]
    else:
        raise SystemExit(f"README.md has no {BEGIN} ... {END} block to fill")
    with open(path, "w") as f:
        f.write(readme)
    return 0


if __name__ == "__main__":
    sys.exit(main())
