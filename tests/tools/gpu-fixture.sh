#!/bin/sh
# Prepared for the first session that is lent a GPU machine (issue 18: "run gpu-setup and the
# collector there for real and commit what nvidia-smi reported as a test fixture"). NOT RUN YET:
# written in a session without a device. It captures, into OUT_DIR, what the fake nvidia-smi of
# tests/test_scripts.py and tests/test_gpu_sharing.py imitates, so the fakes can be checked
# against (and replaced by) real output:
#   gpu-setup-inventory.csv  the query gpu-setup makes (its field order)
#   collect-query.csv        the query the collector makes
#   mig-mode.csv, mig-lgi.txt (+ .status)  MIG mode and `nvidia-smi mig -lgi` (the parser's input)
#   gpu-setup.log            gpu-setup run for real with reversible actions only
#   snapshot.txt             the collector's snapshot (gpu, gpu-mig, xid sections)
# The lent machine's settings, MIG included, must stay as they are: no ECC, MIG, compute-mode,
# clock-lock or power change here; gpu-setup gets persistence on and a clock reset only.
# Usage (root, repository root, on the GPU machine): tests/tools/gpu-fixture.sh OUT_DIR
set -u
out=${1:?usage: gpu-fixture.sh OUT_DIR}
mkdir -p "$out" || exit 2
scripts=templates/scripts
smi() { timeout -k 5 30 nvidia-smi "$@"; }

smi --query-gpu=index,name,clocks.max.sm,power.min_limit,power.max_limit,power.default_limit,ecc.mode.current,mig.mode.current \
    --format=csv,noheader,nounits >"$out/gpu-setup-inventory.csv" 2>&1
smi --query-gpu=index,pci.bus_id,name,persistence_mode,ecc.mode.current,ecc.mode.pending,compute_mode,power.limit,power.default_limit,clocks.gr,clocks.max.gr,mig.mode.current,mig.mode.pending \
    --format=csv,noheader,nounits >"$out/collect-query.csv" 2>&1
smi -i 0 --query-gpu=mig.mode.current,mig.mode.pending --format=csv,noheader >"$out/mig-mode.csv" 2>&1
smi mig -i 0 -lgi >"$out/mig-lgi.txt" 2>&1
echo "$?" >"$out/mig-lgi.status"

data=$(mktemp) || exit 2
printf 'log-as\tgpu-fixture\npersistence\ton\nclocks\treset\n' >"$data"
sh "$scripts/gpu-setup" "$data" >"$out/gpu-setup.log" 2>&1
printf 'tool\tgoldtune\nbundle\tgpu-fixture\ngpu\n' >"$data"
sh "$scripts/collect" "$data" >"$out/snapshot.txt" 2>&1
rm -f "$data"
