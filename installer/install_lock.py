"""One install.sh run at a time per data folder: an exclusive flock on the folder itself, held for the whole
install or uninstall (no lock file is left behind; the folder is what the manifest and the journal live in)."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from pathlib import Path


class InstallLock:
    def __init__(self, data: Path, say: Callable[[str], None]) -> None:
        self.data, self.say = data, say
        self.fd: int | None = None
        self.created: list[Path] = []  # folders made to hold the lock (a failed install removes them)

    def acquire(self, create: bool = True) -> bool:
        """Lock the data folder, creating it (0700) when `create`; False when it is absent and not `create`.
        Waits while another run holds it; a folder removed meanwhile (that run rolled back) is made again."""
        while True:
            made = _mkdirs(self.data) if create else []
            try:
                fd = os.open(self.data, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except FileNotFoundError:
                if not create:
                    return False
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self.say(f"another install.sh run is working on {self.data}; waiting for it to finish")
                fcntl.flock(fd, fcntl.LOCK_EX)
            if self._is_current(fd):
                self.fd, self.created = fd, made
                return True
            os.close(fd)  # the folder was removed (and maybe made again) while we waited

    def _is_current(self, fd: int) -> bool:
        try:
            now = os.stat(self.data)
        except FileNotFoundError:
            return False
        held = os.fstat(fd)
        return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)

    def still_held(self) -> bool:
        """Whether the locked folder is still the one at the path (a recovery may have removed it)."""
        return self.fd is not None and self._is_current(self.fd)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the descriptor drops the flock
            self.fd = None


def _mkdirs(path: Path) -> list[Path]:
    """mkdir -p with mode 0700 for every folder made; returns them, outermost first."""
    missing = []
    p = path
    while not os.path.lexists(p):
        missing.append(p)
        p = p.parent
    made = []
    for d in reversed(missing):
        try:
            d.mkdir()
        except FileExistsError:
            continue  # another run made it just now
        d.chmod(0o700)
        made.append(d)
    return made
