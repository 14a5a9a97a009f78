"""pytest (doctests of this package): collect the modules of the door the installed verifiers has. The v1 door's
modules import verifiers 0.4's v1 API at import, the classic door's verifiers <= 0.3's classic API; the shared ones
(loading, toolcalls) import neither."""

from __future__ import annotations

from importlib.util import find_spec

_CLASSIC = find_spec("verifiers") is not None and (
    find_spec("verifiers.legacy") is not None or find_spec("verifiers.v1") is None)
_V1_ONLY = ("env.py", "episode.py", "harness.py", "taskset.py")

collect_ignore = [f"convcodeworld/{name}" for name in _V1_ONLY] if _CLASSIC else ["convcodeworld/classic.py"]
