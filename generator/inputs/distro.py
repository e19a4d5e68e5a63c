"""The shipped distribution knowledge: what Ubuntu, Debian and RHEL already do at boot.

One YAML file per distribution release under ``hardware_db/distros/``, in the style of the
GPU/NIC/CPU catalog: every fact carries a ``source:`` line (a URL, or a package file path and
version), and a fact no source confirms stays empty (``null``) rather than guessed. Rules read
these facts to decide what a bundle must not repeat (a limit the distribution already raises),
what it must override (a vendor service that resets the governor) and how it reaches the boot
loader (a GRUB drop-in, or grubby and BLS entries).

Nothing here is wired into the hardware format or the commands yet; ``load_distros`` and
``resolve_distro`` are the whole interface.
"""

# No `from __future__ import annotations` here: pydantic would have to eval every annotation
# string when the models are defined, which is a measurable part of start-up (bench/bench.py).
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from generator.errors import InputError, Problem
from generator.inputs.schema import StrictModel, validate_model
from generator.inputs.yamlio import read_catalog_entry
from generator.paths import files_ending, hardware_db_dir

# name words, then the release: ubuntu-24.04, rhel-9, amazon-linux-2023 (and its os-release ID,
# amzn-2023, as an alias)
DistroKey = Annotated[
    str, StringConstraints(pattern=r"^[a-z][a-z0-9]*(-[a-z][a-z0-9]*)*-[0-9][0-9.]*$")
]
KernelVersion = Annotated[str, StringConstraints(pattern=r"^[0-9]+\.[0-9]+$")]
# as uname -r prints it, less the architecture: 4.18.0-553.el8_10, 6.12.38+deb13-amd64
KernelRelease = Annotated[
    str, StringConstraints(pattern=r"^[0-9]+\.[0-9]+\.[0-9]+([-+][A-Za-z0-9._+-]+)?$")
]
Line = Annotated[str, StringConstraints(pattern=r"^[^\n]+$")]
Source = Annotated[str, StringConstraints(pattern=r"^[^\n]{10,}$")]
Sources = Annotated[list[Source], Field(min_length=1)]
AbsolutePath = Annotated[str, StringConstraints(pattern=r"^/[A-Za-z0-9._/*+-]+$")]
SysctlKey = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]+(\.[A-Za-z0-9_*-]+)+$")]
KernelArg = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]+(\.[a-z0-9_]+)?$")]
UnitName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9@_.:-]+\.(service|timer)$")]
PackageName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9.+<>-]*$")]

# goldtune's own sysctl drop-in; systemd-sysctl applies files in the order of their names
# across /etc, /run and /usr/lib (sysctl.d(5)), so a vendor file named after it wins.
GOLDTUNE_SYSCTL_FILE = "90-goldtune.conf"


class Kernel(StrictModel):
    """One kernel line the distribution supports for servers (GA, or a hardware-enablement one)."""

    # ga: the release's own kernel; hwe: Ubuntu's hardware-enablement line; backports: Debian's;
    # alternative: another line the vendor ships beside the default (AL2023's kernel6.12)
    track: Literal["ga", "hwe", "backports", "alternative"]
    version: KernelVersion  # the mainline version it is based on
    # The line an unstated os.kernel means, where the lines differ (at most one per table): the
    # kernel a fresh install of the release boots. Tables whose lines share one version need none.
    default: bool = False
    package: PackageName | None = None  # the meta package that installs it
    source: Source
    # The reference key lists (tests/validators/sysctl-keys-<version>.txt, read from a booted
    # kernel) a bundle for this kernel is checked against: a key must be in every one. The list
    # of the same kernel where one was booted, else the nearest older and newer lists, whose
    # common keys the kernel between them has; sysctl_keys_note says which, and why.
    sysctl_keys: list[KernelVersion] = []  # noqa: RUF012 -- pydantic copies field defaults
    sysctl_keys_note: Line | None = None
    # The build (uname -r, less the architecture) an unstated os.kernel means on the line it
    # means: the kernel of the newest minor release the vendor still supports (RHEL 8.10's
    # 4.18.0-553.el8_10), which kernel_backports are judged against. None: a plan with no
    # os.kernel keeps no backport. minor_release: the point release that ships that build.
    release: KernelRelease | None = None
    minor_release: Line | None = None

    @field_validator("release")
    @classmethod
    def _release_of_this_line(cls, release: str | None, info: ValidationInfo) -> str | None:
        version = info.data.get("version")
        if release is not None and version is not None and not release.startswith(version + "."):
            message = "{release} is not a build of the {version} line"
            context = {"release": release, "version": version}
            raise PydanticCustomError("release_of_another_line", message, context)
        return release


class Systemd(StrictModel):
    version: Annotated[int, Field(ge=200, le=999)] | None = None
    package: Line | None = None  # package and version the number was read from
    source: Source


class SysctlDefault(StrictModel):
    """A sysctl value the distribution sets at boot that differs from the kernel's default."""

    key: SysctlKey
    value: Line
    file: AbsolutePath  # the sysctl.d file that sets it
    package: Line | None = None
    source: Source


class LateSysctlFile(StrictModel):
    """A sysctl.d file shipped by the distribution that is applied after goldtune's drop-in."""

    file: AbsolutePath
    link_to: AbsolutePath | Line | None = None  # where it points, when it is a symbolic link
    keys: list[SysctlKey] = []  # what it sets out of the box (empty: nothing until edited)  # noqa: RUF012 -- pydantic copies field defaults
    package: Line | None = None
    source: Source

    @field_validator("file")
    @classmethod
    def _sorts_after_goldtune(cls, file: str) -> str:
        if PurePosixPath(file).name <= GOLDTUNE_SYSCTL_FILE:
            message = "{file} is applied before {ours}, so it cannot override it"
            context = {"file": file, "ours": GOLDTUNE_SYSCTL_FILE}
            raise PydanticCustomError("applied_before_goldtune", message, context)
        return file


class Thp(StrictModel):
    """The transparent huge page mode the distribution kernel boots with (its Kconfig choice)."""

    enabled: Literal["always", "madvise", "never"] | None = None
    source: Source


class InitOnAlloc(StrictModel):
    """Whether the distribution kernel zeroes every page it allocates (INIT_ON_ALLOC_DEFAULT_ON)."""

    default_on: bool | None = None
    source: Source


class Tuned(StrictModel):
    installed_by_default: bool | None = None
    enabled_on_install: bool | None = None  # the package enables tuned.service when installed
    default_profile: Line | None = None  # what a fresh install runs, where confirmed
    # tuned-main.conf: re-apply /etc/sysctl.d, /run/sysctl.d and /etc/sysctl.conf after the
    # profile's [sysctl], so those files win over tuned (/usr/lib/sysctl.d does not)
    reapply_sysctl: bool | None = None
    # where the packaged tuned reads a local profile <dir>/<name>/tuned.conf, so where the bundle
    # writes its own: /etc/tuned up to tuned 2.22 (tuned/consts.py LOAD_DIRECTORIES), only
    # /etc/tuned/profiles from 2.23 on (USER_PROFILES_DIR); generator/model/layout.py. null: the
    # table's releases differ (RHEL 9's minors ship 2.20 to 2.27): the bundle keeps /etc/tuned
    # and install.sh decides on the image (install-lib.sh tuned_place), as for a portable bundle
    profiles_dir: Literal["/etc/tuned", "/etc/tuned/profiles"] | None = "/etc/tuned"
    source: Sources


class BootArgs(StrictModel):
    """How the kernel command line is set persistently on this distribution."""

    mechanism: Literal["grub-dropin", "grubby-bls"]
    reads: Annotated[list[AbsolutePath], Field(min_length=1)]  # what its tools read
    update_command: Line | None = None  # what regenerates the boot configuration
    bls: bool  # GRUB_ENABLE_BLSCFG: each kernel's arguments live in /boot/loader/entries
    source: Sources


class NvidiaUnit(StrictModel):
    """A packaged NVIDIA systemd unit and how it starts."""

    unit: UnitName
    package: Line | None = None
    static: bool | None = None  # no [Install] section: `systemctl enable` does nothing
    enabled_on_install: bool | None = None  # the package's scripts enable it
    started_by: Line | None = None  # what starts it when it is not enabled
    exec_start: Line | None = None
    persistence_mode: bool | None = None  # whether the packaged command leaves persistence on
    source: Sources

    @property
    def program(self) -> str | None:
        """The packaged command's program (its first word), when the command is known."""
        return self.exec_start.split()[0] if self.exec_start else None

    @property
    def user(self) -> str | None:
        """The user the packaged command names with --user (-u); None: it names none (root)."""
        words = (self.exec_start or "").split()
        for index, word in enumerate(words):
            if word.startswith("--user="):
                return word.removeprefix("--user=")
            if word in ("--user", "-u") and index + 1 < len(words):
                return words[index + 1]
        return None


class Nvidia(StrictModel):
    driver_packages: list[Line] = []  # noqa: RUF012 -- pydantic copies field defaults
    repository: Line | None = None  # where those packages come from
    persistenced: NvidiaUnit | None = None
    fabricmanager: NvidiaUnit | None = None
    source: Sources


class Containerd(StrictModel):
    """containerd as the distribution packages it (or as the repository its fleets use does).

    ``major`` decides the configuration goldtune writes: containerd 2.x reads version 3 files and
    the split CRI plugins (io.containerd.cri.v1.runtime / .images), 1.x version 2 and
    io.containerd.grpc.v1.cri. None: not packaged, or not confirmed (see ``notes``).
    """

    package: Line | None = None  # package name and version, as read
    version: Annotated[str, StringConstraints(pattern=r"^[0-9]+\.[0-9]+(\.[0-9]+)?$")] | None = None
    major: Literal[1, 2] | None = None
    config_path: AbsolutePath = "/etc/containerd/config.toml"
    config_shipped: bool | None = None  # the package installs a config.toml of its own
    # What writes config_path anew at every boot (EKS's nodeadm): an imports entry an image
    # adds is gone by the time containerd starts, so a conf.d drop-in is never read.
    rewritten_at_boot_by: Line | None = None
    # What that agent itself configures for GPUs in the file it writes (nodeadm: the nvidia
    # runtime as the default where nvidia-container-runtime is installed), said in the warning
    agent_runtimes: Line | None = None
    source: Sources


class Kubelet(StrictModel):
    """How kubelet reaches this distribution: packaged, or from the Kubernetes repository."""

    package: Line | None = None
    repository: Line | None = None
    cgroup_driver: Literal["systemd", "cgroupfs"] | None = None  # what its packaged config sets
    config_path: AbsolutePath | None = None  # the KubeletConfiguration file it is started with
    # The --config-dir its unit is started with where that is not kubeadm's way (EKS's nodeadm:
    # /etc/kubernetes/kubelet/config.json.d): the bundle's kubelet drop-in goes there, with no
    # kubelet.service drop-in (the agent owns the unit's flags). Only a directory the bundle
    # reader and verify know (generator/model/layout.py KUBELET_DROPIN_DIRS).
    config_dir: (
        Literal["/etc/kubernetes/kubelet.conf.d", "/etc/kubernetes/kubelet/config.json.d"] | None
    ) = None
    # When the agent passes that --config-dir, where not always (nodeadm: only when the node's
    # NodeConfig has spec.kubelet.config): the plan warns that the drop-in is read only then.
    config_dir_when: Line | None = None
    source: Sources


class Cgroups(StrictModel):
    """The cgroup hierarchy the distribution boots: v2 only, or v1/hybrid still possible."""

    v1_supported: bool | None = None  # systemd.unified_cgroup_hierarchy=0 still boots a v1 layout
    source: Sources


class GovernorService(StrictModel):
    """A service the distribution ships that changes the CPU frequency governor after boot."""

    unit: UnitName
    package: Line | None = None
    enabled_by_default: bool | None = None
    effect: Line
    source: Sources


class Backport(StrictModel):
    """A kernel parameter or sysctl the distribution kernel has before mainline had it."""

    key: SysctlKey | KernelArg
    kind: Literal["kernel-arg", "sysctl"]
    mainline: KernelVersion  # first mainline release with it (generator/plan/known_keys.py)
    kernel_release: Line  # the earliest distribution kernel release confirmed to have it
    minor_release: Line | None = None  # the distribution point release that shipped it
    source: Sources


class Distro(StrictModel):
    key: DistroKey
    name: Line
    aliases: list[DistroKey] = []  # noqa: RUF012 -- pydantic copies field defaults
    # <ID>-<VERSION_ID> of /etc/os-release on an install, where it is not the key: the boot
    # preflight checks the image against it (ID or ID_LIKE, and VERSION_ID or a point release
    # of it). A site table that extends a shipped one inherits the shipped one's (its image is
    # that distribution); None: the key.
    os_release: DistroKey | None = None
    family: Literal["debian", "rhel", "amazon"]
    kernels: Annotated[list[Kernel], Field(min_length=1)]
    systemd: Systemd
    sysctl_defaults: list[SysctlDefault] = []  # noqa: RUF012 -- pydantic copies field defaults
    late_sysctl_files: list[LateSysctlFile] = []  # noqa: RUF012 -- pydantic copies field defaults
    thp: Thp
    init_on_alloc: InitOnAlloc
    tuned: Tuned
    boot_args: BootArgs
    nvidia: Nvidia
    containerd: Containerd | None = None
    kubelet: Kubelet | None = None
    cgroups: Cgroups | None = None
    governor_services: list[GovernorService] = []  # noqa: RUF012 -- pydantic copies field defaults
    kernel_backports: list[Backport] = []  # noqa: RUF012 -- pydantic copies field defaults
    notes: str = ""
    sources: Sources

    @field_validator("sysctl_defaults")
    @classmethod
    def _one_default_per_key(cls, defaults: list[SysctlDefault]) -> list[SysctlDefault]:
        keys = [default.key for default in defaults]
        repeated = sorted({key for key in keys if keys.count(key) > 1})
        if repeated:
            message = "names {keys} more than once"
            raise PydanticCustomError("repeated_key", message, {"keys": ", ".join(repeated)})
        return defaults

    @field_validator("kernels")
    @classmethod
    def _one_default_kernel(cls, kernels: list[Kernel]) -> list[Kernel]:
        if sum(kernel.default for kernel in kernels) > 1:
            message = "marks more than one kernel line as the default"
            raise PydanticCustomError("two_defaults", message)
        assumed = _assumed_line(kernels)
        if any(kernel.release and kernel is not assumed for kernel in kernels):
            message = (
                "names a release on a line an unstated os.kernel does not mean: mark that line "
                "default (the release is what a plan with no os.kernel is made for)"
            )
            raise PydanticCustomError("release_not_default", message)
        return kernels

    @property
    def kernel_version(self) -> tuple[int, int] | None:
        """The mainline version of the kernel line marked ``default``, else the one every line
        of this distribution is based on (RHEL 8: 4.18 for its whole life), or None where the
        lines differ and none is marked (Ubuntu's GA and HWE kernels).

        A plan for this distribution with no os.kernel is made for that version: keys newer than
        it are dropped unless ``kernel_backports`` lists them for a stated release.
        """
        marked = [kernel.version for kernel in self.kernels if kernel.default]
        versions = set(marked) or {kernel.version for kernel in self.kernels}
        if len(versions) != 1:
            return None
        major, minor = next(iter(versions)).split(".")
        return int(major), int(minor)

    @property
    def assumed_release(self) -> str | None:
        """The kernel build a plan with no os.kernel is made for (the default line's
        ``release``), against which kernel_backports are judged; None: none stated."""
        line = _assumed_line(self.kernels)
        return line.release if line else None

    @property
    def assumed_minor_release(self) -> str | None:
        line = _assumed_line(self.kernels)
        return line.minor_release if line else None

    def sysctl_default(self, key: str) -> SysctlDefault | None:
        """The distribution's boot-time value of ``key``, or None where it keeps the kernel's."""
        return next((default for default in self.sysctl_defaults if default.key == key), None)


def _assumed_line(kernels: list[Kernel]) -> Kernel | None:
    """The kernel line an unstated os.kernel means: the one marked default, else the only one."""
    marked = [kernel for kernel in kernels if kernel.default]
    if marked:
        return marked[0]
    return kernels[0] if len(kernels) == 1 else None


def distros_dir() -> Path:
    return hardware_db_dir() / "distros"


def _load_file(path: Path) -> Distro:
    return _checked(read_catalog_entry(path.parent.parent, path), path)


def _checked(data: dict[str, Any], path: Path) -> Distro:
    distro = validate_model(Distro, data, str(path))
    if distro.key != path.stem:
        message = f"{distro.key!r} does not match the file name {path.stem!r}"
        raise InputError(Problem(str(path), "key", message))
    return distro


def _index(distros: list[tuple[Path, Distro]]) -> dict[str, Distro]:
    """Every key and alias to its distribution; a name claimed twice is an error."""
    by_name: dict[str, Distro] = {}
    for path, distro in distros:
        for index, name in enumerate([distro.key, *distro.aliases]):
            owner = by_name.setdefault(name, distro)
            if owner is not distro:
                where = "key" if index == 0 else f"aliases[{index - 1}]"
                message = f"{name!r} already names {owner.key}"
                raise InputError(Problem(str(path), where, message))
    return by_name


def load_distros(root: Path | None = None) -> dict[str, Distro]:
    """Every distribution in ``root`` (default: the shipped table), by key and by alias."""
    folder = root or distros_dir()
    return _index([(path, _load_file(path)) for path in sorted(folder.glob("*.yaml"))])


# What a site table that extends a shipped one must still say itself: it is another table, and
# its facts are cited by its authors. aliases are not inherited (they would name the shipped one).
OWN_FIELDS = ("key", "name", "sources")


def _extended(data: dict[str, Any], path: Path, shipped: dict[str, Distro]) -> dict[str, Any]:
    """A site table with ``extends: <shipped key or alias>``: the shipped table's fields, each
    top-level field the site table names replacing it whole (a list or a mapping is not merged),
    less the shipped aliases; its os_release is the shipped table's unless it names one."""
    base = data["extends"]
    found = shipped.get(base.strip().lower()) if isinstance(base, str) else None
    if found is None:
        known = ", ".join(sorted({d.key for d in shipped.values()}))
        message = f"{str(base)!r:.40} is not a shipped distribution (extends names one)"
        raise InputError(Problem(str(path), "extends", message, "shipped: " + known))
    missing = [field for field in OWN_FIELDS if field not in data]
    if missing:
        message = (
            "required field is missing: a table that extends another names its own key, name "
            "and sources"
        )
        raise InputError([Problem(str(path), field, message) for field in missing])
    own = {field: value for field, value in data.items() if field != "extends"}
    inherited = {"aliases": [], "os_release": found.os_release or found.key}
    return {**found.model_dump(), **inherited, **own}


def _site_table(path: Path, shipped: dict[str, Distro]) -> Distro:
    data = read_catalog_entry(path.parent.parent, path)  # site/distros/<key>.yaml
    return _checked(_extended(data, path, shipped) if "extends" in data else data, path)


def _refuse_shipped_names(path: Path, distro: Distro, shipped: dict[str, Distro]) -> None:
    """A site table adds a distribution; a key or alias a shipped table answers to is refused."""
    for index, name in enumerate([distro.key, *distro.aliases]):
        owner = shipped.get(name)
        if owner is not None:
            where = "key" if index == 0 else f"aliases[{index - 1}]"
            message = (
                f"{name!r} is already the shipped distribution {owner.key} (hardware_db/"
                "distros/): a site table adds a distribution, it does not redefine one; give "
                f"it its own key and aliases (extends: {owner.key} starts from the shipped one)"
            )
            raise InputError(Problem(str(path), where, message))


def load_site_distros(site: Path | None) -> dict[str, Distro]:
    """The shipped tables and a site catalog's (``site``/distros/*.yaml, `gen --catalog`), by key
    and alias. A site table is validated as a shipped one is, or extends a shipped one
    (``extends:``); a name a shipped table or another site table already has is refused."""
    shipped = load_distros()
    if site is None:
        return shipped
    tables = [
        (path, _site_table(path, shipped)) for path in files_ending(site / "distros", ".yaml")
    ]
    for path, distro in tables:
        _refuse_shipped_names(path, distro, shipped)
    return {**shipped, **_index(tables)}


def tables(distros: dict[str, Distro]) -> list[Distro]:
    """Each table once, by key (``distros`` maps keys and aliases to them)."""
    return sorted({distro.key: distro for distro in distros.values()}.values(), key=_key)


def _key(distro: Distro) -> str:
    return distro.key


def resolve_distro(
    name: str, distros: dict[str, Distro], source: str = "--os", path: str = ""
) -> Distro:
    """The distribution called ``name``; an unknown name is one line listing the known ones.

    ``source`` and ``path`` say where the name was written (a command-line option, or a
    hardware file and its field path), so the error points there.
    """
    distro = distros.get(name.strip().lower())
    if distro is None:
        message = f"unknown distribution {name!r:.40}"
        raise InputError(Problem(source, path, message, "known: " + ", ".join(sorted(distros))))
    return distro
