# The operator's image: the package and its runtime dependencies in a virtualenv, run as a
# non-root user from a read-only root filesystem (the Deployment sets readOnlyRootFilesystem).
# tests/integration/test_image.py runs the same install (tools/image/install.sh) into a fresh
# prefix, since no container engine runs in CI; `make docker-build` builds it where one does.
FROM python:3.11-slim AS build
WORKDIR /src
COPY tools/image/install.sh /install.sh
COPY pyproject.toml README.md /src/
COPY nova_operator /src/nova_operator
RUN sh /install.sh /opt/nova-operator /src

FROM python:3.11-slim
COPY --from=build /opt/nova-operator /opt/nova-operator
ENV PATH=/opt/nova-operator/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# 65532: the conventional "nonroot" user; no home directory, no shell needed.
USER 65532:65532
ENTRYPOINT ["nova-operator"]
