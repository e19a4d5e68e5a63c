#!/bin/sh
# Boot a Debian kernel under QEMU and record its sysctl keys with make_sysctl_keys.py, run in
# the guest after a full systemd boot of the boot test's cached Debian 12 root.
#
#   boot_sysctl_keys.sh --out FILE [--deb linux-image-<release>.deb [--deb ...]] [--suite TEXT]
#                       [--timeout SECONDS]
#
#   --deb FILE     the kernel package to boot (a linux-image-* .deb, e.g. fetched with
#                  `apt-get download linux-image-5.10.0-46-amd64` from bullseye-security); it is
#                  unpacked into a copy of the root and gets an initrd made there by the root's own
#                  mkinitramfs (MODULES=list: virtio_pci, virtio_blk, ext4). Given again, more
#                  packages unpacked with it: Debian's kernels from 6.16 on are split into
#                  linux-image-, linux-binary- (vmlinuz), linux-base- (config) and
#                  linux-modules-<release>. The first linux-image-* package names the kernel.
#                  Without --deb, the root's own kernel (bookworm's linux-image-amd64) boots.
#   --suite TEXT   the archive suite the package came from, written into the list's header
#   --out FILE     where the list goes (tests/validators/sysctl-keys-<major>.<minor>.txt)
#
# The root comes from tests/boot/build-rootfs.sh (cached in ${GOLDTUNE_BOOT_CACHE:-
# /var/cache/goldtune-boot}; this script never changes it: it works on a copy). In the guest,
# after `systemctl is-system-running --wait`, the modules that own keys goldtune may emit are
# loaded (nf_conntrack: generator/plan/known_keys.py), then the maker runs as root and prints the
# list on ttyS1, which QEMU writes to a file. Needs root, qemu-system-x86_64 and mkfs.ext4.
# TCG (no KVM) takes 2-6 min per kernel on a loaded 2-core host.
set -eu

HERE=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd -P)
REPO=$(CDPATH='' cd -- "$HERE/../.." && pwd -P)
debs=""
suite=""
out=""
boot_timeout=900
LOAD_MODULES="nf_conntrack"

log() { printf 'boot_sysctl_keys: %s\n' "$*" >&2; }
die() { log "error: $1"; exit "${2:-1}"; }

while [ $# -gt 0 ]; do
    case $1 in
        --deb) [ -f "$2" ] || die "--deb: no file $2" 2
            debs="$debs $2"; shift 2 ;;
        --suite) suite=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --timeout) boot_timeout=$2; shift 2 ;;
        *) die "unknown argument $1 (see the header of $0)" 2 ;;
    esac
done
[ -n "$out" ] || die "--out is required" 2
[ "$(id -u)" = 0 ] || die "needs root (the cached root is owned by root; chroot)" 2
command -v qemu-system-x86_64 >/dev/null 2>&1 || die "qemu-system-x86_64 is needed (apt-get install qemu-system-x86)"

cache=$("$REPO/tests/boot/build-rootfs.sh")
work=$(mktemp -d "${TMPDIR:-/tmp}/sysctl-keys.XXXXXX")
trap 'rm -rf "$work"' EXIT
root="$work/root"
log "copying the cached root $cache/root"
cp -a "$cache/root" "$root"

if [ -n "$debs" ]; then
    package=""
    for deb in $debs; do
        name=$(dpkg-deb -f "$deb" Package)
        log "unpacking $name $(dpkg-deb -f "$deb" Version)"
        # the root is merged-/usr: /lib is a link that a plain `dpkg-deb -x` would replace
        dpkg-deb --fsys-tarfile "$deb" | tar -x --keep-directory-symlink -C "$root"
        case $name in
            linux-image-*) [ -n "$package" ] || { package=$name; version=$(dpkg-deb -f "$deb" Version); } ;;
        esac
    done
    [ -n "$package" ] || die "no linux-image-* package among --deb" 2
    release=${package#linux-image-}
    [ -d "$root/lib/modules/$release" ] || die "the packages have no /lib/modules/$release"
    # from 6.16 on the kernel and its config ship in /usr/lib/modules/<release>/ (linux-binary-*,
    # linux-base-*), copied to /boot by their maintainer scripts, which are not run here
    for file in vmlinuz config System.map; do
        if [ -f "$root/lib/modules/$release/$file" ] && [ ! -e "$root/boot/$file-$release" ]; then
            cp "$root/lib/modules/$release/$file" "$root/boot/$file-$release"
        fi
    done
    # depmod and mkinitramfs of the root, for the unpacked kernel; mounts die with the namespace
    # shellcheck disable=SC2016 # $1 and $2 are the inner shell's arguments
    unshare -m sh -eu -c '
        mount --make-rprivate /
        mount -t proc proc "$1/proc"
        mount --rbind /sys "$1/sys"
        mount --rbind /dev "$1/dev"
        chroot "$1" depmod "$2"
        chroot "$1" mkinitramfs -o "/boot/initrd.img-$2" "$2"
    ' unshare-initrd "$root" "$release" >&2
    kernel="$root/boot/vmlinuz-$release"
    initrd="$root/boot/initrd.img-$release"
else
    release=$(cat "$cache/kernel-version")
    package="linux-image-$release"
    # shellcheck disable=SC2016 # dpkg-query's format, not the shell's
    version=$(chroot "$root" dpkg-query -W -f '${Version}' "$package")
    kernel="$cache/vmlinuz"
    initrd="$cache/initrd.img"
    suite=${suite:-"bookworm, the boot test root's linux-image-amd64"}
fi
cp "$kernel" "$work/vmlinuz"
cp "$initrd" "$work/initrd.img"

from="Debian package $package $version${suite:+ ($suite)}, booted under QEMU"
from="$from by tests/validators/boot_sysctl_keys.sh in the boot test root (Debian 12)"
install -m 0644 "$HERE/make_sysctl_keys.py" "$root/usr/local/sbin/make_sysctl_keys.py"
cat >"$root/usr/local/sbin/sysctl-keys-report" <<EOF
#!/bin/sh
# sysctl key list: wait for the end of boot, load the modules, print the list on ttyS1, power off.
timeout 600 systemctl is-system-running --wait >/dev/null 2>&1
udevadm settle --timeout=60
for module in $LOAD_MODULES; do modprobe "\$module"; done
stty -F /dev/ttyS1 raw -echo 2>/dev/null
python3 /usr/local/sbin/make_sysctl_keys.py --from "$from" --from "modules loaded for it: $LOAD_MODULES" >/dev/ttyS1 2>&1
echo "# end of list" >/dev/ttyS1
systemctl poweroff --no-block
EOF
chmod 0755 "$root/usr/local/sbin/sysctl-keys-report"
cat >"$root/etc/systemd/system/sysctl-keys-report.service" <<'EOF'
[Unit]
Description=sysctl key list onto ttyS1 at the end of boot, then power off
After=multi-user.target

[Service]
Type=simple
ExecStart=/usr/local/sbin/sysctl-keys-report

[Install]
WantedBy=multi-user.target
EOF
ln -sf ../sysctl-keys-report.service "$root/etc/systemd/system/multi-user.target.wants/"

size=$(( $(du -sm "$root" | cut -f1) * 13 / 10 + 384 ))
log "making the disk image (${size} MB)"
mkfs.ext4 -q -F -L goldtune-root -d "$root" "$work/disk.img" "${size}M"
rm -rf "$root"

log "booting $package $version (tcg, timeout $boot_timeout s)"
status=0
timeout "$boot_timeout" qemu-system-x86_64 -accel tcg -m 2G -smp 2 -nic none -no-reboot \
    -display none -monitor none \
    -serial "file:$work/console.log" -serial "file:$work/keys.log" \
    -kernel "$work/vmlinuz" -initrd "$work/initrd.img" \
    -append "root=/dev/vda rw console=ttyS0 panic=-1" \
    -drive "if=none,id=root,file=$work/disk.img,format=raw,snapshot=on" \
    -device virtio-blk-pci,drive=root </dev/null >"$work/qemu.log" 2>&1 || status=$?
if [ "$status" != 0 ] || ! grep -q '^# end of list' "$work/keys.log"; then
    tail -n 40 "$work/console.log" >&2 || true
    cat "$work/qemu.log" >&2
    die "no complete key list from the guest (qemu status $status)"
fi
tr -d '\r' <"$work/keys.log" | sed '/^# end of list$/d' >"$out"
grep -q "^# sysctl keys of Linux $release " "$out" || die "the list in $out is not of $release"
log "$(grep -vc '^#' "$out") keys from $release in $out"
