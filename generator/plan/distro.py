"""The plan step that applies what the target distribution already does at boot.

One pass, driven by the tables in ``hardware_db/distros/`` (generator/inputs/distro.py), not by
each rule: a sysctl that only raises a ceiling (``KnownKey.at_least``) is left out where the
distribution's own sysctl.d files already set it at least as high, with a note saying so; a
profile override that lowers a distribution default keeps its value and gets a warning. Kernel
keys the distribution kernel carries as a backport count as available on it.

Without a distribution nothing here changes the plan: the bundle stays portable, and
``portable_notes`` says what was not applied (``gen explain``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from generator.inputs.facts import Facts
from generator.model.kinds import Kind
from generator.model.layout import CONTAINERD_DROPIN, kubelet_file
from generator.model.setting import Note, PlanWarning, Setting
from generator.plan.known_keys import KNOWN_SYSCTLS, KnownKey

if TYPE_CHECKING:  # imported by portable_notes alone: a portable `gen` never loads the tables
    from generator.inputs.distro import Backport, Distro, SysctlDefault

DISTRO_RULE = "plan.distro"
LOWERS_CHECK = "distro-default"
NODE_AGENT_CHECK = "distro-node-agent"


def _integer(value: str) -> int | None:
    return int(value) if re.fullmatch(r"-?[0-9]+", value.strip()) else None


def _raised_already(setting: Setting, default: SysctlDefault) -> bool:
    """A rule's ceiling that the distribution's boot-time value already meets."""
    known = KNOWN_SYSCTLS.get(setting.key)
    ours, theirs = _integer(setting.value), _integer(default.value)
    if known is None or not known.at_least or ours is None or theirs is None:
        return False
    return not setting.override and theirs >= ours


def _lowered(setting: Setting, default: SysctlDefault) -> bool:
    """A profile override below the distribution's own numeric default."""
    ours, theirs = _integer(setting.value), _integer(default.value)
    return setting.override and ours is not None and theirs is not None and ours < theirs


def _source(default: SysctlDefault) -> str:
    package = f" ({default.package})" if default.package else ""
    return f"{default.file}{package}"


def restated_in_tuned(setting: Setting, default: SysctlDefault, distro: Distro) -> Setting:
    """The distribution's own value of a sysctl left out, for the bundle's tuned profile.

    The bundle's profile is layered on the image's selection, and tuned merges a base's
    [sysctl] into it (render/tuned.py). A base that sets the key (tuned's openshift:
    vm.max_map_count=262144; mssql, sap-netweaver; vendor profiles, NVIDIA's among them) would
    write its value at every tuned start, below the distribution's where ``reapply_sysctl`` is
    off, and `tuned-adm verify` would fail on every boot where it is on. Restating the value the
    distribution's sysctl.d sets keeps the merged profile equal to the live value: render's
    restatement covers sysctl.d's keys, and this key is no longer in sysctl.d."""
    return Setting(
        Kind.TUNED,
        f"sysctl.{setting.key}",
        default.value,
        f"restates {distro.key}'s value, set in {_source(default)} and at least as high as "
        f"the bundle's {setting.value}: a base tuned profile layered under this one may set "
        f"{setting.key}, and tuned-adm verify checks the merged value",
        setting.rule,
    )


def apply_distro_defaults(
    settings: Iterable[Setting], distro: Distro | None
) -> tuple[list[Setting], list[Note], list[PlanWarning]]:
    """Leave out what the distribution already raises (restated in the bundle's tuned profile,
    when it has one); warn where an override lowers it."""
    settings = list(settings)
    tuned_keys = {s.key for s in settings if s.kind == Kind.TUNED}
    kept: list[Setting] = []
    notes: list[Note] = []
    warnings: list[PlanWarning] = []
    for setting in settings:
        default = distro.sysctl_default(setting.key) if distro else None
        if distro is None or default is None or setting.kind != Kind.SYSCTL:
            kept.append(setting)
            continue
        if _raised_already(setting, default):
            restate = bool(tuned_keys) and f"sysctl.{setting.key}" not in tuned_keys
            notes.append(
                Note(
                    f"sysctl {setting.key} = {setting.value} not emitted: {distro.key} already "
                    f"sets {default.value} at boot in {_source(default)}, at least as high"
                    + ("; the tuned profile restates that value" if restate else ""),
                    rule=setting.rule,
                )
            )
            if restate:
                kept.append(restated_in_tuned(setting, default, distro))
            continue
        if _lowered(setting, default):
            warnings.append(
                PlanWarning(
                    f"override sysctl {setting.key} = {setting.value} lowers {distro.key}'s "
                    f"default {default.value} (set in {_source(default)})",
                    LOWERS_CHECK,
                )
            )
        kept.append(setting)
    return kept, notes, warnings + unread_on_the_node(settings, distro)


def unread_on_the_node(settings: list[Setting], distro: Distro | None) -> list[PlanWarning]:
    """The node files the distribution's own boot agent makes ineffective, said at gen time.

    EKS's nodeadm writes /etc/containerd/config.toml anew at every boot, without the imports
    entry install.sh adds (awslabs/amazon-eks-ami nodeadm/internal/containerd/config.go
    writeContainerdConfig); with /usr/bin/nvidia-container-runtime present it makes "nvidia" the
    default runtime itself (runtime_config_nvidia.go). The table says so
    (containerd.rewritten_at_boot_by). The kubelet drop-in goes into the agent's own --config-dir
    (the plan's kubelet_dir), which nodeadm passes only when the NodeConfig has
    spec.kubelet.config (nodeadm/internal/kubelet/config.go writeKubeletConfig): the table's
    kubelet.config_dir_when, said here where the plan has kubelet settings.
    """
    if distro is None:
        return []
    kinds = {setting.kind for setting in settings}
    warnings: list[PlanWarning] = []
    containerd = distro.containerd
    if Kind.CONTAINERD in kinds and containerd and containerd.rewritten_at_boot_by:
        warnings.append(
            PlanWarning(
                f"{distro.key}: {containerd.rewritten_at_boot_by} writes "
                f"{containerd.config_path} anew at every boot, without the imports entry that "
                f"reads {CONTAINERD_DROPIN}: its runtime settings are not applied there; give "
                "them to that agent's own configuration (or use runtime_config: gpu-operator)"
                + (f"; {containerd.agent_runtimes}" if containerd.agent_runtimes else ""),
                NODE_AGENT_CHECK,
            )
        )
    kubelet = distro.kubelet
    if Kind.KUBELET in kinds and kubelet and kubelet.config_dir and kubelet.config_dir_when:
        warnings.append(
            PlanWarning(
                f"{distro.key}: kubelet reads {kubelet_file(kubelet.config_dir)} only through "
                f"--config-dir={kubelet.config_dir}, which is passed {kubelet.config_dir_when}",
                NODE_AGENT_CHECK,
            )
        )
    return warnings


def release_numbers(release: str) -> tuple[int, ...]:
    """The digit groups of a kernel release, in order: 5.14.0-362.8.1.el9_3 -> 5, 14, 0, 362, ...

    Red Hat's kernel releases grow in these numbers (rpm compares digit segments as numbers), so
    comparing them orders two builds of one distribution kernel line.
    """
    return tuple(int(group) for group in re.findall(r"[0-9]+", release))


def backport_of(distro: Distro | None, kind: str, key: str) -> Backport | None:
    if distro is None:
        return None
    return next((b for b in distro.kernel_backports if b.kind == kind and b.key == key), None)


def has_backport(distro: Distro | None, kind: str, key: str, release: str | None) -> bool:
    """Whether the stated distribution kernel carries ``key`` although its mainline base lacks it.

    Only a stated full release can show it: a bare 5.14 says nothing about the build.
    """
    backport = backport_of(distro, kind, key)
    if backport is None or release is None:
        return False
    return release_numbers(release) >= release_numbers(backport.kernel_release)


def key_available(known: KnownKey, kind: str, key: str, facts: Facts) -> bool:
    """The one availability test (the plan's drop step and its checks): mainline or backport."""
    if known.available(facts.os.kernel, facts.cpu.arch):
        return True
    distro, release = facts.os.distro, facts.os.kernel_release or facts.os.assumed_release
    return known.available(None, facts.cpu.arch) and has_backport(distro, kind, key, release)


def portable_notes(distros: dict[str, Distro] | None = None) -> tuple[Note, ...]:
    """What a plan for no named distribution leaves unapplied, from the shipped tables."""
    from generator.inputs.distro import load_distros

    by_key = {d.key: d for d in (distros or load_distros()).values()}
    notes = []
    for key, distro in sorted(by_key.items()):
        known = [
            *(f"sysctl {d.key}={d.value} ({d.file})" for d in distro.sysctl_defaults),
            *(f"{s.unit} ({s.effect})" for s in distro.governor_services),
            *(
                f"{b.kind} {b.key} backported in {b.kernel_release}"
                for b in distro.kernel_backports
            ),
        ]
        # the portable drop-in runs the daemon in persistence mode on every distribution, but
        # cannot know the packaged user (gpu.persistence): it runs it as root
        persistenced = distro.nvidia.persistenced
        if persistenced is not None and persistenced.user not in (None, "root"):
            known.append(
                f"{persistenced.unit} as its packaged user {persistenced.user} "
                "(the portable drop-in runs the daemon as root)"
            )
        if known:
            notes.append(
                Note(
                    f"no distribution named (--os or os.distro): {key}'s knowledge not applied: "
                    + "; ".join(known),
                    rule=DISTRO_RULE,
                )
            )
    return tuple(notes)
