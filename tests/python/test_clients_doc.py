"""docs/clients.md quotes the client recipes of the scenarios (tests/integration/
check_client_*.py, functions recipe_*): each quoted block is the function's code as the
test runs it, and every recipe is quoted. A block is marked by a line
`<!-- recipe: <path from the top> <name> -->` right before its ```python fence (a function
with its decorators, or an assignment such as a feature schema)."""
import ast
import glob
import os
import re
import unittest

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DOC = os.path.join(TOP, "docs", "clients.md")
MARK = re.compile(r"<!-- recipe: (\S+) (\w+) -->\n```python\n(.*?)\n```", re.S)


def definitions(path):
    """{name: code} of the module's top-level functions (with their decorators) and
    single-name assignments."""
    src = open(os.path.join(TOP, path)).read()
    lines = src.splitlines()
    out = {}
    for n in ast.parse(src).body:
        if isinstance(n, ast.FunctionDef):
            first = min([d.lineno for d in n.decorator_list] + [n.lineno])
            out[n.name] = "\n".join(lines[first - 1:n.end_lineno])
        elif isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            out[n.targets[0].id] = "\n".join(lines[n.lineno - 1:n.end_lineno])
    return out


def recipes(path):
    return {name for name in definitions(path) if name.startswith("recipe_")}


class ClientsDocTest(unittest.TestCase):
    def test_every_quoted_recipe_is_the_tests_code(self):
        quoted = MARK.findall(open(DOC).read())
        self.assertGreater(len(quoted), 0, "no recipe blocks in docs/clients.md")
        for path, name, block in quoted:
            code = definitions(path).get(name)
            self.assertIsNotNone(code, f"docs/clients.md quotes {path} {name}, which does not exist")
            self.assertEqual(block, code, f"docs/clients.md's {name} differs from {path}'s")

    def test_every_recipe_is_quoted(self):
        quoted = {(p, n) for p, n, _ in MARK.findall(open(DOC).read())}
        for path in sorted(glob.glob(os.path.join(TOP, "tests", "integration", "check_client_*.py"))):
            rel = os.path.relpath(path, TOP)
            for name in recipes(rel):
                self.assertIn((rel, name), quoted, f"{rel} {name} is not in docs/clients.md")


if __name__ == "__main__":
    unittest.main()
