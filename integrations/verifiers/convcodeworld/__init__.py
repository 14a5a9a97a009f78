"""ConvCodeWorld as a verifiers environment, through either of verifiers' APIs.

* verifiers 0.4 (v1 API): ``vf-eval convcodeworld``, ``vf-validate convcodeworld``. verifiers finds the environment by
  its taskset id: this module's ``__all__`` exports exactly one ``Taskset`` (:class:`ConvCodeWorldTaskset`), one
  ``Env`` (:class:`ConvCodeWorldLoop`, which plays the episodes) and one ``Harness`` (:class:`ChatHarness`, the
  coder's default). ``load_environment(**kwargs)`` returns the same ``vf.Env`` (:mod:`.loading`).
* verifiers <= 0.3 (classic API, ``verifiers.legacy`` in 0.3): ``vf-eval convcodeworld -a '{...}'`` and
  ``vf.load_environment("convcodeworld", **kwargs)`` call ``load_environment(**kwargs)``, which returns a classic
  ``vf.MultiTurnEnv`` (:mod:`.classic`).

Both take the same keyword arguments (``feedback``, ``dataset``, ``limit``, ``tools``, ...). See
integrations/verifiers/README.md.
"""

from importlib.util import find_spec

from .loading import DatasetUnavailable

#: Whether the installed verifiers has the classic API (verifiers <= 0.3) rather than the v1 API of 0.4.
CLASSIC_API = find_spec("verifiers.legacy") is not None or find_spec("verifiers.v1") is None

if CLASSIC_API:
    from .classic import ConvCodeWorldClassicEnv, load_environment

    __all__ = ["load_environment", "ConvCodeWorldClassicEnv", "DatasetUnavailable"]
else:
    from .env import ConvCodeWorldLoop
    from .harness import ChatHarness
    from .loading import load_environment
    from .taskset import ConvCodeWorldTaskset

    __all__ = ["ConvCodeWorldTaskset", "ConvCodeWorldLoop", "ChatHarness", "load_environment", "DatasetUnavailable"]
