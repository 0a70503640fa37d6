"""The other supported releases' nova images, built while ``make run``'s cluster already runs.

``make run`` builds only the sample release's nova venv and image tree before it starts the cluster
(a cold start stays short). A user who then upgrades the sample Nova, as ``docs/operations.md``
describes, needs the next release's image too: ``ReleaseImages.start(handle, releases)`` builds the
venvs (``tools/catalogs/ensure_venvs.sh``) and image trees (``tools/realnova/images.py``) of
``releases`` in one background process (``nice``: the running Nova keeps the CPU it needs), and
``poll()`` hands the trees to the kubelet stand-in once they exist. Until then a pod of such an image
waits in ``ErrImagePull`` (retried every 2 s), and the operator names that pod and reason in the
step's condition; the pod starts at its next try once the image is served. With warm caches the
process ends within seconds. The process is the handle's: Ctrl-C stops it with the cluster.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from simcluster.platform.controlplane import REPO
from simcluster.platform.launch import SimHandle
from simcluster.platform.process import ManagedProcess
from simcluster.realtier.launch import IMAGE_PYTHON, nova_images

RELEASES = REPO / "tools" / "catalogs" / "releases.txt"
SCRIPT = 'bash tools/catalogs/ensure_venvs.sh "$@" && "$0" tools/realnova/images.py "$@"'


def supported() -> list[str]:
    """Every release ``tools/catalogs/releases.txt`` lists, in its order."""
    lines = (line.split() for line in RELEASES.read_text().splitlines())
    return [words[0] for words in lines if words and not words[0].startswith("#")]


@dataclass
class ReleaseImages:
    handle: SimHandle
    releases: list[str]
    process: ManagedProcess | None = None
    started: float = field(default_factory=time.monotonic)
    done: bool = False

    @classmethod
    def start(cls, handle: SimHandle, releases: Sequence[str]) -> ReleaseImages:
        """Start building ``releases`` (none: nothing is started and ``poll`` says nothing)."""
        built = cls(handle, list(releases))
        if built.releases:
            argv = ["nice", "-n", "10", "bash", "-c", SCRIPT, IMAGE_PYTHON, *built.releases]
            built.process = handle.spawn("release-images", argv, cwd=REPO)
        else:
            built.done = True
        return built

    def poll(self) -> str | None:
        """Once the build has ended: the line to print (the images are served from then on)."""
        if self.done or self.process is None or self.process.alive:
            return None
        self.done = True
        names = ", ".join(self.releases)
        seconds = time.monotonic() - self.started
        if self.process.popen.returncode != 0:
            return (
                f"the nova images of {names} could not be built (exit {self.process.popen.returncode}, "
                f"log: {self.process.log}); pods of those releases stay in ErrImagePull"
            )
        assert self.handle.real is not None
        self.handle.real.kubelet.add_images(nova_images(self.releases))  # current trees: returns at once
        return (
            f"the nova images of {names} are served from now on (built in the background in {seconds:.0f} s)"
        )
