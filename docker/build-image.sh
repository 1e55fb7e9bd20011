#!/usr/bin/env bash
# Builds the infergate image from this checkout, or reuses one built from the same inputs.
# Usage: docker/build-image.sh [TAG]          (default infergate:latest; prints the tag on its last line)
# Env:   BASE  the base image (default infergate-base:trixie-node24, made by docker/build-base.sh when
#              missing; with a registry: BASE=node:24-trixie-slim)
# The build context is staged in a temporary folder with only the inputs (package files, tsconfig, src/,
# the docker/ files the Dockerfile copies), and their sha256 together with the base image's id name the
# result (infergate-build:<hash>): an unchanged checkout builds nothing. When this host reaches the npm
# registry through a TLS proxy (NODE_EXTRA_CA_CERTS), that CA file goes into the build stage only.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
tag="${1:-infergate:latest}"
base="${BASE:-infergate-base:trixie-node24}"

# shellcheck source=docker/lib.sh
. "$here/lib.sh"
ensure_base "$base"

ctx=$(mktemp -d /tmp/infergate-ctx.XXXXXX)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/docker"
cp -r "$repo/package.json" "$repo/package-lock.json" "$repo/tsconfig.json" "$repo/LICENSE" "$repo/src" "$ctx/"
cp "$here/Dockerfile" "$here/prune-uws.mjs" "$here/healthcheck.mjs" "$here/gateway.yaml" "$ctx/docker/"
add_build_ca "$ctx"

hash=$(context_hash "$ctx" "$base")
key="infergate-build:$hash"
if docker image inspect "$key" >/dev/null 2>&1; then
  echo "reusing $key (inputs unchanged)" >&2
else
  echo "building $key from $base" >&2
  docker build --network host --build-arg "BASE=$base" -f "$ctx/docker/Dockerfile" -t "$key" "$ctx" >&2
fi
docker tag "$key" "$tag"
echo "$tag"
