"""Collection for the whole repository (pytest collects ``convcodeworld_gym`` too, for its doctests).

The modules of ``convcodeworld_gym/service`` that build on OpenEnv cannot be imported without the ``openenv`` extra
(``pip install -e '.[openenv]'``), so their doctests are collected only where it is installed (CI runs them in a venv
of their own, see .ci/run); the tests of the server (``tests/service``, mark ``openenv``) skip with that reason.
"""

from __future__ import annotations

import importlib.util

#: The service modules that import OpenEnv (the others import without it and are collected everywhere).
_NEEDS_OPENENV = ("models.py", "environment.py", "app.py", "client.py", "remote.py")

collect_ignore = [] if importlib.util.find_spec("openenv") else [f"convcodeworld_gym/service/{name}" for name in _NEEDS_OPENENV]
