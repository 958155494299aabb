#!/usr/bin/env bash
# Build the sandbox images locally, with no container registry:
#
#   computepool/busybox:1   Debian's busybox-static, one symlink per applet (≈2 MB, <1 s)
#   computepool/python:3    a Debian minbase root with python3 (debootstrap, ≈40-90 s, ≈120 MB)
#
#   bash scripts/build_sandbox_images.sh             # both
#   bash scripts/build_sandbox_images.sh busybox     # only the small one (what the tests use)
#   FORCE=1 bash scripts/build_sandbox_images.sh     # rebuild even if the image exists
#
# The Python image is a real root filesystem rather than a view of the host's /usr: a job then
# sees nothing of the operator's machine, and the same image runs under Docker and gVisor alike.
set -euo pipefail

BUSYBOX_IMAGE=computepool/busybox:1
PYTHON_IMAGE=computepool/python:3
SUITE="${DEBIAN_SUITE:-bookworm}"

say() { echo "build_sandbox_images: $*"; }
die() { echo "build_sandbox_images: ERROR: $*" >&2; exit 1; }

docker info >/dev/null 2>&1 || die "no Docker engine answers; run scripts/ensure_docker.sh first"

APT_UPDATED=0
need_package() {
    dpkg -s "$1" >/dev/null 2>&1 && return 0
    if [ "$APT_UPDATED" -eq 0 ]; then
        apt-get update -qq || die "apt-get update failed"
        APT_UPDATED=1
    fi
    say "installing $1"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$1" >/dev/null \
        || die "apt-get install $1 failed"
}

have_image() { [ "${FORCE:-0}" != "1" ] && docker image inspect "$1" >/dev/null 2>&1; }

BUILD_DIR=""
cleanup() { [ -z "$BUILD_DIR" ] || rm -rf "$BUILD_DIR"; }
trap cleanup EXIT

new_root() {
    cleanup
    BUILD_DIR="$(mktemp -d -t computepool-image-XXXXXX)"
}

# /in, /out and /work exist in the image so that every runtime finds its mount points.
add_sandbox_dirs() {
    mkdir -p "$1/in" "$1/out" "$1/work" "$1/tmp"
    chmod 1777 "$1/tmp"
}

build_busybox() {
    if have_image "$BUSYBOX_IMAGE"; then say "$BUSYBOX_IMAGE exists"; return; fi
    # busybox-static, not busybox: the image has no libc for a dynamic binary to load.
    need_package busybox-static
    local busybox=/bin/busybox
    new_root
    local root="$BUILD_DIR/root"
    mkdir -p "$root/bin" "$root/etc"
    cp "$busybox" "$root/bin/busybox"
    local applet
    for applet in $("$busybox" --list); do
        [ "$applet" = busybox ] || ln -s busybox "$root/bin/$applet"
    done
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/work:/bin/false\n' \
        >"$root/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
    add_sandbox_dirs "$root"
    tar -C "$root" --numeric-owner --owner=0 --group=0 -c . \
        | docker import -c 'ENV PATH=/bin' -m "busybox-static sandbox image" - "$BUSYBOX_IMAGE" \
        >/dev/null
    say "built $BUSYBOX_IMAGE"
}

build_python() {
    if have_image "$PYTHON_IMAGE"; then say "$PYTHON_IMAGE exists"; return; fi
    need_package debootstrap
    new_root
    local root="$BUILD_DIR/root"
    say "debootstrap $SUITE minbase + python3 (this takes a minute)"
    debootstrap --variant=minbase --include=python3 "$SUITE" "$root" >"$BUILD_DIR/debootstrap.log" 2>&1 \
        || { tail -20 "$BUILD_DIR/debootstrap.log" >&2; die "debootstrap failed"; }
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
        "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/*
    add_sandbox_dirs "$root"
    tar -C "$root" --numeric-owner -c . \
        | docker import -c 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
            -c 'ENV PYTHONDONTWRITEBYTECODE=1' -m "debian minbase python3 sandbox image" \
            - "$PYTHON_IMAGE" >/dev/null
    say "built $PYTHON_IMAGE"
}

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(busybox python)
for target in "${targets[@]}"; do
    case "$target" in
        busybox) build_busybox ;;
        python) build_python ;;
        *) die "unknown image '$target' (busybox, python)" ;;
    esac
done
