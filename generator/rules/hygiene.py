"""Headless server hygiene: modules and services a GPU server never needs."""

from __future__ import annotations

from generator.inputs.facts import Facts
from generator.inputs.profile import Profile
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
