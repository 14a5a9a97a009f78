"""Runs in the host (the env's process): the executor that owns the workers, and the policy it applies.

The host never runs a program. It decides which worker and judge a run gets, starts and replaces workers, keeps
their clocks honest and their results cached, and turns a worker's reply into an :class:`~..result.ExecutionResult`.

Holds:
    executor      the ``Executor`` interface every backend implements (``run``, ``arun``, ``run_many``)
    pool          ``SandboxExecutor``: the confined, pooled default backend, its worker slots and their groups
    lending       a slot's run tokens, lent by runs that sleep or wait
    launch        where a worker lives and how it is started (``LocalLauncher``; Docker's is in ``backends``)
    spawner       the one long-lived thread every worker is started from
    cache         the result cache (by task, program and runtime)
    profile       what calibration learned of a task (its time, its judge, what it imports)
    shipped       those profiles shipped with the package (``profiles/*.json``)
    judge_policy  which judge a run gets, and what an in-process judged program may not use
    forgeable     the tasks whose verdict no judge here can keep from the program
"""

__all__ = ["executor", "pool", "lending", "launch", "spawner", "cache", "profile", "shipped", "judge_policy",
           "forgeable"]
