"""A Docker image for tests and benchmarks, built offline from the host's own Python.

Nothing can be pulled from a registry here, so the image is a tiny root file system
assembled in Python and loaded with ``docker import``: merged-``/usr`` symlinks, an
``/etc/passwd`` with ``nobody``, empty mount points. At run time the host's ``/usr`` (shell,
coreutils, shared libraries) and the host Python's install prefix are bind-mounted
read-only; the container user (nobody) never needs to traverse the host's ``/root``."""

from __future__ import annotations

import io
import os
import sys
import tarfile
from dataclasses import dataclass, field

__all__ = ["HostPythonImage", "build_host_python_image", "DEFAULT_TAG"]

DEFAULT_TAG = "convcodeworld-test-hostpython:1"


@dataclass(frozen=True)
class HostPythonImage:
    """An image plus the read-only mounts and interpreter path to pass to ``DockerExecutor``."""

    tag: str
    python: str
    volumes: dict[str, str] = field(default_factory=dict)


def _rootfs_tar(python_prefix: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:

        def add_dir(name: str, mode: int = 0o755) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)

        def add_file(name: str, text: str) -> None:
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))

        for name in ("usr", "etc", "tmp", "ccw", "proc", "sys", "dev", "root"):
            add_dir(name, 0o1777 if name == "tmp" else 0o755)
        for link, target in (("bin", "usr/bin"), ("lib", "usr/lib"), ("lib64", "usr/lib64"), ("sbin", "usr/sbin")):
            info = tarfile.TarInfo(link)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
        parts = python_prefix.strip("/").split("/")
        for depth in range(1, len(parts) + 1):  # mount point of the Python prefix, traversable
            if parts[:depth] != ["root"]:
                add_dir("/".join(parts[:depth]))
        add_file("etc/passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
        add_file("etc/group", "root:x:0:\nnogroup:x:65534:\n")
    return buffer.getvalue()


def build_host_python_image(client: object, tag: str = DEFAULT_TAG) -> HostPythonImage:
    """Build (once per engine) the test image; ``client`` is a ``docker.DockerClient``."""
    prefix = os.path.realpath(sys.base_prefix)
    python = os.path.join(prefix, "bin", f"python{sys.version_info.major}.{sys.version_info.minor}")
    image = HostPythonImage(tag=tag, python=python, volumes={"/usr": "/usr", prefix: prefix})
    try:
        client.images.get(tag)  # type: ignore[attr-defined]
        return image
    except Exception:  # noqa: BLE001 - not built yet
        pass
    repository, _, version = tag.partition(":")
    client.api.import_image_from_data(_rootfs_tar(prefix), repository=repository, tag=version or "latest")  # type: ignore[attr-defined]
    client.images.get(tag)  # type: ignore[attr-defined]
    return image
