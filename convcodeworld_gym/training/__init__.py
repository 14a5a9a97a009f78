"""What training programs use: the doors of trainers and the pieces of ``training/``'s programs.

Modules:
    tools       TRL's ``environment_factory`` door: one episode per rollout, played through a submit_program tool
    shared      what the doors share in a process: one sandbox executor per runtime, task sets loaded once
    choice      the candidate-choice env: the policy picks one of K candidate programs per turn
    candidates  the K candidates of a turn: synthetic mutations or LLM samples
"""

__all__: list[str] = []
