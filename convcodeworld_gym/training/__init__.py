"""Pieces that only the training programs (``training/``) use.

Modules:
    choice      the candidate-choice env: the policy picks one of K candidate programs per turn
    candidates  the K candidates of a turn: synthetic mutations or LLM samples
"""

__all__: list[str] = []
