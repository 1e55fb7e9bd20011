#!/usr/bin/env bash
# Runs the tap suite inside the container's runtime (Debian 13, glibc 2.41, Node 24, uWebSockets.js 20.57):
# builds docker/test.Dockerfile from this checkout (or reuses the image built from the same inputs), then
#   docker run --rm --init --network host -v <repo>/../shared:/shared:ro <image> npm test [ARGS]
# as the non-root user node, with the app at /app (so the tests' ../shared is /shared, as on the host).
# Usage: docker/test-in-image.sh [tap arguments, e.g. test/gateway/tls.test.ts]
# Env:   BASE  the base image (default infergate-base:trixie-node24, made by docker/build-base.sh when
#              missing; with a registry: BASE=node:24-trixie-slim, untried here)
# Exits with npm test's status. The build's output goes to stderr; the suite's to stdout, then a line
# "runtime: Node X, uWS Y" (docker/runtime.mjs). .ci/run calls it
# after the host's own npm test (never both at once: they share the host's ports and CPUs).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
base="${BASE:-infergate-base:trixie-node24}"

# shellcheck source=docker/lib.sh
. "$here/lib.sh"
ensure_base "$base"

# The context: tree/ holds the files git tracks or would track (so no node_modules, dist or .tap), as they
# are in the working tree; build-ca.crt the npm registry's proxy CA when this host has one.
if ! git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "$repo is not a git checkout (git ls-files picks the files to test): clone the repository" >&2
  exit 2
fi
ctx=$(mktemp -d /tmp/infergate-test-ctx.XXXXXX)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/tree"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard | grep -zv '^node_modules$' |
  xargs -0 -r sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
  tar --null -T - -cf - | tar -xf - -C "$ctx/tree")
cp "$here/test.Dockerfile" "$ctx/Dockerfile"
add_build_ca "$ctx"

hash=$(context_hash "$ctx" "$base")
image="infergate-test:$hash"
if docker image inspect "$image" >/dev/null 2>&1; then
  echo "reusing $image (inputs unchanged)" >&2
else
  echo "building $image from $base" >&2
  previous=$(docker image inspect -f '{{.Id}}' infergate-test:latest 2>/dev/null || true)
  start=$SECONDS
  docker build --network host --build-arg "BASE=$base" -t "$image" "$ctx" >&2
  echo "built $image in $((SECONDS - start)) s" >&2
  docker tag "$image" infergate-test:latest
  # the image this one replaces (and its layers), so that repeated runs on vfs do not pile up copies
  if [ -n "$previous" ] && [ "$previous" != "$(docker image inspect -f '{{.Id}}' "$image")" ]; then
    docker image rm -f "$previous" >/dev/null 2>&1 || true
  fi
fi
rm -rf "$ctx"

shared=()
if [ -d "$repo/../shared" ]; then
  shared=(-v "$(cd "$repo/../shared" && pwd -P):/shared:ro")
else
  echo "no $repo/../shared here: the tests that read ../shared (traces, spec) will fail as they do on the host" >&2
fi
name="infergate-test-$$"
# the container goes when this script is stopped (Ctrl-C, a CI timeout), not only when the suite ends
trap 'docker rm -f "$name" >/dev/null 2>&1 || true' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
echo "running npm test in $image (as node, --network host)" >&2
start=$SECONDS
set +e
# after the suite, "runtime: Node X, uWS Y" (docker/runtime.mjs): what it ran on, for .ci/run's summary
docker run --rm --init --name "$name" --network host "${shared[@]}" "$image" \
  sh -c 'npm test -- "$@"; status=$?; node docker/runtime.mjs; exit $status' sh "$@"
status=$?
set -e
echo "the suite ran in the image for $((SECONDS - start)) s" >&2
exit "$status"
