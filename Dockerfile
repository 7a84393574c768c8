# toolproxy in a container: `podman build -t toolproxy .` (or `docker build`); deploy/compose.yaml runs it in
# front of vLLM or Ollama. `make test-container` builds it from a Debian base made with debootstrap (BASE) and
# wheels downloaded beforehand (PIP_NO_INDEX, PIP_FIND_LINKS), then sends the demo's call through it.
#
# The build context includes .git: the version (`toolproxy --version`, /health) names the commit it was built from.
ARG BASE=docker.io/library/debian:bookworm-slim

FROM ${BASE} AS build
# A base that has them already (debootstrap --include) needs no package index.
RUN dpkg -s python3 python3-venv git ca-certificates >/dev/null 2>&1 \
    || { apt-get update && apt-get install -y --no-install-recommends python3 python3-venv git ca-certificates \
         && rm -rf /var/lib/apt/lists/*; }
# Set for a build without PyPI (make test-container): pip then reads wheels from a directory mounted at build time.
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
COPY . /src
RUN python3 -m venv /opt/toolproxy \
    && /opt/toolproxy/bin/pip install --no-cache-dir --disable-pip-version-check /src \
    && /opt/toolproxy/bin/toolproxy --version

FROM ${BASE}
RUN dpkg -s python3 ca-certificates >/dev/null 2>&1 \
    || { apt-get update && apt-get install -y --no-install-recommends python3 ca-certificates \
         && rm -rf /var/lib/apt/lists/*; }
COPY --from=build /opt/toolproxy /opt/toolproxy
# Its own user, as under systemd (deploy/toolproxy.service); the transform log and metrics go to the volume.
RUN useradd --system --home-dir /var/lib/toolproxy --shell /usr/sbin/nologin toolproxy \
    && install -d -o toolproxy -g toolproxy -m 0750 /var/lib/toolproxy
USER toolproxy
WORKDIR /var/lib/toolproxy
# 0.0.0.0, so a published port reaches it: toolproxy refuses that without TOOLPROXY_API_KEYS (or
# TOOLPROXY_ALLOW_OPEN=1), so `podman run -e TOOLPROXY_API_KEYS=...` is part of running it.
ENV PATH=/opt/toolproxy/bin:$PATH \
    TOOLPROXY_DATA_DIR=/var/lib/toolproxy \
    TOOLPROXY_BIND=0.0.0.0:8003
VOLUME /var/lib/toolproxy
EXPOSE 8003
# Liveness only (/health never asks the upstream). Kept in the image in Docker's format; compose.yaml repeats it.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8003/health', timeout=4)"]
# gunicorn stops gracefully on TERM, letting running generations finish for up to 120 s: give it 125
# (`podman stop -t 125`, compose's stop_grace_period).
STOPSIGNAL SIGTERM
ENTRYPOINT ["toolproxy", "serve"]
