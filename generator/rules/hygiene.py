"""Headless server hygiene: modules and services a GPU server never needs, and the node's
report to the fleet's monitoring (opt-in)."""

from __future__ import annotations

from generator.inputs.facts import Facts
from generator.inputs.profile import Profile
from generator.model.layout import (
    METRICS_TIMER,
    METRICS_UNIT,
    NFD_FEATURE_FILE,
    NFD_PREFLIGHT_FILE,
    NODE_LABELS_UNIT,
    TEXTFILE,
)
from generator.rules.base import Output, blacklist, rule, service

UNNEEDED_MODULES = ("bluetooth", "btusb", "joydev", "snd_hda_intel", "uvcvideo")
UNNEEDED_SERVICES = (
    "ModemManager.service",
    "apport.service",
    "avahi-daemon.service",
    "avahi-daemon.socket",
    "bluetooth.service",
    "cups.service",
    "cups.socket",
    "whoopsie.service",
)
WHY = (
    "a headless GPU server never uses it: smaller attack surface and a faster boot; "
    "no effect on performance"
)


@rule("hygiene.modules")
def modules(facts: Facts, profile: Profile) -> Output:
    """Blacklist desktop hardware drivers (Bluetooth, sound, webcams, joysticks)."""
    if not profile.headless:
        return
    for module in UNNEEDED_MODULES:
        yield blacklist(module, WHY)


@rule("hygiene.services")
def services(facts: Facts, profile: Profile) -> Output:
    """Disable desktop and crash-report services (a unit the image lacks is skipped)."""
    if not profile.headless:
        return
    for unit in UNNEEDED_SERVICES:
        yield service(unit, "disable", WHY)


@rule("hygiene.prometheus-textfile")
def prometheus_textfile(facts: Facts, profile: Profile) -> Output:
    """Report the bundle and its state to node_exporter's textfile collector (opt-in).

    Knob prometheus_textfile (default false). Nodes have neither goldtune nor the bundle
    directory, so `gen verify` cannot run there; a fixed shell script writes what the node knows:
    goldtune_bundle_info (name, version, content digest: the same series `gen verify --format
    prometheus` prints on the build host), goldtune_unit_failed per boot unit of the bundle, and
    the boot-time preflight's state and mismatches. A timer runs it one minute after boot and
    every 15 minutes, off the boot's critical path; the file is written to a temporary name and
    renamed, as node_exporter's README.textfile asks, in Debian's textfile directory.
    """
    if not profile.prometheus_textfile:
        return
    yield service(
        METRICS_TIMER,
        "enable",
        f"the profile asks for the node's report to Prometheus: {METRICS_UNIT} writes {TEXTFILE} "
        "(the bundle's digest, its boot units' state, the preflight's mismatches) after boot and "
        "every 15 minutes, for node_exporter's textfile collector",
    )


@rule("hygiene.nfd-features")
def nfd_features(facts: Facts, profile: Profile) -> Output:
    """Label the node for Node Feature Discovery with its bundle and preflight state (opt-in).

    Knob nfd_features (default false). NFD's local source turns each line of a file in its
    features.d directory into a node label (node-feature-discovery docs/usage/
    customization-guide.md, "Local feature source"; source/local/local.go parseFeatureFile): the
    bundle writes its name, version and digest there at generation, and a boot unit writes the
    preflight's state beside it, so schedulers and the GPU Operator can select nodes whose
    hardware matches their bundle.
    """
    if not profile.nfd_features:
        return
    yield service(
        NODE_LABELS_UNIT,
        "enable",
        f"the profile asks for NFD labels: {NFD_FEATURE_FILE} names the bundle, and "
        f"{NODE_LABELS_UNIT} writes the preflight's state to {NFD_PREFLIGHT_FILE} at boot",
    )
