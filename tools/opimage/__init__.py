"""The operator's image from the project's ``Dockerfile``, built by buildah on a Debian base made
with mmdebstrap, cached by content under ``/var/cache/nova-operator/opimage`` (``build.build``)."""

from opimage.build import REPOSITORY, BuildError, OperatorImage, Timings, build

__all__ = ["REPOSITORY", "BuildError", "OperatorImage", "Timings", "build"]
