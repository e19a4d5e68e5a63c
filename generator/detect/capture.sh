#!/bin/sh
# goldtune hardware capture: copy exactly what `gen detect --root DIR` reads into a tarball,
# on a machine without Python. Print it with `gen detect --capture`.
#
#   sh capture.sh [OUTPUT.tar.gz]        (default: ./goldtune-capture.tar.gz)
#   mkdir DIR && tar -xzf OUTPUT.tar.gz -C DIR && gen detect --root DIR
#
# It only reads. It needs sh, cat, grep, head, ln, mkdir, readlink, tar and gzip (coreutils or
# busybox); nvidia-smi's and amd-smi's answers are added when they and timeout are installed.
# Sysfs files are copied with cat (their sizes in stat are not their contents), and sysfs links
# are kept as links, so the tree has the shape the kernel gives it.
set -eu

out=${1:-goldtune-capture.tar.gz}
stage=$(mktemp -d "${TMPDIR:-/tmp}/goldtune-capture.XXXXXX")
trap 'rm -rf "$stage"' EXIT
trap 'exit 1' HUP INT TERM

# copy_file PATH: the contents of one readable regular file (a down link's speed is not).
copy_file() {
    [ -f "$1" ] || return 0
    mkdir -p "$stage$(dirname "$1")"
    cat "$1" > "$stage$1" 2>/dev/null || rm -f "$stage$1"
}

# copy_link PATH: a symbolic link as a link; the caller copies what it points to.
copy_link() {
    [ -L "$1" ] || return 0
    mkdir -p "$stage$(dirname "$1")"
    ln -s "$(readlink "$1")" "$stage$1"
}

# real DIR: the directory with every link resolved (sysfs links stay inside /sys).
real() {
    (cd -P "$1" 2>/dev/null && pwd -P)
}

# copy_device_link DIR: DIR/device as a link, and the directory it leads to.
copy_device_link() {
    [ -L "$1/device" ] || return 0
    copy_link "$1/device"
    target=$(real "$1/device") && mkdir -p "$stage$target"
}

for file in /proc/cpuinfo /proc/meminfo /proc/sys/kernel/osrelease /proc/self/mountinfo \
    /proc/net/route /etc/os-release /usr/lib/os-release \
    /sys/devices/system/cpu/online /sys/devices/soc0/soc_id; do
    copy_file "$file"
done

# Who delivers the GPU driver (os.driver): the NVIDIA GPU Operator's readiness marker, the AMD GPU
# Operator's amdgpu blacklist (generator/detect/system.py).
for file in /run/nvidia/validations/.driver-ctr-ready /etc/modprobe.d/blacklist-amdgpu.conf \
    /etc/modprobe.d/blacklist-amdgpu-by-operator.conf; do
    copy_file "$file"
done

# The base page size: the first KernelPageSize line of the capturing process's own mappings.
mkdir -p "$stage/proc/self"
grep KernelPageSize /proc/self/smaps 2>/dev/null | head -n 1 > "$stage/proc/self/smaps" || true

for cpu in /sys/devices/system/cpu/cpu[0-9]*; do
    copy_file "$cpu/topology/physical_package_id"
    copy_file "$cpu/topology/core_id"
done

for node in /sys/devices/system/node/node[0-9]*; do
    copy_file "$node/cpulist"
    copy_file "$node/meminfo"
done

for function in /sys/bus/pci/devices/*; do
    [ -L "$function" ] || continue
    copy_link "$function"
    target=$(real "$function") || continue
    for name in vendor device class numa_node local_cpulist; do
        copy_file "$target/$name"
    done
done

for interface in /sys/class/net/*; do
    [ -L "$interface" ] || continue
    copy_link "$interface"
    target=$(real "$interface") || continue
    copy_file "$target/type"
    copy_file "$target/speed"
    copy_device_link "$target"
done

for device in /sys/class/infiniband/*; do
    [ -L "$device" ] || continue
    copy_link "$device"
    target=$(real "$device") || continue
    copy_device_link "$target"
done

for disk in /sys/block/*; do
    [ -L "$disk" ] || continue
    copy_link "$disk"
    target=$(real "$disk") || continue
    for name in dev removable size queue/rotational; do
        copy_file "$target/$name"
    done
    for partition in "$target"/*/partition; do
        [ -f "$partition" ] || continue
        copy_file "$partition"
        copy_file "$(dirname "$partition")/dev"
    done
    for slave in "$target"/slaves/*; do
        copy_link "$slave"
    done
done

# The KFD topology of AMD GPUs (amdgpu): one properties file and gpu_id per node.
for node in /sys/class/kfd/kfd/topology/nodes/[0-9]*; do
    copy_file "$node/properties"
    copy_file "$node/gpu_id"
done

if command -v amd-smi >/dev/null 2>&1 && command -v timeout >/dev/null 2>&1; then
    mkdir -p "$stage/goldtune-capture"
    timeout 30 amd-smi static --asic --bus --vram --limit --partition --json \
        > "$stage/goldtune-capture/amd-smi-static.json" 2>/dev/null \
        || rm -f "$stage/goldtune-capture/amd-smi-static.json"
fi

if command -v nvidia-smi >/dev/null 2>&1 && command -v timeout >/dev/null 2>&1; then
    mkdir -p "$stage/goldtune-capture"
    timeout 30 nvidia-smi -q -x > "$stage/goldtune-capture/nvidia-smi-q-x.xml" 2>/dev/null \
        || rm -f "$stage/goldtune-capture/nvidia-smi-q-x.xml"
fi

(cd "$stage" && tar -cf - .) | gzip > "$out"
echo "goldtune capture written to $out" >&2
