#!/bin/sh
# Build (once) and cache a Debian root filesystem, kernel and initrd the boot test bakes bundles
# into, of one suite: bookworm (Debian 12, the default) or trixie (Debian 13). Prints the cache
# directory on stdout:
#
#   build-rootfs.sh [--suite bookworm|trixie]
#
#   $CACHE/rootfs-<suite>-<hash>/root/ the root filesystem (systemd, udev, kmod, procps, tuned,
#                                     irqbalance, cloud-init; cloud-init is disabled by a marker
#                                     file that boot.sh removes for the cloud-init scenario;
#                                     openssh-server and sudo with the build user "build" for
#                                     the Packer scenario: ssh.service is disabled and the user
#                                     has no key until boot.sh --delivery packer adds one;
#                                     prometheus-node-exporter, disabled: tests/test_detect_boot.py
#                                     starts it after boot to read its /metrics)
#   $CACHE/rootfs-<suite>-<hash>/vmlinuz     the Debian kernel
#   $CACHE/rootfs-<suite>-<hash>/initrd.img  a small initrd (MODULES=list: virtio_pci, virtio_blk,
#                                     ext4)
#
# CACHE is ${GOLDTUNE_BOOT_CACHE:-/var/cache/goldtune-boot}; <hash> is the sha256 of this script,
# so any change to it rebuilds, and the suite is part of the key: one root per suite is kept
# (about 1 GB each), every build of an older script is removed. Needs root (debootstrap, chroot,
# unshare -m). The Debian mirror is ${GOLDTUNE_DEBIAN_MIRROR}, else the first URIs: of the host's
# debian.sources, else deb.debian.org. With GOLDTUNE_BOOT_INSTALL_TOOLS=1 (CI) missing host tools
# are installed with apt-get.
set -eu

SCRIPT=$(readlink -f "$0")
CACHE=${GOLDTUNE_BOOT_CACHE:-/var/cache/goldtune-boot}
HASH=$(sha256sum "$SCRIPT" | cut -c1-16)
SUITE=bookworm
if [ "${1:-}" = --suite ] && [ $# -ge 2 ]; then
    SUITE=$2
    shift 2
fi
case $SUITE in
    # trixie: linux-sysctl-defaults (Priority important, so in every trixie install but
    # debootstrap's minbase) is where Debian 13's /usr/lib/sysctl.d/50-default.conf comes from
    # (hardware_db/distros/debian-13.yaml); bookworm has no such package
    bookworm) SUITE_PACKAGES="" ;;
    trixie) SUITE_PACKAGES=",linux-sysctl-defaults" ;;
    *) printf 'build-rootfs: error: --suite is bookworm or trixie, not "%s"\n' "$SUITE" >&2; exit 2 ;;
esac
DEST="$CACHE/rootfs-$SUITE-$HASH"
# The guest's packages beyond debootstrap's minbase. python3 comes with tuned and cloud-init.
PACKAGES=systemd-sysv,udev,kmod,procps,dbus,ca-certificates$SUITE_PACKAGES
CHROOT_PACKAGES="linux-image-amd64 initramfs-tools tuned irqbalance cloud-init containerd openssh-server sudo
    grub-pc-bin grub2-common prometheus-node-exporter"

log() { printf 'build-rootfs: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

host_tools() {
    missing=""
    for tool in debootstrap unshare chroot sha256sum flock; do
        command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
    done
    [ -z "$missing" ] && return 0
    [ "${GOLDTUNE_BOOT_INSTALL_TOOLS:-0}" = 1 ] || die "missing host tools:$missing (apt-get install debootstrap util-linux)"
    log "installing debootstrap"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap >&2
}

mirror() {
    if [ -n "${GOLDTUNE_DEBIAN_MIRROR:-}" ]; then
        printf '%s\n' "$GOLDTUNE_DEBIAN_MIRROR"
        return
    fi
    found=""
    if [ -r /etc/apt/sources.list.d/debian.sources ]; then
        found=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources)
    fi
    printf '%s\n' "${found:-http://deb.debian.org/debian}"
}

# Runs inside `unshare -m`: mounts vanish with the namespace, even if a step fails.
install_kernel() {
    root=$1
    mount --make-rprivate /
    mount -t proc proc "$root/proc"
    mount --rbind /sys "$root/sys"
    mount --rbind /dev "$root/dev"
    printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
    chmod 755 "$root/usr/sbin/policy-rc.d"
    mkdir -p "$root/etc/initramfs-tools/conf.d"
    echo 'MODULES=list' >"$root/etc/initramfs-tools/conf.d/boottest-modules.conf"
    printf 'virtio_pci\nvirtio_blk\next4\n' >"$root/etc/initramfs-tools/modules"
    # shellcheck disable=SC2086 # the package list is split on purpose
    chroot "$root" env DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 \
        apt-get install -y -q --no-install-recommends $CHROOT_PACKAGES >&2
    chroot "$root" apt-get clean
    rm -f "$root/usr/sbin/policy-rc.d"
}

prepare_guest() {
    root=$1
    echo goldtune-guest >"$root/etc/hostname"
    echo '/dev/vda / ext4 defaults 0 1' >"$root/etc/fstab"
    rm -rf "$root"/var/lib/apt/lists/*
    # cloud-init stays off unless boot.sh delivers through it.
    touch "$root/etc/cloud/cloud-init.disabled"
    # Debian's containerd is 1.6 (bookworm) or 1.7 (trixie; its packaged config.toml names no
    # imports): it reads /etc/containerd/conf.d only through imports, as a GPU node image
    # prepared for goldtune's drop-in has it (containerd >= 2.2 imports it by default).
    mkdir -p "$root/etc/containerd"
    printf 'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n' >"$root/etc/containerd/config.toml"
    # Root without a password on the console, only for debugging a failed boot interactively.
    chroot "$root" passwd -d root >/dev/null
    # The Packer build user (tests/boot/test_packer.py): passwordless sudo, no password, no key
    # here; boot.sh --delivery packer authorizes a key generated for each run and starts sshd.
    chroot "$root" useradd --create-home --shell /bin/sh build
    printf 'build ALL=(ALL) NOPASSWD:ALL\n' >"$root/etc/sudoers.d/90-build"
    chmod 0440 "$root/etc/sudoers.d/90-build"
    # Off in the other scenarios (they boot without a network).
    chroot "$root" systemctl disable --quiet ssh.service
    # Off at boot, so that no boot measures it (bench.py --boot compares boots with and without
    # a bundle); the detect test starts it once the boot is over. Debian's package runs it with
    # ARGS="" (/etc/default/prometheus-node-exporter), so its textfile collector reads the
    # binary's default directory, /var/lib/prometheus/node-exporter, which the package ships.
    chroot "$root" systemctl disable --quiet prometheus-node-exporter.service
}

build() {
    work="$CACHE/build-$SUITE-$HASH.$$"
    rm -rf "$work"
    mkdir -p "$work"
    started=$(date +%s)
    log "debootstrap $SUITE from $(mirror) into $work/root"
    debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$work/root" "$(mirror)" >&2
    log "debootstrap done in $(( $(date +%s) - started )) s; installing kernel, tuned, irqbalance, cloud-init"
    unshare -m "$SCRIPT" --install-kernel "$work/root"
    prepare_guest "$work/root"
    for kernel in "$work/root"/boot/vmlinuz-*; do :; done
    for initrd in "$work/root"/boot/initrd.img-*; do :; done
    cp "$kernel" "$work/vmlinuz"
    cp "$initrd" "$work/initrd.img"
    basename "$kernel" | sed 's/^vmlinuz-//' >"$work/kernel-version"
    rm -rf "$DEST"
    mv "$work" "$DEST"
    log "built $DEST in $(( $(date +%s) - started )) s ($(du -sm "$DEST/root" | cut -f1) MB)"
}

main() {
    if [ "${1:-}" = --install-kernel ]; then
        install_kernel "$2"
        return
    fi
    [ "$(id -u)" = 0 ] || die "needs root (debootstrap and chroot)"
    host_tools
    mkdir -p "$CACHE"
    exec 9>"$CACHE/lock"
    flock 9
    if [ ! -f "$DEST/kernel-version" ]; then
        build
        # Only this script's builds are kept, one per suite: each root is about 1 GB.
        for old in "$CACHE"/rootfs-* "$CACHE"/build-*; do
            case $old in "$CACHE"/rootfs-*-"$HASH") continue ;; esac
            [ -e "$old" ] && rm -rf "$old"
        done
    fi
    printf '%s\n' "$DEST"
}

main "$@"
