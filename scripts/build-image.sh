#!/usr/bin/env bash
# Builds the agentd container image (Containerfile at the top of the
# repository) with buildah, tagged localhost/agentd:VERSION and
# localhost/agentd:latest.
#
#   scripts/build-image.sh [--build] [--base-from-debootstrap] [--base IMAGE]
#
#   --build                  build the release binaries first
#                            (cargo build --release --locked); without it the
#                            ones already in target/release are used
#   --base-from-debootstrap  make the base image here with debootstrap
#                            (Debian bookworm, minbase) and import it as
#                            localhost/debian:bookworm-slim, for machines that
#                            cannot pull from a registry
#   --base IMAGE             any other base image (default: the
#                            Containerfile's, debian:bookworm-slim; e.g.
#                            localhost/debian:bookworm-slim again, made by an
#                            earlier --base-from-debootstrap)
#
# Environment: DEBIAN_MIRROR (default http://deb.debian.org/debian),
# DEBIAN_SECURITY_MIRROR (default http://deb.debian.org/debian-security).
# Needs root (or a rootless buildah set up for the user); Debian packages
# buildah, and debootstrap for --base-from-debootstrap (podman, when
# installed, imports the base; buildah alone does it otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."

build=0
debootstrap_base=0
base=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=1 ;;
    --base-from-debootstrap) debootstrap_base=1 ;;
    --base) base="${2:?--base needs an image}"; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-image: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ "$debootstrap_base" = 1 ] && [ -n "$base" ]; then
  echo "build-image: --base and --base-from-debootstrap exclude each other" >&2
  exit 2
fi

need() {
  command -v "$1" >/dev/null 2>&1 || { echo "build-image: $1 is not installed (Debian package $2)" >&2; exit 1; }
}
need buildah buildah
need strip binutils

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ "$build" = 1 ]; then
  echo "build-image: cargo build --release --locked -p agentd -p agentctl"
  cargo build --release --locked -p agentd -p agentctl
fi
for bin in agentd agentd-sandbox agentctl; do
  [ -x "target/release/$bin" ] || {
    echo "build-image: target/release/$bin is missing: build it or pass --build" >&2
    exit 1
  }
done
# The image's version is the daemon's own ("agentd 0.1.0").
version=$(target/release/agentd --version | awk '{print $2}')
[ -n "$version" ] || { echo "build-image: target/release/agentd --version said no version" >&2; exit 1; }

if [ "$debootstrap_base" = 1 ]; then
  need debootstrap debootstrap
  base=localhost/debian:bookworm-slim
  mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
  security=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
  root="$work/rootfs"
  echo "build-image: debootstrap --variant=minbase bookworm from $mirror"
  debootstrap --variant=minbase bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
    tail -n 20 "$work/debootstrap.log" >&2
    echo "build-image: debootstrap failed (the end of its log is above)" >&2
    exit 1
  }
  # As the official slim image is: the same suites (with updates and
  # security), and no documentation, manual pages or translations installed
  # by later packages.
  rm -f "$root/etc/apt/sources.list"
  cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  cat >"$root/etc/dpkg/dpkg.cfg.d/slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
EOF
  # Downloaded packages are removed after each install, as in the official
  # image, so that no layer keeps them.
  cat >"$root/etc/apt/apt.conf.d/slim-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  # debootstrap takes the release as published; the updates and security
  # suites bring what was fixed since.
  echo "build-image: applying bookworm-updates and bookworm-security"
  if ! { chroot "$root" apt-get update -qq \
    && chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get upgrade -y -qq; } >>"$work/debootstrap.log" 2>&1; then
    tail -n 20 "$work/debootstrap.log" >&2
    echo "build-image: upgrading the debootstrapped base failed (the end of the log is above)" >&2
    exit 1
  fi
  # What the existing packages brought of the same, the package cache and
  # lists, and the build machine's name and resolver, which the container
  # runtime provides at run time.
  find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/* \
    "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
    "$root"/var/log/* "$root"/tmp/* "$root/etc/hostname" "$root/etc/resolv.conf"
  echo "build-image: importing the root file system as $base"
  tar --numeric-owner --xattrs -C "$root" -cf "$work/rootfs.tar" .
  if command -v podman >/dev/null 2>&1; then
    podman import --change 'CMD ["bash"]' "$work/rootfs.tar" "$base" >/dev/null
  else
    # buildah alone has no import: an empty image that the archive is
    # unpacked into (buildah add extracts a local tar archive).
    ctr=$(buildah from scratch)
    buildah add "$ctr" "$work/rootfs.tar" / >/dev/null
    buildah config --cmd bash "$ctr"
    buildah commit --rm "$ctr" "$base" >/dev/null
  fi
  rm -rf "$root" "$work/rootfs.tar"
fi

# The build context holds only what the image takes: stripped copies of the
# binaries (debug information is most of their size).
mkdir -p "$work/context/dist"
for bin in agentd agentd-sandbox agentctl; do
  strip -o "$work/context/dist/$bin" "target/release/$bin"
done
echo "build-image: binaries staged ($(du -sh "$work/context/dist" | cut -f1) stripped)"

# This machine's own needs for running the RUN steps (cgroups, limits).
. scripts/container-host.sh
args=("${ENGINE_OPTS[@]}")
[ -n "$base" ] && args+=(--build-arg "BASE=$base")
echo "build-image: buildah bud -> localhost/agentd:$version, localhost/agentd:latest${base:+ (base $base)}"
buildah bud "${args[@]}" -f Containerfile \
  -t "localhost/agentd:$version" -t localhost/agentd:latest "$work/context" || {
  hint=""
  [ -z "$base" ] && hint=" (if the base image could not be pulled, --base-from-debootstrap makes one here)"
  echo "build-image: buildah bud failed$hint" >&2
  exit 1
}
echo "build-image: built localhost/agentd:$version ($(buildah images --format '{{.Size}}' "localhost/agentd:$version" | head -n 1))"
