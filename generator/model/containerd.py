"""containerd's two configuration forms, and which one a drop-in is written and read in.

containerd 1.6 and 1.7 read version 2 files: the CRI plugin is ``io.containerd.grpc.v1.cri`` and
its runtimes sit under its ``containerd`` table. containerd 2.x reads version 3, where the CRI
plugin is split: the runtimes moved to ``io.containerd.cri.v1.runtime`` (same ``containerd``
subtree), images to ``io.containerd.cri.v1.images``, and ``io.containerd.grpc.v1.cri`` keeps only
the streaming server (containerd v2.1.9 plugins/cri/runtime/plugin.go configMigration and
migrateConfig; plugins/cri/cri.go configMigration). 1.7 refuses a merged version 3 ("unsupported
config version", v1.7.24 services/server/config/config.go ValidateV2); 1.6 accepts it and ignores
the v3 plugin ids (measured: containerd 1.6.20's `config dump` keeps default_runtime_name "runc").

Why a drop-in's version must be the version of the config.toml that imports it (containerd
v2.0.0 to v2.2.x, cmd/containerd/server/config/config.go LoadConfig and mergeConfig; server.go
New and command/config.go dumpConfig):

- LoadConfig migrates only a version 0/1 file by itself; version 2 and 3 files are merged as
  they are, with mergo.WithOverride, so the merged ``version`` is that of the last file read
  (config.toml first, then its imports in glob order).
- The v2 to v3 plugin migration then runs once, on the merged configuration, and only when that
  merged version is below 3. migrateConfig copies a v2 key only where the v3 table lacks it
  ("if _, ok := newContainerdConf[k]; !ok"), a whole ``runtimes`` map at a time.

So a version 2 drop-in under a version 3 config.toml (what `containerd config default` prints,
with ``default_runtime_name = 'runc'`` and ``runtimes.runc``) loses both default_runtime_name and
every runtime it adds; a version 3 drop-in under a version 2 config.toml (Debian's containerd
2.1.9+ds1-5 package ships one, with its CNI bin_dir) makes the merged version 3, so nothing of
config.toml's CRI tables is migrated ("Ignoring unknown key in TOML for plugin ... key=cni").
containerd 2.3.0 to 2.3.4 migrate each file by itself before merging it (LoadConfigWithPlugins,
commit 0d7fee06, "Update plugin config migration to run on load") but refuse outright a drop-in
whose version is higher than the root config's ("drop-in config version %d higher than root
config version %d", commit 21248d00, reverted on main after v2.3.4 by a8ed5466). Each
mismatch of 2.0-2.2 was measured with containerd 2.1.9 (tests/test_wiring_containerd2.py).
Hence install.sh writes the drop-in in the version of the image's config.toml (a header rename:
the runtime plugin moves ``containerd.*`` unchanged, migrateConfig) and the bundle's own form is
the target's: version 3 where the target ships containerd 2, version 2 where it ships 1.x or is
not named.

containerd 2.x also merges plugin tables key by key (commit a21e379b, "Allow sections of Plugins
to be merged, and not overwritten as entire sections", in v2.0.0), where 1.x replaces a plugin's
whole table with the imported file's (containerd issue 5837): only a version 2 config.toml's CRI
tables need carrying into the drop-in.
"""

from __future__ import annotations

from collections.abc import Iterable

# The CRI runtime options' table in each form; the keys under it are the same in both.
CRI_RUNTIME_V2 = 'plugins."io.containerd.grpc.v1.cri".containerd'
CRI_RUNTIME_V3 = 'plugins."io.containerd.cri.v1.runtime".containerd'
CRI_RUNTIME = {2: CRI_RUNTIME_V2, 3: CRI_RUNTIME_V3}
# Keys of the v2 ``containerd`` table that the v3 migration moves elsewhere (to the images
# plugin, or renamed): a drop-in carrying one of them is not a plain header rename.
NOT_RENAMED = frozenset(
    {"snapshotter", "disable_snapshot_annotations", "discard_unpacked_layers", "sandbox_mode"}
)


def config_version(major: int | None) -> int:
    """The configuration version goldtune writes for a containerd major: 3 for 2.x, else 2
    (1.x, or no target named: 1.6 and 1.7 read version 2, and install.sh rewrites it as version 3
    where the image's config.toml is version 3)."""
    return 3 if major == 2 else 2


def cri_runtime_table(major: int | None) -> str:
    """The table of the CRI runtime options (default_runtime_name, runtimes.*) for a major."""
    return CRI_RUNTIME[config_version(major)]


def version_of_keys(keys: Iterable[str]) -> int:
    """The version a drop-in of these dotted keys is in: 3 when one is under a v3-only plugin."""
    return 3 if any(key.startswith(CRI_RUNTIME_V3 + ".") for key in keys) else 2


def key_in_version(key: str, version: object) -> str:
    """``key`` as a file (or a `config dump`) of ``version`` spells it: the CRI runtime table
    renamed, every other key as it is. A dump of 2.x is always version 3 (migrated), of 1.x 2."""
    want, other = (
        (CRI_RUNTIME_V3, CRI_RUNTIME_V2) if version == 3 else (CRI_RUNTIME_V2, CRI_RUNTIME_V3)
    )
    if key == other or key.startswith(other + "."):
        return want + key[len(other) :]
    return key


def version_mismatch(config: object, dropin: object) -> str | None:
    """Why a drop-in of version ``dropin`` imported by a config.toml of version ``config`` does
    not take effect as written; None when they agree (or either is not 2 or 3)."""
    if config not in (2, 3) or dropin not in (2, 3) or config == dropin:
        return None
    if dropin == 3:
        return (
            "a version 3 drop-in under a version 2 config.toml: containerd 2.3 refuses it, 2.0-2.2 "
            "read the merged configuration as version 3 and leave config.toml's CRI tables "
            "unmigrated, 1.x does not read version 3; install.sh writes it as version 2"
        )
    return (
        "a version 2 drop-in under a version 3 config.toml: containerd 2.0-2.2 migrate it into "
        "config.toml's CRI runtime table only where that lacks the key (its default_runtime_name "
        "and runtimes win); install.sh writes it as version 3"
    )
