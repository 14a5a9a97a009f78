"""The sandbox's tests, in rooms that mirror the package's (``host/``, ``worker/``, ``run/``, ``confinement/``,
``runtimes/``, ``backends/``); what attacks the sandbox as a whole stays here.

``hostile_programs`` (the attacks the rooms share) lies beside this file: pytest puts the dir of a ``conftest.py``
on ``sys.path`` (its default ``prepend`` import mode, for test dirs without ``__init__.py``), so every room imports it.
"""
