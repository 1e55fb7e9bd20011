# Shared by docker/build-image.sh and docker/test-in-image.sh (sourced, not run).

# ensure_base IMAGE: makes the base image when it is missing (ours with build-base.sh, others pulled).
ensure_base() {
  local base=$1
  docker image inspect "$base" >/dev/null 2>&1 && return 0
  if [ "$base" = infergate-base:trixie-node24 ]; then
    "$(dirname "${BASH_SOURCE[0]}")/build-base.sh" "$base" >&2
  else
    docker pull "$base" >&2
  fi
}

# add_build_ca CTX: when this host reaches the npm registry through a TLS proxy (NODE_EXTRA_CA_CERTS), that
# CA file goes into the context as build-ca.crt (the Dockerfiles use it in the build stage only).
add_build_ca() {
  if [ -n "${NODE_EXTRA_CA_CERTS:-}" ] && [ -f "$NODE_EXTRA_CA_CERTS" ]; then
    cp "$NODE_EXTRA_CA_CERTS" "$1/build-ca.crt"
  fi
}

# context_hash CTX BASE: 16 hex digits naming the image built from these files on this base, so that an
# unchanged context builds nothing.
context_hash() {
  (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum; docker image inspect -f '{{.Id}}' "$2") |
    sha256sum | cut -c1-16
}
