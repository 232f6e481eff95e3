"""The installed package holds every subpackage of the source tree: pyproject.toml lists
packages by hand, and a new subpackage left out of it installs a lucid that cannot be
imported (tests run against the installed package, so they would not notice)."""
import os

import pytest

tomllib = pytest.importorskip("tomllib")      # Python 3.11+

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYPROJECT = os.path.join(ROOT, "pyproject.toml")


@pytest.mark.skipif(not os.path.isdir(os.path.join(ROOT, "lucid")) or
                    not os.path.exists(PYPROJECT), reason="needs the source tree")
def test_every_subpackage_is_listed_in_pyproject():
    with open(PYPROJECT, "rb") as f:
        listed = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
    found = set()
    for here, dirs, files in os.walk(os.path.join(ROOT, "lucid")):
        dirs[:] = [d for d in dirs if not d.startswith((".", "__"))]
        if "__init__.py" in files:
            found.add(os.path.relpath(here, ROOT).replace(os.sep, "."))
    assert found - listed == set(), "add these to [tool.setuptools] packages"
