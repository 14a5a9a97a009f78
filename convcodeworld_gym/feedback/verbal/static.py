"""What a program imports, which library functions it calls and which exceptions it raises (parsed, never run).

Holds:
    CodeFacts       imports, qualified library calls and raised exception names of one program
    code_facts      source -> CodeFacts
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ...tasks.record import dotted_name, imported_modules, parse_source

__all__ = ["CodeFacts", "code_facts"]


@dataclass(frozen=True)
class CodeFacts:
    """Facts of one program. ``calls`` are dotted names resolved through the imports
    (``pd.read_csv`` -> ``pandas.read_csv``; ``from re import sub`` -> ``re.sub``)."""

    modules: frozenset[str] = frozenset()
    calls: frozenset[str] = frozenset()
    raises: frozenset[str] = frozenset()


def code_facts(source: str) -> CodeFacts:
    """Parse ``source`` and collect its facts; a program that does not parse has none.

    >>> f = code_facts("import pandas as pd\\nfrom re import sub\\ndef g(x):\\n"
    ...                "    if not x: raise ValueError('empty')\\n    return pd.Series(sub('a', '', x)).str.upper()")
    >>> sorted(f.modules), sorted(f.calls), sorted(f.raises)
    (['pandas', 're'], ['pandas.Series', 're.sub'], ['ValueError'])
    """
    tree = parse_source(source)
    if tree is None:
        return CodeFacts()
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    root = alias.name.split(".")[0]
                    aliases[root] = root
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    calls: set[str] = set()
    raises: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = dotted_name(node.func)
            if name is not None:
                root, _, rest = name.partition(".")
                if root in aliases:
                    calls.add(aliases[root] + (f".{rest}" if rest else ""))
        elif isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            name = dotted_name(exc)
            if name is not None and name[:1].isupper() or (name and "." in name):
                raises.add(name.split(".")[-1])  # type: ignore[union-attr]
    return CodeFacts(imported_modules(source), frozenset(calls), frozenset(raises))
