"""What a stopped local cluster leaves of its work directory: the logs, nothing else.

A stopped cluster cannot start again from its directory, yet the directory holds gigabytes: etcd's
data, every real node's containerd root and image store, the backing servers' data. Its logs are
what a user reads after Ctrl-C (the operator's, the control plane's, each node's kubelet and
containerd, every container's). ``keep_logs_only`` removes everything but regular ``*.log`` files
and the directories that hold them. It removes nothing while something is mounted below the
directory, and never crosses into another file system: a bind mount's source is not the run's.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
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


def keep_logs_only(root: Path, say: Callable[[str], None] = lambda line: None) -> Kept:
    """Remove everything below ``root`` but regular ``*.log`` files (see the module's text); ``say``
    gets one line before the removal starts (a real node's image store is some 100,000 files: on a
    busy machine its removal takes a while).

    A walk that reads directories only (no file's metadata) finds the subtrees that hold no log;
    each goes whole, by ``rm`` (a third of the CPU of removing file by file from Python, which made
    a Ctrl-C of ``make run`` beside two busy processes take minutes), after ``find`` has summed the
    files it frees. The files beside logs go one by one."""
    root = root.resolve()
    try:
        device = root.lstat().st_dev
    except FileNotFoundError:
        return Kept(root, refused="it does not exist")
    busy = mounts_below(root)
    if busy:
        return Kept(root, refused=f"{len(busy)} mounts are still below it, e.g. {busy[0]}")
    say(f"removing the run's data from {root}, keeping its logs ...")
    plan = _plan(root, device)
    removed = _freed(plan.trees)
    failed = [*plan.failed, *_remove_trees(plan.trees)]
    for path in plan.loose:
        try:
            info = path.lstat()
            path.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            failed.append(f"{path} ({exc.strerror})")
            continue
        if stat.S_ISREG(info.st_mode) and info.st_nlink == 1:  # its last link: freed
            removed += info.st_size
    return Kept(root, plan.files, plan.size, removed, failed=tuple(failed))


@dataclass
class _Plan:
    """What a removal does: ``trees``, the directories that hold no log (each goes whole),
    ``loose``, the other files beside logs; ``files`` and ``size``, the logs kept."""

    trees: list[Path] = field(default_factory=list)
    loose: list[Path] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    files: int = 0
    size: int = 0


def _plan(root: Path, device: int) -> _Plan:
    """Walk ``root`` (depth first, without recursion: an image layer can nest deep); a directory
    holds a log when one is in it or in a directory below it, or when something below it stays
    (another file system's directory, never entered)."""
    plan = _Plan()
    keeps: dict[str, bool] = {}  # directory -> something below it stays
    children: dict[str, list[str]] = {}
    loose: dict[str, list[str]] = {}
    stack = [str(root)]
    order: list[str] = []
    while stack:
        here = stack.pop()
        order.append(here)
        keeps[here], children[here], loose[here] = False, [], []
        try:
            entries = list(os.scandir(here))
        except FileNotFoundError:
            continue
        except OSError as exc:
            plan.failed.append(f"{here} ({exc.strerror})")
            keeps[here] = True
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):  # a link to a directory is a file here
                    if entry.stat(follow_symlinks=False).st_dev != device:
                        plan.failed.append(f"{entry.path} (another file system)")
                        keeps[here] = True
                        continue
                    children[here].append(entry.path)
                    stack.append(entry.path)
                elif entry.name.endswith(LOG_SUFFIX) and entry.is_file(follow_symlinks=False):
                    plan.files += 1
                    plan.size += entry.stat(follow_symlinks=False).st_size
                    keeps[here] = True
                else:
                    loose[here].append(entry.path)
            except FileNotFoundError:
                continue
    for here in reversed(order):  # every directory after those below it
        keeps[here] = keeps[here] or any(keeps[c] for c in children[here])
    keeps[str(root)] = True  # the root stays, if need be empty
    for here in order:
        if not keeps[here]:
            continue  # its parent removes it whole
        plan.trees.extend(Path(c) for c in children[here] if not keeps[c])
        plan.loose.extend(Path(f) for f in loose[here])
    return plan


def _batches(paths: list[Path], size: int = 500) -> list[list[str]]:
    return [[str(p) for p in paths[i : i + size]] for i in range(0, len(paths), size)]


def _freed(trees: list[Path]) -> int:
    """The bytes removing ``trees`` frees: each regular file's size, if it is its last link."""
    total = 0
    for batch in _batches(trees):
        out = subprocess.run(
            ["find", *batch, "-xdev", "-type", "f", "-links", "1", "-printf", "%s\\n"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        total += sum(int(n) for n in out.split())
    return total


def _remove_trees(trees: list[Path]) -> list[str]:
    """Remove ``trees`` whole (links are removed, never followed; no other file system is
    entered); what could not be removed, as ``rm`` says it."""
    failed: list[str] = []
    for batch in _batches(trees):
        done = subprocess.run(
            ["rm", "-rf", "--one-file-system", "--", *batch], capture_output=True, text=True, check=False
        )
        failed.extend(line.removeprefix("rm: ") for line in done.stderr.splitlines() if line.strip())
    return failed
