"""Runs as a script in a runtime's interpreter: which of the modules and NLTK data it is asked about it lacks.

Run as a script (``python -s _probe.py``) with ``{"modules": [...], "nltk": {name: path}}`` as JSON
on stdin; writes ``{"modules": [lacking], "nltk": [lacking], "identity": [...], "paths": [...],
"prefix": ...}`` to stdout. The
NLTK data is looked for as a run looks for it: ``nltk.data.find`` with a run's environment (the
caller sets it). ``identity`` is the interpreter's version and every installed distribution with
its version (what the result cache's key must change with); ``paths`` the directories on its ``sys.path`` (but this script's own) and
``prefix`` its ``sys.prefix`` (where an install lands: the caller watches them to know when to ask again).

This file imports nothing from the package and only the standard library (besides ``nltk`` when
asked about its data): the runtime interpreter may have nothing of this project installed.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import sys

__all__ = ["main"]


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


#: Resources that newer NLTK releases replaced: (the new resource's path, the first release that loads it instead).
_NEWER = {"punkt": ("tokenizers/punkt_tab", (3, 8, 2)),
          "averaged_perceptron_tagger": ("taggers/averaged_perceptron_tagger_eng", (3, 9))}


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for part in text.split("."):
        digits = "".join(c for c in part if c.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def _lacking_nltk_data(wanted: dict[str, str]) -> list[str]:
    if not wanted:
        return []
    try:
        import nltk
    except Exception:  # noqa: BLE001 - without nltk every resource is lacking (and nltk itself, as a module)
        return sorted(wanted)
    version = _version(getattr(nltk, "__version__", "0"))
    lacking = []
    for name, path in sorted(wanted.items()):
        newer = _NEWER.get(name)
        if newer is not None and version >= newer[1]:
            path = newer[0]
        try:
            nltk.data.find(path)
        except LookupError:
            lacking.append(name)
    return lacking


def main() -> None:
    ask = json.load(sys.stdin)
    identity = [sys.version, sys.platform] + sorted(
        f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions() if d.metadata["Name"])
    answer = {"modules": [m for m in ask.get("modules", []) if not _importable(m)],
              "nltk": _lacking_nltk_data(ask.get("nltk", {})), "identity": identity,
              "paths": [p for p in sys.path[1:] if p and os.path.isdir(p)], "prefix": sys.prefix}
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()
