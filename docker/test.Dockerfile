# The test image: the whole tap suite (`npm test`) on the container's runtime, Debian 13 (glibc 2.41) with
# Node 24 and uWebSockets.js 20.57, next to the host's run. Built and run by docker/test-in-image.sh from a
# context holding this checkout's files (what git tracks or would track); never shipped.
#
# Why a file of its own and not a stage of docker/Dockerfile: the legacy builder (no BuildKit, as here)
# builds every stage up to the target, so a test stage there would install the dev dependencies and the
# test tools on every production build. docker/Dockerfile is untouched by this file.
#
# Same BASE as the production image: the local infergate-base:trixie-node24 (docker/build-base.sh) by
# default; with a registry, --build-arg BASE=node:24-trixie-slim (not tried here: no registry reachable).
# apt-get and npm ci need the network (docker/test-in-image.sh builds with --network host).
ARG BASE=infergate-base:trixie-node24
FROM ${BASE} AS test
# Settings first: with the legacy builder each instruction commits a layer through a container, which on a
# vfs storage driver copies the whole file system, so the cheap ones go where it is smallest (and cached).
# INFERGATE_TEST_WITHOUT: the tools this image leaves out on purpose (test/helpers/tools.ts).
ENV CI=true INFERGATE_TEST_WITHOUT=chromium
CMD ["npm", "test"]
# What the tests drive besides Node: curl (the demo test), openssl (TLS certificates), redis-server (the
# shared quota), nginx (the streams bench compares against it), prlimit (util-linux, in the base).
# Not installed: chromium (about 800 MB; its two tests skip here, INFERGATE_TEST_WITHOUT above) and
# docker (no engine inside: the image, compose and k8s tests skip or check files only).
RUN set -e; apt-get update -qq; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      ca-certificates curl openssl redis-server nginx >/dev/null; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin; \
    mkdir -p /app; chown node:node /app
WORKDIR /app
USER node
# Dependencies first (dev ones included), so that a change of sources alone reuses this layer. Both uWS
# packages stay (the loader passes over 20.30 here, as on any Node 24 host), with only this platform's
# binaries: the others are about 200 MB that every later layer and container would copy.
# The context: tree/ (the checkout's files) and, when the host reaches the npm registry through a TLS
# proxy with its own CA, build-ca.crt (as in docker/Dockerfile), used by npm ci only.
COPY --chown=node:node tree/package.json tree/package-lock.json build-ca.cr[t] /app/
RUN set -e; if [ -f build-ca.crt ]; then export NODE_EXTRA_CA_CERTS=/app/build-ca.crt; fi; \
    npm ci --no-audit --no-fund --loglevel=error; rm -f build-ca.crt; \
    find node_modules/uWebSockets.js node_modules/@btc-vision/uwebsockets.js -name 'uws_*.node' \
      ! -name "uws_linux_$(node -p process.arch)_*" -delete
COPY --chown=node:node tree/ /app/
