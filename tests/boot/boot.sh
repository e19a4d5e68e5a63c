#!/bin/sh
# Bake a goldtune bundle into a cached Debian root (Debian 12 unless --suite says otherwise),
# boot it under QEMU and capture the bundle collector's snapshot from the second serial port.
#
#   boot.sh --bundle DIR --out DIR [--suite bookworm|trixie]
#           [--delivery rootfs|cloud-init|packer] [--user-data FILE]
#           [--hook SCRIPT] [--collector FILE] [--timeout SECONDS] [--packer-timeout SECONDS]
#           [--keep-image] [--smp SPEC] [--qemu-args FILE]
#           [--loader kernel|grub|systemd-boot] [--previous-args ARGS]
#
#   --suite SUITE          the Debian suite of the cached root (build-rootfs.sh --suite):
#                          bookworm (Debian 12, default) or trixie (Debian 13)
#   --delivery rootfs      the bundle's own `install.sh --root` installs it into the image (default)
#   --delivery none        nothing of the bundle but its collector (the harness's): the base image,
#                          booted as the others are (bench/boot_cost.py's baseline)
#   --delivery cloud-init  the image carries a NoCloud seed whose user-data is the bundle's
#                          cloud-init/user-data; cloud-init applies it at first boot
#   --user-data FILE       with --delivery cloud-init: this file is the seed's user-data instead
#                          (a form of it: user-data.mime.gz, composed with a team's part)
#   --delivery packer      `packer build` of examples/packer/qemu-packer-1.6/gpu.pkr.hcl on the
#                          image (qemu builder, kernel and initrd through qemuargs): its
#                          provisioners upload the bundle over SSH as the build user, with a
#                          key made for this run, and run `install.sh --image-build`; the
#                          image Packer writes is booted (--packer-timeout: the limit of
#                          `packer build`, default 960 s)
#   --hook SCRIPT          run `SCRIPT ROOT` after delivery, before the image is made (tampering;
#                          or an extra report: an executable ROOT/usr/local/sbin/boottest-extra
#                          runs after the collector, its output on ttyS2 -> OUT/extra.log)
#   --before SCRIPT        run `SCRIPT ROOT` before delivery (the image as a user had set it up)
#   --collector FILE       the collector to run (default: the bundle's
#                          rootfs/usr/lib/goldtune/collect); it reads the bundle's
#                          rootfs/etc/goldtune/collect.conf, copied beside it
#   --collect-data FILE    the collector's data file instead (a bundle set has none of its own:
#                          tests/test_set_boot.py passes the expected member's)
#   --smp SPEC             QEMU's -smp (default 2)
#   --qemu-args FILE       more QEMU arguments, one per line ("#" lines skipped), appended last
#                          (tests/test_detect_boot.py's emulated topology: NUMA nodes, a PCI
#                          expander bridge, a multi-queue tap NIC); QEMU then runs in a network
#                          namespace of its own (unshare -n), so no tap device reaches the host's.
#                          The disks name their bus (pci.0): QEMU would put a device without one
#                          on an expander bridge given after them
#
#   --loader kernel        (default) QEMU's -kernel/-initrd/-append: the image has no boot
#                          loader, the bundle's kernel arguments (its kernel-cmdline file) are
#                          appended by the harness, standing in for the GRUB drop-in
#   --loader grub          (--delivery rootfs only) the image's own GRUB boots it, BIOS, from an
#                          msdos-partitioned disk; no -kernel/-append. The image is a Debian GRUB
#                          image as its build left it: /etc/default/grub, the modules of its
#                          grub-pc-bin in /boot/grub/i386-pc, a grub.cfg without the bundle's
#                          arguments. install.sh --image-build --root then leaves grub.cfg to its
#                          first-boot unit (goldtune-update-grub.service, the image's own
#                          update-grub); the harness reboots once after that first boot (in the
#                          same QEMU process) and collects in the second, which GRUB boots from
#                          the regenerated grub.cfg
#   --loader systemd-boot  (--delivery rootfs only) systemd-boot under OVMF (UEFI) reads a BLS
#                          entry from the ESP, a FAT image made with mtools from the image's
#                          /boot after delivery: the entry, RHEL-style, ends in $tuned_params,
#                          which systemd-boot passes on as it stands; install.sh edits its
#                          options as text
#   --previous-args ARGS   as if an earlier bundle had added ARGS: the install record's
#                          kernel-args lists them and the image's loader config (grub.cfg, the
#                          BLS entry) carries them; the bundle must take them out
# The guest: ttyS0 -> OUT/console.log (kernel, systemd), ttyS1 -> OUT/snapshot.log, ttyS2 ->
# OUT/extra.log. A harness unit waits until `systemctl is-system-running --wait` returns, runs the
# collector onto ttyS1 (then a hook's boottest-extra onto ttyS2) and powers off; when that state
# is "stopping" (the image rebooting itself) it does nothing, and the next boot reports. QEMU
# runs under a hard timeout.
#
# OUT also gets install.log and timings.txt ("step seconds" per line). Exit status: 0 a snapshot
# was captured, 1 a step failed, 2 bad usage, 3 the boot timed out, 4 the boot ended without a
# complete snapshot. Needs root (the cached root is owned by root; install.sh chowns files).
# Acceleration: GOLDTUNE_BOOT_ACCEL=tcg|kvm|auto (auto: KVM only if a probe boot shows the kernel).
set -eu

HERE=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd -P)
REPO=$(CDPATH='' cd -- "$HERE/../.." && pwd -P)
bundle=""
out=""
suite=bookworm
delivery=rootfs
hook=""
before=""
collector=""
collect_data=""
user_data=""
boot_timeout=600
packer_timeout=960
keep_image=no
smp=2
qemu_args=""
loader=kernel
previous_args=""

log() { printf 'boot: %s\n' "$*" >&2; }
die() { log "error: $1"; exit "${2:-1}"; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
timing() { printf '%s %s\n' "$1" "$2" >>"$out/timings.txt"; log "$1: $2 s"; }

while [ $# -gt 0 ]; do
    case $1 in
        --bundle) bundle=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --suite) suite=$2; shift 2 ;;
        --delivery) delivery=$2; shift 2 ;;
        --hook) hook=$2; shift 2 ;;
        --before) before=$2; shift 2 ;;
        --collector) collector=$2; shift 2 ;;
        --collect-data) collect_data=$2; shift 2 ;;
        --user-data) user_data=$2; shift 2 ;;
        --timeout) boot_timeout=$2; shift 2 ;;
        --packer-timeout) packer_timeout=$2; shift 2 ;;
        --keep-image) keep_image=yes; shift ;;
        --smp) smp=$2; shift 2 ;;
        --qemu-args) qemu_args=$2; shift 2 ;;
        --loader) loader=$2; shift 2 ;;
        --previous-args) previous_args=$2; shift 2 ;;
        *) die "unknown argument $1 (see the header of $0)" 2 ;;
    esac
done
if [ -z "$bundle" ] || [ -z "$out" ]; then die "--bundle and --out are required" 2; fi
case $delivery in rootfs | cloud-init | packer | none) ;; *) die "--delivery is rootfs, cloud-init, packer or none" 2 ;; esac
case $suite in bookworm | trixie) ;; *) die "--suite is bookworm or trixie" 2 ;; esac
[ -z "$qemu_args" ] || [ -f "$qemu_args" ] || die "--qemu-args: no file $qemu_args" 2
case $loader in kernel | grub | systemd-boot) ;; *) die "--loader is kernel, grub or systemd-boot" 2 ;; esac
[ "$loader" = kernel ] || [ "$delivery" = rootfs ] || die "--loader $loader needs --delivery rootfs" 2
[ -z "$previous_args" ] || [ "$loader" != kernel ] || die "--previous-args needs --loader grub or systemd-boot" 2
[ -f "$bundle/install.sh" ] || die "$bundle is not a bundle (no install.sh)" 2
[ "$(id -u)" = 0 ] || die "needs root" 2
bundle=$(CDPATH='' cd -- "$bundle" && pwd -P)
collector=${collector:-$bundle/rootfs/usr/lib/goldtune/collect}
[ -f "$collector" ] || die "no collector at $collector (pass --collector)" 2
collect_data=${collect_data:-$bundle/rootfs/etc/goldtune/collect.conf}
[ -f "$collect_data" ] || die "no collector data at $collect_data" 2

ensure_qemu() {
    command -v qemu-system-x86_64 >/dev/null 2>&1 && command -v mkfs.ext4 >/dev/null 2>&1 && return 0
    [ "${GOLDTUNE_BOOT_INSTALL_TOOLS:-0}" = 1 ] || die "qemu-system-x86_64 and mkfs.ext4 are needed (apt-get install qemu-system-x86 e2fsprogs)"
    log "installing qemu-system-x86 and e2fsprogs"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends qemu-system-x86 e2fsprogs >&2
}

# What each loader needs on the host, and the Debian package that has it.
SD_BOOT_EFI=/usr/lib/systemd/boot/efi/systemd-bootx64.efi
OVMF_CODE=/usr/share/OVMF/OVMF_CODE_4M.fd
OVMF_VARS=/usr/share/OVMF/OVMF_VARS_4M.fd
ensure_loader_tools() {
    case $loader in
        grub) needed="sfdisk:fdisk" ;;
        systemd-boot) needed="sfdisk:fdisk mkfs.vfat:dosfstools mcopy:mtools $SD_BOOT_EFI:systemd-boot-efi $OVMF_CODE:ovmf" ;;
        *) return 0 ;;
    esac
    packages=""
    for pair in $needed; do
        case ${pair%%:*} in
            /*) [ -f "${pair%%:*}" ] && continue ;;
            *) command -v "${pair%%:*}" >/dev/null 2>&1 && continue ;;
        esac
        packages="$packages ${pair#*:}"
    done
    [ -n "$packages" ] || return 0
    [ "${GOLDTUNE_BOOT_INSTALL_TOOLS:-0}" = 1 ] || die "--loader $loader needs:$packages (apt-get install$packages)"
    log "installing$packages"
    apt-get update -qq >&2
    # shellcheck disable=SC2086 # the package list is split on purpose
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $packages >&2
}

# KVM hangs or aborts in some nested sandboxes: use it only after a short probe shows the kernel
# banner; the answer is cached per host boot.
choose_accel() {
    case ${GOLDTUNE_BOOT_ACCEL:-auto} in
        tcg | kvm) echo "${GOLDTUNE_BOOT_ACCEL}"; return ;;
    esac
    if [ ! -r /dev/kvm ] || [ ! -w /dev/kvm ]; then
        echo tcg
        return
    fi
    stamp="$cache/accel-$(cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo unknown)"
    if [ ! -f "$stamp" ]; then
        probe="$work/kvm-probe.log"
        timeout 20 qemu-system-x86_64 -accel kvm -m 256 -nic none -no-reboot -display none -monitor none \
            -serial "file:$probe" -kernel "$cache/vmlinuz" -append "console=ttyS0 panic=-1 init=/bin/false" \
            </dev/null >/dev/null 2>&1 || true
        if grep -q 'Linux version' "$probe" 2>/dev/null; then echo kvm >"$stamp"; else echo tcg >"$stamp"; fi
    fi
    cat "$stamp"
}

add_harness() {
    root=$1
    install -m 0755 "$collector" "$root/usr/local/sbin/boottest-collect"
    install -m 0644 "$collect_data" "$root/usr/local/sbin/boottest-collect.conf"
    cat >"$root/usr/local/sbin/boottest-report" <<'EOF'
#!/bin/sh
# boot test harness: wait for the end of boot, print the snapshot on ttyS1, power off.
# --loader grub: the first boot (the image's first-boot units ran) reboots once instead.
# A boot the image itself ends (stopping: a set's selector rebooting for kernel arguments) is
# not the one to report: the next is.
state=$(timeout 900 systemctl is-system-running --wait 2>/dev/null)
[ "$state" != stopping ] || exit 0
if [ -e /etc/boottest-reboot-once ] && [ ! -e /var/lib/boottest-rebooted ]; then
    : >/var/lib/boottest-rebooted
    sync
    systemctl reboot --no-block
    exit 0
fi
udevadm settle --timeout=60
/usr/local/sbin/boottest-collect /usr/local/sbin/boottest-collect.conf >/dev/ttyS1 2>/dev/null
[ ! -x /usr/local/sbin/boottest-extra ] || /usr/local/sbin/boottest-extra >/dev/ttyS2 2>&1
systemctl poweroff --no-block
EOF
    chmod 0755 "$root/usr/local/sbin/boottest-report"
    cat >"$root/etc/systemd/system/boottest-report.service" <<'EOF'
[Unit]
Description=boot test: snapshot onto ttyS1 at the end of boot, then power off
After=multi-user.target

[Service]
# simple, not oneshot: the start job completes at once, so the boot can finish while it waits
Type=simple
ExecStart=/usr/local/sbin/boottest-report

[Install]
WantedBy=multi-user.target
EOF
    if [ "$delivery" = packer ]; then
        # not in the Packer build's own boot of the image: only in the boot that verifies it
        sed -i 's/^After=multi-user.target$/&\nConditionKernelCommandLine=goldtune.boottest=report/' \
            "$root/etc/systemd/system/boottest-report.service"
    fi
    # Under TCG on a busy 2-core host a unit's start can take minutes (tuned.service failed
    # its 90 s default in a boot at load 9, issue 29): the guest's default start timeout is
    # sized for emulation. Units that set their own (goldtune-gpu.service) keep it.
    mkdir -p "$root/etc/systemd/system.conf.d"
    printf '[Manager]\nDefaultTimeoutStartSec=900s\n' >"$root/etc/systemd/system.conf.d/00-boottest-emulation.conf"
    # The default does not reach a unit that sets its own limit. In Debian 12 systemd's early
    # units do (systemd-sysctl, systemd-modules-load and their aliases procps, kmod: TimeoutSec=90s;
    # systemd-machine-id-commit 30s): each packaged unit with a limit of its own gets the same
    # 900 s in a drop-in. tuned.service (tuned 2.20.0-1) sets none, cloud-init's units set
    # TimeoutSec=0 (none): those the default above already covers.
    for unit in "$root"/lib/systemd/system/*.service; do
        [ -f "$unit" ] && [ ! -L "$unit" ] || continue
        grep -qE '^Timeout(Start)?Sec=' "$unit" || continue
        grep -qE '^Timeout(Start)?Sec=(0|infinity)$' "$unit" && continue
        mkdir -p "$root/etc/systemd/system/${unit##*/}.d"
        printf '[Service]\nTimeoutStartSec=900s\n' >"$root/etc/systemd/system/${unit##*/}.d/00-boottest-emulation.conf"
    done
    mkdir -p "$root/etc/systemd/system/multi-user.target.wants"
    ln -sf ../boottest-report.service "$root/etc/systemd/system/multi-user.target.wants/boottest-report.service"
}

deliver_cloud_init() {
    root=$1
    seed_user_data=${user_data:-$bundle/cloud-init/user-data}
    [ -f "$seed_user_data" ] || die "no user-data at $seed_user_data"
    rm -f "$root/etc/cloud/cloud-init.disabled"
    cat >"$root/etc/cloud/cloud.cfg.d/90-boottest.cfg" <<'EOF'
# boot test: the NoCloud seed below is the only data source; minbase has no locales package
datasource_list: [ NoCloud, None ]
locale: false
EOF
    seed="$root/var/lib/cloud/seed/nocloud"
    mkdir -p "$seed"
    printf 'instance-id: goldtune-boottest\nlocal-hostname: goldtune-guest\n' >"$seed/meta-data"
    cp "$seed_user_data" "$seed/user-data"
}

# The Packer build reaches the guest over SSH (QEMU user networking, DHCP): sshd and
# systemd-networkd on, and the build user's key made for this run. systemd-networkd is linked
# in by hand, without `systemctl enable`, which would also enable systemd-networkd-wait-online:
# the verifying boot has no network and it would fail there.
prepare_packer_guest() {
    root=$1
    command -v packer >/dev/null 2>&1 || die "packer is needed for --delivery packer (apt-get install packer)"
    command -v qemu-img >/dev/null 2>&1 || die "qemu-img is needed by packer's qemu builder (apt-get install qemu-utils)"
    ssh-keygen -q -t ed25519 -N '' -C goldtune-boottest -f "$work/build-key"
    owner=$(awk -F: '$1 == "build" { print $3 ":" $4 }' "$root/etc/passwd")
    [ -n "$owner" ] || die "the cached root has no build user (tests/boot/build-rootfs.sh)"
    install -d -m 0700 -o "${owner%:*}" -g "${owner#*:}" "$root/home/build/.ssh"
    install -m 0600 -o "${owner%:*}" -g "${owner#*:}" "$work/build-key.pub" "$root/home/build/.ssh/authorized_keys"
    systemctl --root="$root" --quiet enable ssh.service
    # sudo looks the host name up (else "unable to resolve host" on every provisioner command)
    printf '127.0.1.1\tgoldtune-guest\n' >>"$root/etc/hosts"
    printf '[Match]\nName=en* eth*\n\n[Network]\nDHCP=yes\n' >"$root/etc/systemd/network/80-boottest.network"
    mkdir -p "$root/etc/systemd/system/sockets.target.wants"
    ln -sf /lib/systemd/system/systemd-networkd.service "$root/etc/systemd/system/multi-user.target.wants/"
    ln -sf /lib/systemd/system/systemd-networkd.socket "$root/etc/systemd/system/sockets.target.wants/"
}

# packer build of the example template on $disk; $disk becomes the image it writes.
run_packer() {
    vars="$work/boottest.pkrvars.hcl"
    cat >"$vars" <<EOF
base_image           = "$disk"
format               = "raw"
bundle_dir           = "$bundle"
install_flags        = "--image-build"
driver_install       = ["echo 'boot test: this image has no NVIDIA packages (install_flags: no --strict)'"]
ssh_username         = "build"
ssh_private_key_file = "$work/build-key"
accelerator          = "$accel"
output_directory     = "$work/packer-output"
qemuargs = [
  ["-kernel", "$cache/vmlinuz"],
  ["-initrd", "$cache/initrd.img"],
  ["-append", "root=/dev/vda rw console=ttyS0 panic=-1"],
  ["-serial", "file:$out/packer-console.log"],
]
EOF
    status=0
    (cd "$work" && CHECKPOINT_DISABLE=1 PACKER_CACHE_DIR="$work/packer_cache" \
        timeout "$packer_timeout" packer build -color=false -var-file="$vars" \
        "$REPO/examples/packer/qemu-packer-1.6/gpu.pkr.hcl") </dev/null >"$out/packer.log" 2>&1 || status=$?
    if [ "$status" != 0 ]; then
        tail -n 60 "$out/packer.log" >&2
        [ "$status" != 124 ] || die "packer build did not finish within $packer_timeout s (console: $out/packer-console.log)" 3
        die "packer build failed ($status; log: $out/packer.log)"
    fi
    rm -f "$disk"
    disk="$work/packer-output/gpu-golden.img"
    [ -f "$disk" ] || die "packer build wrote no image at $disk"
}

# The install record's directory in the image (install.list: "record <path>").
record_dir() {
    awk -F '\t' '$1 == "record" { sub("/[^/]*$", "", $2); print $2; exit }' "$bundle/install.list"
}

# --previous-args: the arguments an earlier bundle added, in its install record.
record_previous_args() {
    [ -n "$previous_args" ] || return 0
    dir="$1$(record_dir)"
    mkdir -p "$dir"
    # shellcheck disable=SC2086 # one argument a line
    printf '%s\n' $previous_args >"$dir/kernel-args"
}

# --loader kernel: the image has no boot loader, as before the cached root carried GRUB for
# --loader grub; without its update-grub install.sh writes no first-boot unit to run it (which
# would fail here: no /boot/grub) and a Packer build runs none.
purge_grub() {
    [ -e "$1/usr/sbin/update-grub" ] || return 0
    chroot "$1" env LC_ALL=C dpkg --purge grub-pc-bin grub2-common >/dev/null
}

# --loader grub: a Debian GRUB image as its build left it, before the bundle. Its
# /etc/default/grub (serial console, no menu wait), GRUB's modules where grub-install puts them
# (the image's grub-pc-bin), and a grub.cfg that boots it without the bundle's arguments (with
# --previous-args, with those). The harness reboots once after its first boot.
prepare_grub_image() {
    root=$1
    if [ ! -f "$root/usr/lib/grub/i386-pc/boot.img" ] || [ ! -x "$root/usr/sbin/update-grub" ]; then
        die "the cached root has no grub-pc-bin and grub2-common (tests/boot/build-rootfs.sh)"
    fi
    version=$(cat "$cache/kernel-version")
    printf '/dev/vda1 / ext4 defaults 0 1\n' >"$root/etc/fstab"
    cat >"$root/etc/default/grub" <<'GRUB'
# boot test: a Debian GRUB image on a serial console (no menu wait)
GRUB_DEFAULT=0
GRUB_TIMEOUT=0
GRUB_DISTRIBUTOR=Debian
GRUB_CMDLINE_LINUX_DEFAULT=""
GRUB_CMDLINE_LINUX="console=ttyS0 panic=-1"
GRUB_TERMINAL=console
GRUB
    mkdir -p "$root/boot/grub"
    cp -r "$root/usr/lib/grub/i386-pc" "$root/boot/grub/i386-pc"
    cat >"$root/boot/grub/grub.cfg" <<GRUB
# boot test: the grub.cfg of the image's build, made before the bundle
set timeout=0
menuentry 'Debian GNU/Linux' {
    linux /boot/vmlinuz-$version root=/dev/vda1 ro console=ttyS0 panic=-1${previous_args:+ $previous_args}
    initrd /boot/initrd.img-$version
}
GRUB
    : >"$root/etc/boottest-reboot-once"
    record_previous_args "$root"
}

# --loader systemd-boot: a BLS image whose /boot (the ESP at boot) has one entry as RHEL 9 writes
# them: the options end in $tuned_params (tuned's 92-tuned.install), and grub2's blscfg keys
# systemd-boot does not know (it skips them).
BLS_ENTRY_ID=0123456789abcdef0123456789abcdef
prepare_bls_image() {
    root=$1
    version=$(cat "$cache/kernel-version")
    printf '/dev/vda2 / ext4 defaults 0 1\n' >"$root/etc/fstab"
    mkdir -p "$root/boot/loader/entries"
    cat >"$root/boot/loader/entries/$BLS_ENTRY_ID-$version.conf" <<BLS
title Debian GNU/Linux 12 ($version)
version $version
linux /vmlinuz-$version
initrd /initrd.img-$version
options root=/dev/vda2 ro console=ttyS0 panic=-1${previous_args:+ $previous_args} \$tuned_params
grub_users \$grub_users
grub_arg --unrestricted
grub_class debian
BLS
    record_previous_args "$root"
}

# The ESP of --loader systemd-boot, from the image's /boot after delivery: systemd-boot at the
# removable-media path, the BLS entries, the kernel and initrd they name. FAT made and filled by
# mtools (no mount). The entries are also copied to OUT.
make_esp() {
    root=$1
    esp=$2
    version=$(cat "$cache/kernel-version")
    mkfs.vfat -C -n ESP "$esp" $((esp_mb * 1024)) >/dev/null
    mmd -i "$esp" ::/EFI ::/EFI/BOOT ::/loader ::/loader/entries
    mcopy -i "$esp" "$SD_BOOT_EFI" ::/EFI/BOOT/BOOTX64.EFI
    printf 'timeout 0\n' >"$work/loader.conf"
    mcopy -i "$esp" "$work/loader.conf" ::/loader/loader.conf
    mcopy -i "$esp" "$root"/boot/loader/entries/*.conf ::/loader/entries/
    mcopy -i "$esp" "$root/boot/vmlinuz-$version" "$root/boot/initrd.img-$version" ::/
    cp "$root"/boot/loader/entries/*.conf "$out/"
}

# The boot disk from the image's root directory, without a loop device or a mount: partition
# table by sfdisk on the file, ext4 by mkfs.ext4 -d at the partition's offset. grub: the image's
# boot.img in the MBR (its code only, the table kept) and a core.img made by the image's own
# grub-mkimage in the gap after it (boot.img reads sector 1 and diskboot's blocklist starts at
# sector 2: the defaults grub-mkimage leaves, so no grub-bios-setup is needed). systemd-boot: a
# GPT with the ESP first.
make_disk() {
    root=$1
    disk=$2
    size=$(($(du -sm "$root" | cut -f1) * 13 / 10 + 384))
    case $loader in
        kernel)
            mkfs.ext4 -q -F -L goldtune-root -d "$root" "$disk" "${size}M"
            return
            ;;
        grub)
            chroot "$root" grub-mkimage -O i386-pc -p '(,msdos1)/boot/grub' -o /boottest-core.img \
                biosdisk part_msdos ext2
            mv "$root/boottest-core.img" "$work/core.img"
            [ "$(stat -c %s "$work/core.img")" -le $((2047 * 512)) ] || die "core.img does not fit before the partition"
            cp "$root/usr/lib/grub/i386-pc/boot.img" "$work/boot.img"
            truncate -s "$((size + 1))M" "$disk"
            printf 'label: dos\nstart=2048, type=L, bootable\n' | sfdisk -q "$disk"
            root_offset=1
            ;;
        systemd-boot)
            esp_mb=64
            make_esp "$root" "$work/esp.img"
            truncate -s "$((1 + esp_mb + size + 1))M" "$disk"
            printf 'label: gpt\nstart=2048, size=%sMiB, type=U\nsize=%sMiB, type=L\n' "$esp_mb" "$size" |
                sfdisk -q "$disk"
            dd if="$work/esp.img" of="$disk" bs=1M seek=1 conv=notrunc status=none
            root_offset=$((1 + esp_mb))
            ;;
    esac
    mkfs.ext4 -q -F -L goldtune-root -d "$root" -E "offset=$((root_offset * 1048576)),nodiscard" "$disk" "${size}M"
    if [ "$loader" = grub ]; then
        dd if="$work/boot.img" of="$disk" bs=440 count=1 conv=notrunc status=none
        dd if="$work/core.img" of="$disk" bs=512 seek=1 conv=notrunc status=none
    fi
}

kernel_args() {
    if [ -f "$bundle/kernel-cmdline" ]; then
        tr '\n' ' ' <"$bundle/kernel-cmdline"
    fi
}

mkdir -p "$out"
out=$(CDPATH='' cd -- "$out" && pwd -P)
: >"$out/timings.txt"
rm -f "$out/console.log" "$out/snapshot.log" "$out/extra.log"
ensure_qemu
ensure_loader_tools

started=$(now)
cache=$("$HERE/build-rootfs.sh" --suite "$suite")
timing rootfs-cache "$(elapsed "$started")"

work="$out/work"
rm -rf "$work"
mkdir -p "$work"
step=$(now)
cp -a "$cache/root" "$work/root"
timing copy-root "$(elapsed "$step")"

step=$(now)
case $loader in
    kernel) purge_grub "$work/root" ;;
    grub) prepare_grub_image "$work/root" ;;
    systemd-boot) prepare_bls_image "$work/root" ;;
esac
if [ -n "$before" ]; then
    "$before" "$work/root" || die "script $before failed"
fi
install_flags=""
[ "$loader" = kernel ] || install_flags="--image-build"
case $delivery in
    rootfs) sh "$bundle/install.sh" ${install_flags:+"$install_flags"} --root "$work/root" >"$out/install.log" 2>&1 || {
        cat "$out/install.log" >&2
        die "install.sh --root failed"
    } ;;
    cloud-init) deliver_cloud_init "$work/root" ;;
    packer) prepare_packer_guest "$work/root" ;;
    none) ;;
esac
add_harness "$work/root"
if [ -n "$hook" ]; then
    "$hook" "$work/root" || die "hook $hook failed"
fi
timing deliver "$(elapsed "$step")"

step=$(now)
make_disk "$work/root" "$work/disk.img"
rm -rf "$work/root"
for extra_disk in ssd hdd nvme; do truncate -s 64M "$work/$extra_disk.img"; done
disk="$work/disk.img"
timing image "$(elapsed "$step")"

accel=$(choose_accel)
append="root=/dev/vda rw console=ttyS0 panic=-1"
[ "$delivery" = none ] || append="$append $(kernel_args)"
if [ "$delivery" = packer ]; then
    step=$(now)
    log "packer build ($accel, timeout ${packer_timeout} s)"
    run_packer
    timing packer-build "$(elapsed "$step")"
    append="$append goldtune.boottest=report"
fi
if [ "$loader" = kernel ]; then
    log "booting ($accel, timeout ${boot_timeout} s): $append"
else
    log "booting through $loader ($accel, timeout ${boot_timeout} s)"
fi
step=$(now)
status=0
netns=""
if [ -n "$qemu_args" ]; then
    netns="unshare -n"
    saved_ifs=$IFS
    IFS='
'
    set -f
    # shellcheck disable=SC2046 # one argument per line of the file, on purpose
    set -- $(grep -v '^#' "$qemu_args")
    set +f
    IFS=$saved_ifs
else
    set --
fi
# QEMU loads the kernel, or the image's own loader boots from the disk (the firmware's and the
# loader's options go first in "$@"). --loader grub reboots once in the same QEMU process (the
# snapshot's writes last as long as it does), so it runs without -no-reboot.
# The root disk boots first under a loader (with -kernel, QEMU's linuxboot ROM has bootindex 0).
boot_first=",bootindex=0"
case $loader in
    kernel)
        boot_first=""
        set -- -no-reboot -kernel "$cache/vmlinuz" -initrd "$cache/initrd.img" -append "$append" "$@"
        ;;
    grub) ;;
    systemd-boot)
        cp "$OVMF_VARS" "$work/ovmf-vars.fd"
        set -- -no-reboot -drive "if=pflash,format=raw,unit=0,readonly=on,file=$OVMF_CODE" \
            -drive "if=pflash,format=raw,unit=1,file=$work/ovmf-vars.fd" "$@"
        ;;
esac
# One disk on AHCI (the SSD): two SATA disks of one AHCI host are probed in parallel, so which
# the kernel names sda changed from boot to boot and a bundle's disk claims with it. The rotating
# disk is a second virtio disk (virtio-blk sets no non-rotational flag), named vdb in PCI order.
# shellcheck disable=SC2086 # $netns: nothing, or the command and its option
timeout "$boot_timeout" $netns qemu-system-x86_64 -accel "$accel" -m 2G -smp "$smp" -nic none \
    -display none -monitor none \
    -serial "file:$out/console.log" -serial "file:$out/snapshot.log" -serial "file:$out/extra.log" \
    -drive "if=none,id=root,file=$disk,format=raw,snapshot=on" \
    -device "virtio-blk-pci,drive=root,bus=pci.0$boot_first" \
    -device ahci,id=ahci,bus=pci.0 \
    -drive "if=none,id=ssd,file=$work/ssd.img,format=raw" -device ide-hd,drive=ssd,bus=ahci.0,rotation_rate=1 \
    -drive "if=none,id=hdd,file=$work/hdd.img,format=raw" -device virtio-blk-pci,drive=hdd,bus=pci.0 \
    -drive "if=none,id=nvme,file=$work/nvme.img,format=raw" -device nvme,drive=nvme,serial=goldtune0,bus=pci.0 \
    "$@" </dev/null >"$out/qemu.log" 2>&1 || status=$?
timing boot "$(elapsed "$step")"
timing total "$(elapsed "$started")"
[ "$keep_image" = yes ] || rm -rf "$work"

if [ "$status" = 124 ]; then
    tail -n 40 "$out/console.log" >&2 || true
    die "the boot did not finish within $boot_timeout s (console: $out/console.log)" 3
fi
if [ "$status" != 0 ]; then
    cat "$out/qemu.log" >&2
    die "qemu exited with status $status"
fi
if ! grep -q 'reboot: Power down' "$out/console.log" 2>/dev/null; then
    tail -n 40 "$out/console.log" >&2 || true
    die "the guest stopped without powering off (reset or crash; console: $out/console.log)" 4
fi
if ! grep -q "$(printf 'goldtune-snapshot\tend')" "$out/snapshot.log" 2>/dev/null; then
    tail -n 40 "$out/console.log" >&2 || true
    die "no complete snapshot on ttyS1 (console: $out/console.log)" 4
fi
log "snapshot: $out/snapshot.log"
