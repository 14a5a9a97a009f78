"""Runs in a warm sandbox worker, a process the host starts on the runtime's interpreter (standard library only).

The worker confines itself once, imports the task set's libraries once, and for each job forks a spare from its
zygote: a ready child that confines itself further and runs one program.

Holds:
    main    the worker's entry point and job loop: a job in, the run's events and verdict facts out
    zygote  the warm process spares are forked from, and the worker's handle on it
    spare   one run's child: its last confinement, then the program and its judge
    warm    what a worker imports and rehearses before its first job (prefault, warm-up)
"""

__all__ = ["main", "zygote", "spare", "warm"]
