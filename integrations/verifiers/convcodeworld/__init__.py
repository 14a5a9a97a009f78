"""ConvCodeWorld as a verifiers (v1) environment: ``vf-eval convcodeworld``, ``vf-validate convcodeworld``.

verifiers finds an environment by its taskset id: ``convcodeworld`` imports this module, whose ``__all__`` exports
exactly one ``Taskset`` (:class:`ConvCodeWorldTaskset`), one ``Env`` (:class:`ConvCodeWorldLoop`, which plays the
episodes) and one ``Harness`` (:class:`ChatHarness`, the coder's default). See integrations/verifiers/README.md.
"""

from .env import ConvCodeWorldLoop
from .harness import ChatHarness
from .taskset import ConvCodeWorldTaskset

__all__ = ["ConvCodeWorldTaskset", "ConvCodeWorldLoop", "ChatHarness"]
