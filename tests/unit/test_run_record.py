"""The run's own record (its campaign, status, results and certification) is read and written
through kchaos/rundir.py only: no other module joins one of those names to a path, opens, globs or
parses it. A message may name the file; an expression may not use it. (What this cannot see is a
path built without the name, as ``path.with_name(...)``: reviewers own that.)"""

from __future__ import annotations

import ast

from kchaos.rundir import RECORD_FILES
from tests.unit.test_layering import ROOT, code_files

#: the constants that spell the record's names (kchaos/rundir.py)
RECORD_NAMES = ("CAMPAIGN_FILE", "STATUS_FILE", "RESULTS_FILE", "CERTIFICATION_FILE")


def _docstrings(tree: ast.AST) -> set[int]:
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))]
    return {id(n.body[0].value) for n in nodes if n.body and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant) and isinstance(n.body[0].value.value, str)}


def offenders(source: str, where: str = "<snippet>") -> list[str]:
    """Each place ``source`` uses a record file's name as a path rather than in a message."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    in_message = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FormattedValue) for n in ast.walk(f.value)
                  if isinstance(f.value, (ast.Name, ast.Attribute))}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if any(node.value == name or node.value.endswith("/" + name) for name in RECORD_FILES):
                found.append(f"{where}:{node.lineno}: {node.value!r}")
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if name in RECORD_NAMES and id(node) not in in_message:
            found.append(f"{where}:{node.lineno}: {name}")
    return found


def test_nothing_but_the_run_directory_record_opens_the_record_files():
    found = [hit for p in code_files() if p != ROOT / "kchaos" / "rundir.py"
             for hit in offenders(p.read_text(), str(p.relative_to(ROOT)))]
    assert found == []


def test_a_path_to_a_record_file_is_caught_and_a_message_naming_one_is_not():
    assert offenders('json.loads((run / "results.json").read_text())')
    assert offenders('runs = root.glob("*/campaign.json")')
    assert offenders("read_json(run / RESULTS_FILE)")
    assert offenders("rundir.write_json(CERTIFICATION_FILE, cert)")
    assert offenders('raise ConfigError(f"{run_dir} holds no verdict ({RESULTS_FILE} missing)")') == []
    assert offenders('help="checker engine (recorded in the run\'s campaign.json)"') == []
    assert offenders('def f():\n    """Reads ``results.json``."""\n') == []
