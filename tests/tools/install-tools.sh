#!/usr/bin/env bash
# Debian packages for the real-tool checks of rendered files (tests/validators/) and the QEMU boot.
# Idempotent and quick when everything is present: installs only what is missing. Run as root.
#
#   systemd     systemd-analyze verify (units), systemd --test (system.conf.d), systemd-sysctl,
#               systemd-tmpfiles --root
#   kmod        modprobe -C DIR --showconfig (modprobe.d)
#   cloud-init  cloud-init schema --config-file (user-data)
#   (shellcheck) every script of the bundle, install.sh and the GRUB drop-in
#   tuned       tuned's own profile loader and plugin tables (run with /usr/bin/python3)
#   containerd  containerd config dump with the conf.d drop-in imported (its own TOML loader)
#   procps      sysctl(8), for the record of the reference kernel's keys
#   grub-common, grub2-common: grub-mkconfig and update-grub, run for real in a Debian-like root
#               (tests/test_install.py: the generated grub.cfg carries the bundle's arguments)
#   util-linux  setpriv: the systemd and sysctl checks run as nobody, never as root
#   rpm         rpmbuild and rpm -qlp: `gen package --rpm` builds with the real rpmbuild
#               (dpkg-deb, for --deb, is in every Debian system)
#   lintian, rpmlint: the packages are checked by the distributions' own linters
#               (tests/test_package_repo.py)
#   debootstrap, qemu-system-x86, e2fsprogs: the boot test (tests/boot/) builds a Debian 12 root,
#               an ext4 image with mkfs.ext4 -d and boots it under QEMU
#   fdisk, dosfstools, mtools, ovmf, systemd-boot-efi: the boot test's disks booted by the image's
#               own loader (tests/boot/boot.sh --loader): sfdisk partitions the image file,
#               mkfs.vfat and mcopy make the ESP without a mount; OVMF (UEFI) starts
#               systemd-boot, which reads the BLS entry
#   prometheus  promtool: `promtool check metrics` of `gen verify --format prometheus` and the
#               metrics script's textfile, `promtool check rules`/`test rules` of
#               examples/prometheus/ (the package also brings the server; only promtool is used)
#   packer, qemu-utils, openssh-client: `packer validate` of examples/packer/ and the real
#               `packer build` of tests/boot/test_packer.py (its qemu builder runs qemu-img; the
#               build user's key is made with ssh-keygen)
#   strace      counts the processes each boot script starts on a fake node (bench/boot_forks.py,
#               tests/test_boot_forks.py)
#
# `udevadm verify` exists from systemd 254 on; bookworm has 252. Then the udev .deb of
# bookworm-backports is downloaded with a private apt state (the system's sources stay untouched)
# and only unpacked under $UDEV_DIR: its udevadm runs on bookworm's libraries and nothing of it is
# installed as a package. tests/validators/tools.py looks there (or at $GOLDTUNE_UDEVADM).
#
# RHEL 9 ships newer tuned releases than bookworm's 2.20 (hardware_db/tuned/rhel-9-tuned-*.yaml:
# 2.24, 2.25, 2.27), whose throughput-performance sets the dirty limits in [vm]. Debian's trixie
# and forky carry tuned 2.25.1 and 2.27.0 (upstream's code and profiles): their .debs are
# downloaded the same way and only unpacked, as $TUNED_TREES/<version>/{tuned,profiles}, the
# layout of an upstream tag; tests/test_validators.py loads the bundles' profiles with each
# (tests/validators/tuned_check.py --tree). Nothing of them is installed as a package.
#
# containerd 2 reads version 3 configuration and the split CRI plugins; bookworm's is 1.6. The
# containerd .deb of forky (2.1.x) is downloaded the same way and only unpacked under
# $CONTAINERD2_DIR (its binary needs only libc): tests/validators/checks_runtime.py and
# tests/test_wiring.py run its `config dump` beside the system's 1.6. Nothing of it is installed
# as a package, and the system's containerd stays 1.6.
set -euo pipefail

packages=(make systemd kmod cloud-init shellcheck tuned containerd procps util-linux
    grub-common grub2-common rpm debootstrap qemu-system-x86 e2fsprogs packer qemu-utils
    openssh-client prometheus fdisk dosfstools mtools ovmf systemd-boot-efi strace lintian rpmlint)
TOOLS_DIR=${GOLDTUNE_TOOLS_DIR:-/usr/local/lib/goldtune-tools}
UDEV_DIR=$TOOLS_DIR/udev
TUNED_TREES=$TOOLS_DIR/tuned-trees
TUNED_SUITES=(trixie forky) # tuned 2.25.1, 2.27.0
CONTAINERD2_DIR=$TOOLS_DIR/containerd2
CONTAINERD2_SUITE=forky # containerd 2.1.9+ds1-5 when this was written

missing=()
for pkg in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

has_verify() { # udevadm
    [ -x "$1" ] && "$1" verify --help >/dev/null 2>&1
}

state=''
states=''
apt_private=()
private_apt() { # suite...: a private apt state that knows only these suites of the mirror
    mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    mirror=${mirror:-http://deb.debian.org/debian}
    state=$(mktemp -d)
    states="$states $state"
    # shellcheck disable=SC2086 # $states: mktemp's names, without blanks
    trap 'rm -rf $states' EXIT
    mkdir -p "$state/parts" "$state/lists/partial" "$state/archives/partial"
    printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "$mirror" "$*" >"$state/parts/private.sources"
    apt_private=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$state/parts"
        -o "Dir::State::Lists=$state/lists" -o "Dir::Cache::Archives=$state/archives"
        -o APT::Sandbox::User=root)
    apt-get "${apt_private[@]}" update -qq
}

install_udev() {
    private_apt bookworm-backports
    (cd "$state" && apt-get "${apt_private[@]}" download -qq udev/bookworm-backports)
    rm -rf "$UDEV_DIR.new"
    mkdir -p "$UDEV_DIR.new"
    dpkg-deb -x "$state"/udev_*.deb "$UDEV_DIR.new"
    dpkg-deb -f "$state"/udev_*.deb Version >"$UDEV_DIR.new/VERSION"
    has_verify "$UDEV_DIR.new/bin/udevadm" || { echo "install-tools: the backports udevadm has no verify" >&2; exit 1; }
    rm -rf "$UDEV_DIR"
    mv "$UDEV_DIR.new" "$UDEV_DIR"
    echo "install-tools: udevadm $(cat "$UDEV_DIR/VERSION") unpacked in $UDEV_DIR"
}

install_tuned_trees() {
    [ ! -f "$TUNED_TREES/SUITES" ] || [ "$(cat "$TUNED_TREES/SUITES")" != "${TUNED_SUITES[*]}" ] || return 0
    private_apt "${TUNED_SUITES[@]}"
    rm -rf "$TUNED_TREES.new"
    mkdir -p "$TUNED_TREES.new"
    for suite in "${TUNED_SUITES[@]}"; do
        rm -f "$state"/tuned_*.deb
        (cd "$state" && apt-get "${apt_private[@]}" download -qq "tuned/$suite")
        deb=$(echo "$state"/tuned_*.deb)
        version=$(dpkg-deb -f "$deb" Version)
        upstream=${version%-*}
        unpacked=$state/unpacked-$suite
        dpkg-deb -x "$deb" "$unpacked"
        mkdir -p "$TUNED_TREES.new/$upstream"
        cp -r "$unpacked/usr/lib/python3/dist-packages/tuned" "$TUNED_TREES.new/$upstream/tuned"
        cp -r "$unpacked/usr/lib/tuned/profiles" "$TUNED_TREES.new/$upstream/profiles"
        echo "tuned $version ($suite)" >"$TUNED_TREES.new/$upstream/VERSION"
    done
    echo "${TUNED_SUITES[*]}" >"$TUNED_TREES.new/SUITES"
    rm -rf "$TUNED_TREES"
    mv "$TUNED_TREES.new" "$TUNED_TREES"
    echo "install-tools: $(cat "$TUNED_TREES"/*/VERSION | tr '\n' ' ')unpacked in $TUNED_TREES"
}

install_containerd2() {
    [ ! -f "$CONTAINERD2_DIR/SUITE" ] || [ "$(cat "$CONTAINERD2_DIR/SUITE")" != "$CONTAINERD2_SUITE" ] || return 0
    private_apt "$CONTAINERD2_SUITE"
    (cd "$state" && apt-get "${apt_private[@]}" download -qq "containerd/$CONTAINERD2_SUITE")
    deb=$(echo "$state"/containerd_*.deb)
    rm -rf "$CONTAINERD2_DIR.new"
    mkdir -p "$CONTAINERD2_DIR.new"
    dpkg-deb -x "$deb" "$CONTAINERD2_DIR.new"
    dpkg-deb -f "$deb" Version >"$CONTAINERD2_DIR.new/VERSION"
    case $(cat "$CONTAINERD2_DIR.new/VERSION") in
        2.*) ;;
        *) echo "install-tools: containerd of $CONTAINERD2_SUITE is not 2.x" >&2; exit 1 ;;
    esac
    "$CONTAINERD2_DIR.new/usr/bin/containerd" --version >/dev/null
    echo "$CONTAINERD2_SUITE" >"$CONTAINERD2_DIR.new/SUITE"
    rm -rf "$CONTAINERD2_DIR"
    mv "$CONTAINERD2_DIR.new" "$CONTAINERD2_DIR"
    echo "install-tools: containerd $(cat "$CONTAINERD2_DIR/VERSION") unpacked in $CONTAINERD2_DIR"
}

if ! has_verify "$(command -v udevadm || true)" && ! has_verify "$UDEV_DIR/bin/udevadm"; then
    install_udev
fi
install_tuned_trees
install_containerd2
