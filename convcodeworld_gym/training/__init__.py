"""What training programs use: the doors of trainers and the pieces of ``training/``'s programs.

Modules:
    tools       TRL's ``environment_factory`` door: one episode per rollout, played through a submit_program tool
    grpo        TRL's ``rollout_func`` door: a batch of multi-turn episodes in the paper's chat format
    trl_config  the flags both TRL programs take and the GRPOConfig made from them
    shared      what the doors share in a process: one sandbox executor per runtime, task sets loaded once
    choice      the candidate-choice env: the policy picks one of K candidate programs per turn
    candidates  the K candidates of a turn: synthetic mutations or LLM samples
    smoke       the TRL programs' smoke runs: scripted players beside the tiny random model, for a learning signal
"""

__all__: list[str] = []
