"""Runs in the host: what the execution runtime holds, installed libraries, their PyPI names, and a fingerprint.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import platform
import sys
from collections.abc import Iterable

from ...tasks import Task

__all__ = ["IMPORT_TO_PYPI", "pypi_name", "installed_preload", "runtime_fingerprint", "HEAVY_MODULES"]

#: Import names whose PyPI distribution is named differently (the BigCodeBench libraries).
IMPORT_TO_PYPI: dict[str, str] = {
    "Crypto": "pycryptodome",
    "Levenshtein": "python-Levenshtein",
    "PIL": "pillow",
    "bs4": "beautifulsoup4",
    "cv2": "opencv-python-headless",
    "dateutil": "python-dateutil",
    "docx": "python-docx",
    "faker": "Faker",
    "flask_login": "Flask-Login",
    "flask_mail": "Flask-Mail",
    "flask_restful": "Flask-RESTful",
    "flask_wtf": "Flask-WTF",
    "mpl_toolkits": "matplotlib",
    "python_http_client": "python-http-client",
    "skimage": "scikit-image",
    "sklearn": "scikit-learn",
    "yaml": "PyYAML",
    "wtforms": "WTForms",
    "requests_mock": "requests-mock",
}

#: Heavy libraries a warm worker imports before it forks, when installed (the import is paid once per worker).
HEAVY_MODULES = ("numpy", "pandas", "matplotlib", "matplotlib.pyplot")


def pypi_name(module: str) -> str:
    """The PyPI distribution that provides ``module``.

    >>> pypi_name("sklearn"), pypi_name("numpy")
    ('scikit-learn', 'numpy')
    """
    return IMPORT_TO_PYPI.get(module, module)


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


#: Modules that open sockets. A task whose solution or tests import one keeps IP sockets (its tests may
#: serve on the run's loopback); the run's network namespace still has nothing but that loopback.
NETWORK_MODULES = frozenset({
    "socket", "socketserver", "http", "urllib", "urllib3", "ssl", "asyncio", "smtplib", "ftplib", "poplib", "imaplib",
    "telnetlib", "xmlrpc", "requests", "aiohttp", "httpx", "flask", "django", "mechanize", "selenium", "wsgiref",
})


def network_policy(task: Task) -> str:
    """``"loopback"`` when the task's own solution or tests import a module of :data:`NETWORK_MODULES`, else ``"none"``.

    With ``"none"`` a run may open only ``AF_UNIX`` sockets (seccomp) and no TCP (Landlock). What a
    *program* imports never widens its own run: only the task's public text decides.
    """
    return "loopback" if task.modules & NETWORK_MODULES else "none"


def installed_preload(modules: Iterable[str] = HEAVY_MODULES) -> tuple[str, ...]:
    """The modules of ``modules`` that are installed (their top-level package can be found)."""
    return tuple(m for m in modules if _importable(m.split(".")[0]))


def runtime_fingerprint(extra: str = "") -> str:
    """A short digest of the interpreter, the platform, installed library versions and ``extra``.

    Two runtimes with the same fingerprint give the same verdicts; it contains no secrets.
    """
    versions = sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions() if d.metadata["Name"])
    text = "\n".join([sys.version, platform.machine(), platform.system(), extra, *versions])
    return hashlib.sha256(text.encode()).hexdigest()[:16]
