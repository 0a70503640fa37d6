"""What a stopped local cluster leaves of its work directory: the logs, nothing else.

A stopped cluster cannot start again from its directory, yet the directory holds gigabytes: etcd's
data, every real node's containerd root and image store, the backing servers' data. Its logs are
what a user reads after Ctrl-C (the operator's, the control plane's, each node's kubelet and
containerd, every container's). ``keep_logs_only`` removes everything but regular ``*.log`` files
and the directories that hold them. It removes nothing while something is mounted below the
directory, and never crosses into another file system: a bind mount's source is not the run's.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

LOG_SUFFIX = ".log"


@dataclass(frozen=True)
class Kept:
    """The outcome: the logs kept (``files``, ``size`` in bytes), the bytes the removal freed
    (``removed``: a file hard-linked from outside frees nothing), or why nothing was removed
    (``refused``); ``failed``: paths that could not be removed."""

    root: Path
    files: int = 0
    size: int = 0
    removed: int = 0
    refused: str = ""
    failed: tuple[str, ...] = ()

    def summary(self) -> str:
        """One line for the user."""
        if self.refused:
            return f"left {self.root} as it is: {self.refused}"
        line = (
            f"the run's logs are kept in {self.root} ({self.files} files, {_mib(self.size)}); "
            f"the rest of its data is removed ({_mib(self.removed)} freed)"
        )
        if self.failed:
            line += f"; {len(self.failed)} paths could not be removed, e.g. {self.failed[0]}"
        return line


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def mounts_below(root: Path) -> list[str]:
    """The mount points at or below ``root`` in this process's mount namespace."""
    found = []
    prefix = str(root).rstrip("/") + "/"
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        # the kernel escapes space, tab, newline and backslash in octal
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[1])
        if point == str(root) or point.startswith(prefix):
            found.append(point)
    return found


def keep_logs_only(root: Path) -> Kept:
    """Remove everything below ``root`` but regular ``*.log`` files (see the module's text)."""
    root = root.resolve()
    try:
        device = root.lstat().st_dev
    except FileNotFoundError:
        return Kept(root, refused="it does not exist")
    busy = mounts_below(root)
    if busy:
        return Kept(root, refused=f"{len(busy)} mounts are still below it, e.g. {busy[0]}")
    files = size = removed = 0
    failed: list[str] = []
    dirs: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        descend = []
        for name in dirnames:
            path = here / name
            try:
                info = path.lstat()
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(info.st_mode):
                filenames.append(name)  # a link to a directory: the link goes, not what it names
            elif info.st_dev != device:
                failed.append(f"{path} (another file system)")
            else:
                descend.append(name)
        dirnames[:] = descend
        dirs.extend(here / name for name in descend)
        for name in filenames:
            path = here / name
            try:
                info = path.lstat()
                if stat.S_ISREG(info.st_mode) and name.endswith(LOG_SUFFIX):
                    files += 1
                    size += info.st_size
                    continue
                path.unlink()
                if stat.S_ISREG(info.st_mode) and info.st_nlink == 1:  # its last link: freed
                    removed += info.st_size
            except FileNotFoundError:
                continue
            except OSError as exc:
                failed.append(f"{path} ({exc.strerror})")
    for path in reversed(dirs):  # the deepest first
        with contextlib.suppress(OSError):  # it holds logs (or what could not be removed)
            path.rmdir()
    return Kept(root, files, size, removed, failed=tuple(failed))
