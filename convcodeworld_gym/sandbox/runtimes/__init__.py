"""Runs in the host, mostly: the interpreters that run the tasks' programs, what is installed in them, and what a task
needs.

Mostly the host's (choosing and installing a runtime, asking it what it lacks); :mod:`.interpreter` runs in every
process, and :mod:`._probe` runs as a script in the runtime's interpreter, where nothing of this project is installed.

Holds:
    interpreter  the paths, ``python`` commands and environment a run's interpreter has
    install      which runtime interpreter runs the programs, and ``convcodeworld runtime install``
    packages     what a runtime holds: installed libraries, their PyPI names, a fingerprint
    needs        what a task needs of a runtime, and the probe that asks it (``RuntimeProbe``)
    _probe       the probe's script, run in the runtime's interpreter
"""

__all__ = ["interpreter", "install", "packages", "needs", "_probe"]
