# okapikv server image (docs/deploy.md, "6. Images, compose and Kubernetes").
#   docker build -t okapikv:latest .                       # or podman build
#   docker build --build-arg BASE_IMAGE=my-python:3.11 .  # any Debian-like image with Python >= 3.11
# One `okapi server` per container, configured by its environment (OKAPI_CONFIG, OKAPI_DC,
# OKAPI_PARTITION, OKAPI_DATA_DIR); `okapi health` is its health check.
ARG BASE_IMAGE=python:3.11-slim-bookworm

FROM ${BASE_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
# The package and its dependencies as wheels: the runtime stage installs them without a compiler
# or network access, and without the build's files.
RUN python -m pip wheel --no-cache-dir --wheel-dir /wheels .

FROM ${BASE_IMAGE}
COPY --from=build /wheels /wheels
# The versions are pinned by the wheels the build stage made (no index is consulted).
# hadolint ignore=DL3013
RUN python -m pip install --no-cache-dir --no-index --find-links /wheels okapikv \
    && rm -rf /wheels \
    && groupadd --system --gid 10001 okapi \
    && useradd --system --no-log-init --uid 10001 --gid okapi --home-dir /var/lib/okapi --shell /usr/sbin/nologin okapi \
    && install -d -o okapi -g okapi -m 700 /var/lib/okapi \
    && install -d -m 755 /etc/okapi
ENV OKAPI_CONFIG=/etc/okapi/cluster.toml \
    OKAPI_DATA_DIR=/var/lib/okapi \
    OKAPI_LOG_FORMAT=json \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
USER 10001:10001
WORKDIR /var/lib/okapi
VOLUME ["/var/lib/okapi"]
# gRPC (clients and peers), the native port, RESP (Redis protocol), Prometheus metrics
EXPOSE 7100 7101 6379 9100
# SIGTERM: health turns NOT_SERVING, peer links close, in-flight calls finish, exit 0.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 CMD ["okapi", "health"]
CMD ["okapi", "server"]
