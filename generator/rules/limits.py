"""Limits: open files and locked memory for logins and services, kernel-wide file tables."""

from __future__ import annotations

from generator.inputs.facts import Facts
from generator.inputs.profile import Profile
from generator.model.kernel import NR_OPEN_DEFAULT
from generator.model.vendors import GpuVendor
from generator.rules.base import Output, limit, manager_default, note, rule, sysctl

NOFILE = 1048576
# systemd's own soft default for services (systemd >= 240, NEWS): select(2) cannot watch a
# descriptor above 1023, so a service raises its soft limit itself when it can handle more.
SERVICE_NOFILE_SOFT = 1024
LOGIN_DOMAINS = ("*", "root")
# pam_limits never applies a '*' line to root (limits.conf(5)), so root gets its own line.
ROOT_NOTE = {"*": "", "root": " (root: '*' lines do not apply to root)"}


@rule("limits.nofile")
def nofile(facts: Facts, profile: Profile) -> Output:
    """Open-file limit for logins (limits.d) and services (systemd), kept within fs.nr_open.

    Services: soft 1024, hard 1048576. systemd.exec(5) LimitNOFILE=: "Be careful when raising
    the soft limit above 1024, since select(2) cannot function with file descriptors above
    1023 on Linux ... applications should increase their soft limit to the hard limit on their
    own"; systemd >= 240 itself defaults to 1024:524288. The daemons on a GPU node (Go ones
    since Go 1.19 raise their soft limit to the hard one at start; vLLM raises its own) do, so
    only the hard limit is raised, to fs.nr_open's default. Logins keep soft = hard: the
    workloads started there, and Slurm jobs (slurm.conf PropagateResourceLimits copies the
    submitting shell's soft limits), are Python data loaders that never raise their own limit
    and fail with EMFILE at 1024.
    """
    why = (
        "vLLM, Triton, DataLoader workers, NCCL and gRPC open hundreds of descriptors each; "
        "1024 fails with EMFILE"
    )
    for domain in LOGIN_DOMAINS:
        yield limit(
            domain,
            "soft",
            "nofile",
            NOFILE,
            why + "; scripts and Slurm jobs (PropagateResourceLimits) started from a login "
            "never raise their own soft limit" + ROOT_NOTE[domain],
        )
        yield limit(
            domain,
            "hard",
            "nofile",
            NOFILE,
            why + f"; not above fs.nr_open ({NR_OPEN_DEFAULT})" + ROOT_NOTE[domain],
        )
    yield manager_default(
        "DefaultLimitNOFILE",
        f"{SERVICE_NOFILE_SOFT}:{NOFILE}",
        "services started by systemd do not read limits.d; soft 1024 as systemd's default "
        "because select(2) fails above descriptor 1023 (systemd.exec(5) LimitNOFILE=), hard "
        f"{NOFILE} (systemd's is 524288) so a service that raises its own soft limit (every "
        "Go daemon since Go 1.19) gets fs.nr_open's default",
    )


def amd_only(facts: Facts) -> bool:
    """AMD GPUs and no NVIDIA ones: reasons name ROCm's stack, not CUDA's."""
    return facts.has_gpus_of(GpuVendor.AMD) and not facts.has_nvidia_gpus


# What locks pages on an AMD GPU node: RDMA memory registration, which ib_umem_get counts
# against RLIMIT_MEMLOCK without CAP_IPC_LOCK (drivers/infiniband/core/umem.c). ROCm's own
# pinned host memory is allocated through the KFD driver, not mlock(2), so it is not named.
AMD_MEMLOCK_WHY = (
    "RDMA memory registration (RCCL's IB transport, MPI) locks pages counted against the memlock "
    "limit (drivers/infiniband/core/umem.c ib_umem_get); a cap fails it"
)


@rule("limits.memlock", vendors=(GpuVendor.NVIDIA, GpuVendor.AMD))
def memlock(facts: Facts, profile: Profile) -> Output:
    """Unlimited locked memory: pinned host buffers and RDMA memory registration."""
    why = (
        AMD_MEMLOCK_WHY
        if amd_only(facts)
        else "CUDA pinned host memory and RDMA memory registration lock pages; a cap fails them"
    )
    for domain in LOGIN_DOMAINS:
        yield limit(domain, "soft", "memlock", "unlimited", why + ROOT_NOTE[domain])
        yield limit(domain, "hard", "memlock", "unlimited", why + ROOT_NOTE[domain])
    yield manager_default(
        "DefaultLimitMEMLOCK",
        "infinity",
        "services started by systemd do not read limits.d; " + why,
    )


@rule("limits.aio")
def aio(facts: Facts, profile: Profile) -> Output:
    """Room for asynchronous I/O contexts used by weight and data loaders."""
    yield sysctl(
        "fs.aio-max-nr",
        1048576,
        "asynchronous weight and dataset loaders (io_uring/libaio) exhaust the 65536 default",
    )


@rule("limits.inotify")
def inotify(facts: Facts, profile: Profile) -> Output:
    """Enough inotify instances for container hosts, and watches for checkpoint trees (training).

    max_user_instances defaults to 128 per user, which container hosts exhaust ("too many open
    files" from inotify_init1); EKS and OpenShift nodes use 8192, NVIDIA's gb200 tuned profile
    65535. max_user_watches scales with RAM since Linux 5.11 (fs/notify/inotify, 1% of memory,
    at most 1048576), so inference keeps the default.
    """
    yield sysctl(
        "fs.inotify.max_user_instances",
        8192,
        "every process that watches files holds an inotify instance; container hosts "
        "(kubelet, containerd, sidecars) exhaust the 128-per-user default; 8192 as EKS "
        "and OpenShift nodes",
    )
    if profile.intent != "training":
        yield note(
            "fs.inotify.max_user_watches left at the default for inference: kernels >= "
            "5.11 scale it with RAM up to 1048576 (NVIDIA's gb200 profile sets 524288)"
        )
        return
    yield sysctl(
        "fs.inotify.max_user_watches",
        1048576,
        "tooling that watches checkpoint and dataset trees runs out of watches; 1048576 "
        "is the ceiling newer kernels scale to with RAM, so it never lowers the default",
    )
