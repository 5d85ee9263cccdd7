"""mosaic.workerkit.deferred: a module imported at its first use, not when a library imports it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


@pytest.fixture
def package(tmp_path):
    """A package ``costly`` (with a submodule ``costly.new``) that logs each import of its modules to a file."""
    log = tmp_path / "imported.log"
    root = tmp_path / "costly"
    root.mkdir()
    (root / "__init__.py").write_text(f"open({str(log)!r}, 'a').write('costly\\n')\nVERSION = 3\n")
    (root / "new.py").write_text(f"open({str(log)!r}, 'a').write('costly.new\\n')\ndef init_run(name):\n"
                                 "    return 'run ' + name\n")
    (tmp_path / "library.py").write_text("from costly import new as costly\nimport costly as whole\n\n"
                                         "def start(name):\n    return costly.init_run(name)\n")
    return tmp_path, log


def run(folder, body: str) -> str:
    code = "import sys; sys.path.insert(0, {!r})\nfrom mosaic.workerkit.deferred import defer, is_deferred\n{}"
    proc = subprocess.run([sys.executable, "-c", code.format(str(folder), textwrap.dedent(body))],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_a_deferred_module_is_not_imported_by_the_librarys_import(package):
    folder, log = package
    out = run(folder, """
        assert defer("costly", "costly.new") == ["costly", "costly.new"]
        import library
        print(is_deferred("costly"), is_deferred("costly.new"))
    """)
    assert out.split() == ["True", "True"]
    assert not log.exists(), "importing the library imported the deferred module"


def test_the_first_use_imports_the_real_module_once_and_forwards_to_it(package):
    folder, log = package
    out = run(folder, """
        defer("costly", "costly.new")
        import library
        print(library.start("a"), library.start("b"), library.whole.VERSION)
        import costly.new
        print(is_deferred("costly.new"), costly.new.init_run("c"), type(sys.modules["costly"]).__name__)
    """)
    assert out.split("\n")[:2] == ["run a run b 3", "False run c module"]
    assert log.read_text().split() == ["costly", "costly.new"]  # each real module imported once


def test_a_module_already_imported_is_left_as_it_is(package):
    folder, log = package
    out = run(folder, """
        import costly
        print(defer("costly", "costly.new"), is_deferred("costly"), is_deferred("costly.new"))
    """)
    assert out.split() == ["['costly.new']", "False", "True"]
