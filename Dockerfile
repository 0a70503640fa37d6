# The operator's image: the package and its runtime dependencies in a virtualenv, run as a
# non-root user from a read-only root filesystem (the Deployment sets readOnlyRootFilesystem).
# tests/integration/test_image.py replays the build stages' COPY and RUN lines (tools/image/install.sh)
# into a fresh prefix; `make docker-build` builds it with a container engine, and tools/opimage builds
# it with buildah on a Debian base (BASE) for the real nodes of tests/realnode.
#
# Layers, so that a change of the operator's code rebuilds only the last one: the dependencies are
# installed from pyproject.toml alone (the "deps" stage), the package's code is byte-compiled in a
# stage of its own and copied last. BASE is any image with python3 (3.11 or later) and its venv module.
ARG BASE=python:3.11-slim

FROM ${BASE} AS deps
COPY tools/image/install.sh /install.sh
COPY pyproject.toml README.md /src/
RUN sh /install.sh deps /opt/nova-operator /src

FROM deps AS code
COPY nova_operator /src/nova_operator
RUN sh /install.sh code /opt/nova-operator /src /code

FROM ${BASE}
ENV PATH=/opt/nova-operator/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# 65532: the conventional "nonroot" user; no home directory, no shell needed.
USER 65532:65532
ENTRYPOINT ["nova-operator"]
COPY --from=deps /opt/nova-operator /opt/nova-operator
COPY --from=code /code/ /
