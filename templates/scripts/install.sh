#!/bin/sh
# Installs a bundle's root-filesystem overlay (a fixed script, identical in every bundle; what it
# installs comes from install.list beside it).
#
# Usage: install.sh [--root DIR] [--image-build] [--strict] [--no-block] | --check [--pubkey FILE] | --uninstall [--root DIR]
#   (no option)   install into this running system and apply what can be applied now (live)
#   --root DIR    install into the root filesystem mounted at DIR: an image build (below)
#   --image-build this system is an image being built (a Packer build VM, a package's postinst
#                 in an image pipeline): install into / as an image build (below)
#   --strict      fail (exit 1, nothing installed) when the target lacks something the plan
#                 needs (the "require" lines: the NVIDIA driver, fabric manager, tuned...)
#   --no-block    live: every unit start, restart and stop (enable --now, try-restart) queues
#                 its job and does not wait for it (systemctl --no-block), so a failed start
#                 is not seen here. For a caller inside the boot transaction (a set's selector,
#                 <tool>-select.service): a unit ordered after it, or after a unit that waits
#                 for it, would never start while this waits
#   --check       validate install.list and that the bundle has every file it lists; install nothing
#   --pubkey FILE with --check: also verify the bundle's signed provenance (gen sign) with this
#                 public key (PEM, ECDSA P-256) and that every file is as it says (openssl, below)
#   --uninstall   take back what an install did, as an image build (nothing started or stopped):
#                 every file of the install record removed (its units disabled first, the
#                 image's own nccl.conf put back, containerd's imports entry taken back), the
#                 kernel arguments of the record removed, the tool's tuned profile dropped from
#                 the selection (the files gone when nothing else is left in it), the record
#                 and its directory removed, and every directory of the tool's own
#                 (/etc/<tool>, its tuned profiles', /usr/lib/<tool>...) that this left empty.
#                 Units of the image the bundle enabled or masked are left as they are (their
#                 state before is not recorded), and said so. A package's prerm and %preun run
#                 it before the package's files are removed.
#
# An image build is also detected without --image-build: --root DIR other than /, / in a chroot
# (systemd-detect-virt --chroot, or / is not the root of process 1), or no systemd running. It
# installs the same files; units are enabled, disabled and masked without being started or
# stopped (with --root DIR their [Install] links made by this script, see unit_links; on /,
# systemctl without --now); no activation step runs (sysctl,
# udev, modules, tuned-adm: systemd and tuned apply the files at boot); the boot arguments are
# written for the next boot; a missing unit or tool is reported, not fatal (unless --strict);
# the end of the run lists what was deferred to first boot.
#
# install.list, written by the generator: lines of TAB-separated words, each data line preceded
# by its "# <rule id>: <reason>" comment where a rule decided it ("#" lines and blank lines are
# comments). Every line is validated before anything is written; words are data, never code.
#   tool <name>                      message prefix; scope of stale files (/etc/*<name>*, libexec)
#   bundle <hardware> <profile>      the bundle's label
#   record <path>                    where the list of installed files is kept in the target
#   file <mode> <path>               install rootfs<path> at <path> with <mode>
#   text <path> <word>               write <word> and a newline to <path>
#   service enable|disable|mask <unit>
#   step <name> [<word>]             an activation step on a live system (one step_<name> each)
#   kernel-arg <word>                a kernel argument of the bundle (see "Boot arguments")
#   tuned <profile>                  the bundle's tuned profile, layered on the selected one
#   kernel-args-reboot once          an image's boot check reboots once when an argument is
#                                    not in effect (the profile's reboot_for_kernel_args)
#   require unit|command <name>      the target must carry this unit or command for the plan to
#                                    take effect (checked in every mode; --strict fails on it)
#
# Boot arguments, per mechanism, detected in the target (live or image build). What the tool added is
# kept in <record dir>/kernel-args (one argument a line), so a later bundle removes what it no
# longer carries:
#   GRUB drop-in (Debian, Ubuntu): the drop-in of the overlay carries the arguments; live, and in
#       an image build of / (a Packer build VM), update-grub regenerates grub.cfg if the image has
#       it; with --root DIR on a filesystem of its own (the image's disk mounted there) the
#       image's update-grub runs chrooted, as image builders run it (grub_chrooted); otherwise
#       (a directory, another architecture) nothing of the image runs here:
#       <tool>-update-grub.service, written and enabled in the image, runs its update-grub once
#       at first boot (a marker in the record directory), and the arguments are in effect from
#       the boot after.
#   bootc (an image build of a bootc / ostree image: /usr/lib/bootc, or
#       /usr/lib/ostree/prepare-root.conf): /usr/lib/bootc/kargs.d/90-<tool>.toml, which bootc
#       applies when the image is installed or updated (boot_bootc).
#   BLS (RHEL 9: GRUB_ENABLE_BLSCFG=true or /boot/loader/entries/*.conf): live, grubby
#       --update-kernel=ALL --args=... --remove-args=...; in an image build, the options lines of the BLS
#       entries are edited as text, a grub variable word ($tuned_params) kept where it stands.
#       Both modes edit /etc/kernel/cmdline, which kernel-install reads for kernels installed
#       later (seeded from the newest entry, less its variables, when absent; not where the
#       entry says $kernelopts, RHEL 8's, whose words are in /boot/grub2/grubenv). A list argument
#       (modprobe.blacklist, rd.driver.blacklist, module_blacklist: list_keys) of the bundle's
#       carries the image's elements first, then its own.
#       GRUB_CMDLINE_LINUX of /etc/default/grub gets the same edit: RHEL 9.0-9.2's grub2-mkconfig
#       rewrites every entry's options from it (9.3 made that opt-in, --update-bls-cmdline: RHEL
#       9.3 release notes, RHELDOCS-16752). Live, grubby --update-kernel=ALL edits it itself
#       (grubby-bls since grubby 8.40-41, unless --no-etc-grub-update: grubby(8)); in an image
#       build it is edited as text here (edit_grub_default).
# tuned: active_profile becomes "<the selected profiles, the tool's dropped> <the bundle's>";
#   tuned merges the profiles of active_profile left to right, the later one winning
#   (redhat-performance/tuned 2bfa4423, tuned/profiles/loader.py load(), merger.py merge()). The
#   selection found before the tool's first install is kept in <record dir>/tuned-previous: to
#   restore it, write that line to /etc/tuned/active_profile (or `tuned-adm profile <it>`).
#   A bundle without a profile (tuned: off) whose install record lists one takes the tool's out
#   of the selection as --uninstall does (tuned_unlayer), and tuned-previous with them; when none
#   is left, the selection files go and tuned loads its recommended profile (live: tuned-adm
#   auto_profile). A record that lists none (a bundle set's) leaves the selection alone: the
#   profile there is another record's (the set's member's).
#   The profile's file goes where the target's tuned reads local profiles (tuned_place):
#   /etc/tuned/profiles/<name> when it has /usr/lib/tuned/profiles (tuned 2.23+), else
#   /etc/tuned/<name> when it has /usr/lib/tuned, else the bundle's path; the record lists it.
#
# With --root, nothing outside DIR is ever written or removed: every directory of a target path
# is resolved inside DIR (a symbolic link that leaves it, absolute or relative, is refused),
# temporary files are created with mktemp beside their target, a link at a target is replaced,
# never followed, the links of the units' [Install] sections are made the same way (never by
# `systemctl --root`, which writes through such links), and the install record found in the
# image is validated (at most 1024 lines and 64 KiB, each line a file the tool installs:
# stale_candidate) before it is used. A removal, with --root or on /, passes no link at any
# directory of its path, even one that stays inside the root (resolve_dir unlinked, removable).
# Idempotent: a second run changes nothing and says so. A service the target does not have is
# reported and skipped. Exit status: 0 done, 1 a step failed, a path was refused or (--strict)
# the target lacks what the plan needs, 2 bad usage.
set -eu
umask 022
LC_ALL=C
export LC_ALL

tool=install.sh

# The functions a first boot runs too are install-lib.sh's, beside this script: cloud-init's
# first-boot script sources the same file. It is code run as root, so before it is sourced it is
# checked as the bundle's input: a regular file (no link, no FIFO), owned by root, the user
# running this or the user sudo ran it for (SUDO_UID: Packer's shell provisioner uploads the
# bundle as its SSH user and runs `sudo sh install.sh`; that user can run anything as root),
# writable by its owner only, and its sha256 the one manifest.json lists for it (a regular file
# of at most 1 MiB); else one line and exit 2 (an empty or CRLF library included).
bundle=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd -P)
library=$bundle/install-lib.sh
refuse_library() {
    printf '%s\n' "$tool: error: $library: $1; nothing installed" >&2
    exit 2
}
if [ ! -f "$library" ] || [ -L "$library" ]; then
    printf '%s\n' "$tool: error: bundle is incomplete: install-lib.sh is missing" >&2
    exit 2
fi
case $(stat -c %u -- "$library") in
    0 | "$(id -u)" | "${SUDO_UID:-0}") ;;
    *) refuse_library "not owned by root, by the user running install.sh or by the user sudo ran it for" ;;
esac
case $(stat -c %a -- "$library") in *[2367]? | *[2367]) refuse_library "writable by its group or by others" ;; esac
manifest=$bundle/manifest.json
if [ ! -f "$manifest" ] || [ -L "$manifest" ] || [ "$(stat -c %s -- "$manifest")" -gt 1048576 ]; then
    refuse_library "manifest.json, which lists its digest, is missing or not a regular file of at most 1 MiB"
fi
listed=$(tr -d ' \t\r\n' <"$manifest" | sed -n 's/.*{"mode":"0644","path":"install-lib\.sh","sha256":"\([0-9a-f]\{64\}\)"}.*/\1/p')
[ -n "$listed" ] || refuse_library "manifest.json lists no sha256 for it"
digest=$(sha256sum <"$library") || refuse_library "cannot compute its sha256"
[ "${digest%% *}" = "$listed" ] || refuse_library "its sha256 is not the one manifest.json lists (an edited, empty or CRLF copy)"
# shellcheck source=install-lib.sh source-path=SCRIPTDIR
. "$library"

usage() {
    printf '%s\n' "usage: install.sh [--root DIR] [--image-build] [--strict] [--no-block] | --check [--pubkey FILE] | --uninstall [--root DIR]" >&2
    exit "$1"
}

# --- the data -----------------------------------------------------------------------------------

bad_data() { # line-number message
    die "$list: line $1: $2; nothing installed" 2
}

is_unit() {
    case $1 in '' | *[!A-Za-z0-9@_.:\\-]*) return 1 ;; esac
    return 0
}

is_command_name() { # a program name looked up in the target's bin directories (no '/')
    case $1 in '' | .* | *[!A-Za-z0-9_.+-]*) return 1 ;; esac
    return 0
}

# read_list: every line checked, then kept in newline-separated lists (words have no blanks).
read_list() {
    files='' texts='' services='' steps='' kernel_args='' record='' label='' tuned_profile=''
    needs='' args_reboot=''
    number=0
    while IFS= read -r line || [ -n "$line" ]; do
        number=$((number + 1))
        case $line in '' | '#'*) continue ;; esac
        # split on TABs into at most four fields
        saved_ifs=$IFS
        IFS=$tab
        set -f
        # shellcheck disable=SC2086 # splitting on TABs is the point; globbing is off
        set -- $line
        set +f
        IFS=$saved_ifs
        key=$1
        shift
        read_line "$@"
    done <"$list"
    [ "$tool" != install.sh ] || bad_data "$number" "no tool line"
    [ -n "$record" ] || bad_data "$number" "no record line"
}

read_line() { # the fields after the key
    case $key:$# in
        tool:1)
            case $1 in '' | *[!A-Za-z0-9_-]*) bad_data "$number" "not a tool name" ;; esac
            tool=$1
            ;;
        bundle:2)
            { is_word "$1" && is_word "$2"; } || bad_data "$number" "not a bundle label"
            label="$1 / $2"
            ;;
        record:1)
            is_path "$1" || bad_data "$number" "not a plain absolute path"
            record=$1
            ;;
        file:2)
            case $1 in 0[0-7][0-7][0-7]) ;; *) bad_data "$number" "not an octal mode" ;; esac
            is_path "$2" || bad_data "$number" "not a plain absolute path"
            files="$files$1 $2$newline"
            ;;
        text:2)
            { is_path "$1" && is_word "$2"; } || bad_data "$number" "not a path and a word"
            texts="$texts$1 $2$newline"
            ;;
        service:2)
            case $1 in enable | disable | mask) ;; *) bad_data "$number" "not enable, disable or mask" ;; esac
            is_unit "$2" || bad_data "$number" "not a unit name"
            services="$services$1 $2$newline"
            ;;
        step:1 | step:2)
            case $1 in
                sysctl | modules | udev) [ $# -eq 1 ] || bad_data "$number" "step $1 takes no word" ;;
                tmpfiles) { [ $# -eq 2 ] && is_path "$2"; } || bad_data "$number" "step tmpfiles needs a path" ;;
                runtime) { [ $# -eq 2 ] && is_runtime_parts "$2"; } || bad_data "$number" "step runtime needs containerd, docker, kubelet or persistenced" ;;
                *) bad_data "$number" "unknown step" ;;
            esac
            steps="$steps$1 ${2:-}$newline"
            ;;
        kernel-arg:1)
            is_word "$1" || bad_data "$number" "not a kernel argument"
            kernel_args="${kernel_args:+$kernel_args }$1"
            ;;
        kernel-args-reboot:1)
            [ "$1" = once ] || bad_data "$number" "kernel-args-reboot takes once"
            args_reboot=--reboot-once
            ;;
        tuned:1)
            is_profile "$1" || bad_data "$number" "not a tuned profile name"
            tuned_profile=$1
            ;;
        require:2)
            case $1 in
                unit) is_unit "$2" || bad_data "$number" "not a unit name" ;;
                command) is_command_name "$2" || bad_data "$number" "not a command name" ;;
                *) bad_data "$number" "require takes unit or command" ;;
            esac
            needs="$needs$1 $2$newline"
            ;;
        *) bad_data "$number" "unknown key, or the wrong number of fields" ;;
    esac
}

# --- paths inside the target root ---------------------------------------------------------------

# merge_nccl_conf: NCCL reads this one path (after ~/.nccl.conf), RCCL its /etc/rccl.conf (after
# ~/.rccl.conf; the same reading, ROCm/rccl src/misc/param.cc), and an image may carry its own:
# Azure's NDv5 images set NCCL_TOPO_FILE and NCCL_IB_PCI_RELAXED_ORDERING there, and losing
# them gives NCCL the wrong topology. So the image's own lines are kept after the bundle's: NCCL
# takes a name's first assignment (src/misc/param.cc setEnvFile, setenv without overwrite), so
# ours win; the image's lines for a name the bundle sets are dropped all the same (a reader of
# the file sees one value). The image's file is kept once, before the first install, at
# <record dir>/nccl.conf.image (rccl.conf.image), and every later install merges from it (never
# from a merged file); a later bundle without NCCL settings puts it back (restore_nccl_conf). It
# is read as data: a regular file only (a link or FIFO is replaced as any target is), at most
# $nccl_conf_limit bytes (a larger one is left as it is), never run; a line with a byte other
# than printable ASCII or a tab (a CR may end it) is dropped from the merged file, never echoed,
# and stays in the kept original. $source becomes the merged file.
nccl_conf_limit=65536

# keep_nccl_conf_image PATH KEPT: the image's PATH copied to KEPT (mode kept); 1 when it is larger
# than the bound or cannot be read (nothing kept).
keep_nccl_conf_image() {
    target_of "$1" create
    image_file=$target
    target_of "$2" create
    temporary=$(mktemp -- "$dir/.${target##*/}.$tool-tmp.XXXXXX") || die "cannot create a temporary file in $dir"
    if ! head -c $((nccl_conf_limit + 1)) -- "$image_file" >"$temporary" ||
        [ "$(stat -c %s -- "$temporary")" -gt "$nccl_conf_limit" ] ||
        ! chmod "$(stat -c %a -- "$image_file")" "$temporary"; then
        rm -f -- "$temporary"
        return 1
    fi
    mv -f -- "$temporary" "$target"
}

merge_nccl_conf() { # path-in-root
    kept=$(nccl_conf_image "$1")
    status=0
    contents_of "$kept" || status=$?
    if [ "$status" -eq 1 ]; then
        # none kept yet: the file in place is the image's unless an earlier install wrote it
        target_of "$1" create
        { [ -f "$target" ] && [ ! -L "$target" ]; } || return 0
        if ours_in_place "$1"; then
            target_of "$1" create
            return 0
        fi
        if ! keep_nccl_conf_image "$1" "$kept"; then
            target_of "$1" create
            say "$1: the image's nccl.conf is larger than $nccl_conf_limit bytes or unreadable: left as it is, the bundle's NCCL settings not installed"
            failed=$((failed + 1))
            return 1
        fi
        say "kept the image's own $1 at $kept (put back when a bundle no longer sets NCCL variables)"
    elif [ "$status" -eq 2 ]; then
        target_of "$1" create
        say "$kept is not a plain file; it was not used: the bundle's $1 installed alone"
        failed=$((failed + 1))
        return 0
    fi
    target_of "$kept" existing
    # NUL becomes \001 so that grep reads text and the line is dropped as unusual
    plain=$(mktemp) || die "cannot create a temporary file"
    cr=$(printf '\r')
    head -c "$nccl_conf_limit" -- "$target" | tr '\000' '\001' >"$plain"
    total=$(grep -a -c '' -- "$plain") || true
    lines=$(grep -a -E -x "[	 -~]*$cr?" -- "$plain") || true
    names=$(sed -n 's/^\([A-Za-z0-9_][A-Za-z0-9_]*\)=.*/\1/p' -- "$source" | tr '\n' ' ')
    set -f
    for name in $names; do
        lines=$(printf '%s\n' "$lines" | grep -a -v -e "^$name=") || true
    done
    set +f
    rm -f -- "$plain"
    merged=$(mktemp) || die "cannot create a temporary file"
    {
        cat -- "$source"
        printf '\n%s\n' "# The image's own lines, kept by $tool after the bundle's: NCCL takes a name's first value"
        [ -z "$lines" ] || printf '%s\n' "$lines"
    } >"$merged"
    kept_lines=0
    [ -z "$lines" ] || kept_lines=$(printf '%s\n' "$lines" | grep -a -c '')
    target_of "$1" create
    say "merging the image's own $1 after the bundle's lines: $kept_lines of its $total lines kept; dropped: its lines for the names the bundle sets (${names% }) and any with bytes other than printable ASCII"
    source=$merged
}

# --- containerd: the drop-in read through config.toml's imports ---------------------------------

# containerd reads a conf.d file only through an `imports` entry of the config file it loads:
# LoadConfig follows the imports of each file it loaded, nothing else (1.6/1.7
# services/server/config/config.go, 2.x cmd/containerd/server/config/config.go); with no
# config.toml it loads nothing at all. 2.2 only added the entry to what `containerd config
# default` prints (PR 12323); Debian 12 (1.6) and Ubuntu (1.7) ship a config.toml without it. So
# the entry is added to the image's config.toml (or a minimal one written), and the entry the
# tool added is kept in <record dir>/containerd-import, so that a bundle without the drop-in
# takes it back. And 1.x replaces a plugin's whole table with the table of a file imported later
# (mergeConfig: "Replace entire sections instead of merging map's values", containerd issue
# 5837): the image's own [plugins."io.containerd.grpc.v1.cri"...] tables (Debian's CNI bin_dir)
# would be lost, so they are carried into the drop-in, after the bundle's keys, as NVIDIA's
# nvidia-ctk does for its drop-in (nvidia-container-toolkit PR 1311).
# containerd 2.x merges plugin tables key by key (v2.0.0, commit a21e379b): nothing is carried
# under a version 3 config.toml, which only 2.x reads (1.7 refuses it). But 2.0 to 2.2 merge
# every file's `version` too (the last file read wins) and migrate the merged configuration
# once, and 2.3 refuses a drop-in newer than config.toml: so the drop-in is written in the
# version of the image's config.toml, its CRI runtime table renamed (generator/model/
# containerd.py has the code read).
containerd_config=/etc/containerd/config.toml
containerd_import='/etc/containerd/conf.d/*.toml'
containerd_unwired=''
containerd_version='' # the version of the image's config.toml, 2 or 3; empty: it has none
# The table of the CRI runtime options in version 2 (1.x) and version 3 (2.x); the same keys.
cri_runtime_v2='[plugins."io.containerd.grpc.v1.cri".containerd'
cri_runtime_v3='[plugins."io.containerd.cri.v1.runtime".containerd'

# carry_cri_program: the awk program that carries the image's CRI tables (file 1) into the
# bundle's drop-in (file 2): a table both set gets the image's lines after the bundle's keys,
# less the keys the bundle sets; the image's other CRI tables follow at the end. Exit 3, nothing
# usable, where text cannot say it safely: a dotted key in a CRI table, or the CRI plugin set
# outside its tables. (A function, not a variable: the first-boot script copies functions.)
carry_cri_program() {
    cat <<'AWK'
    function header(text) { sub(/#.*/, "", text); gsub(/[ \t]/, "", text); return text }
    function key_of(text) {
        if (match(text, /^[ \t]*[A-Za-z0-9_-]+[ \t]*=/)) {
            text = substr(text, 1, RLENGTH - 1); gsub(/[ \t]/, "", text); return text
        }
        return ""
    }
    function flush(   i, j) {
        if (current == "") return
        for (i = 1; i <= count; i++) {
            if (name[i] != current || used[i]) continue
            used[i] = 1
            print "# the image's own keys of this table (" config ")"
            for (j = 1; j <= lines[i]; j++)
                if (line_key[i, j] == "" || !((current, line_key[i, j]) in ours)) print line[i, j]
        }
    }
    FNR == NR {
        if ($0 ~ /^[ \t]*\[/) {
            in_cri = index(header($0), "[plugins.\"io.containerd.grpc.v1.cri\"") == 1 ||
                index(header($0), "[[plugins.\"io.containerd.grpc.v1.cri\"") == 1
            if (in_cri) { count++; name[count] = header($0); head[count] = $0; lines[count] = 0 }
            next
        }
        if ($0 ~ /^[ \t]*#/) { if (in_cri) { lines[count]++; line[count, lines[count]] = $0 } ; next }
        if (!in_cri) { if (index($0, "io.containerd.grpc.v1.cri")) exit 3; next }
        if ($0 ~ /^[ \t]*("[^"]*"|[A-Za-z0-9_-]+)[ \t]*\./) exit 3
        lines[count]++; line[count, lines[count]] = $0; line_key[count, lines[count]] = key_of($0)
        next
    }
    {
        if ($0 ~ /^[ \t]*\[/) { flush(); current = header($0) }
        else if (current != "" && key_of($0) != "") ours[current, key_of($0)] = 1
        print
    }
    END {
        flush()
        for (i = 1; i <= count; i++) {
            if (used[i]) continue
            if (!said) {
                print ""
                print "# The image's own CRI tables of " config ", carried here by install.sh: containerd 1.x"
                print "# replaces the whole plugin table of config.toml with the one of an imported file."
                said = 1
            }
            print ""
            print head[i]
            for (j = 1; j <= lines[i]; j++) print line[i, j]
        }
    }
AWK
}

# carry_image_cri PATH: $source becomes the bundle's drop-in with the CRI tables of the image's
# config.toml carried into it (unchanged when it has none, or when the drop-in is not wired).
# (Also where the drop-in is written in config.toml's version: join_containerd_version.)
carry_image_cri() { # path-in-root of the drop-in
    status=0
    [ -n "$containerd_unwired" ] || contents_of "$containerd_config" || status=$?
    target_of "$1" create
    [ -z "$containerd_unwired" ] && [ "$status" -eq 0 ] || return 0
    join_containerd_version "$1"
    [ "$containerd_version" = 2 ] || return 0
    case $contents in *io.containerd.grpc.v1.cri*) ;; *) return 0 ;; esac
    image_config=$(mktemp) || die "cannot create a temporary file"
    merged=$(mktemp) || die "cannot create a temporary file"
    printf '%s\n' "$contents" >"$image_config"
    awk -v config="$containerd_config" "$(carry_cri_program)" "$image_config" "$source" >"$merged" || true
    rm -f -- "$image_config"
    [ "$source" = "$bundle/rootfs$1" ] || rm -f -- "$source"
    say "carrying the CRI tables of the image's $containerd_config into $1 (containerd 1.x replaces a plugin's whole table with an imported file's)"
    source=$merged
}

# toml_version: the `version = 2` or `= 3` of the TOML text on stdin, before its first table
# (empty: neither).
toml_version() {
    sed -n '/^[[:space:]]*\[/q; s/^[[:space:]]*version[[:space:]]*=[[:space:]]*\([23]\)[[:space:]]*\(#.*\)\{0,1\}$/\1/p' | head -n 1
}

# join_containerd_version PATH: $source becomes the drop-in in the version of the image's
# config.toml where the two differ: the version line, the comment above it, and the header of
# each CRI runtime table renamed (the runtime plugin's migration moves that table's keys as they
# are: containerd plugins/cri/runtime/plugin.go migrateConfig).
join_containerd_version() { # path-in-root of the drop-in
    own=$(toml_version <"$source")
    [ -n "$containerd_version" ] && [ -n "$own" ] && [ "$own" != "$containerd_version" ] || return 0
    if [ "$own" = 3 ]; then from=$cri_runtime_v3 to=$cri_runtime_v2; else from=$cri_runtime_v2 to=$cri_runtime_v3; fi
    joined=$(mktemp) || die "cannot create a temporary file"
    awk -v from="$from" -v to="$to" -v version="$containerd_version" -v config="$containerd_config" '
        /^# Version [23] syntax/ {
            print "# Version " version " syntax, written so by install.sh: the image'"'"'s " config " is version " version
            next
        }
        !done && /^version = [23]$/ { print "version = " version; done = 1; next }
        /^\[/ && index($0, from) == 1 && substr($0, length(from) + 1, 1) ~ /[].]/ {
            $0 = to substr($0, length(from) + 1)
        }
        { print }' "$source" >"$joined"
    [ "$source" = "$bundle/rootfs$1" ] || rm -f -- "$source"
    say "writing $1 as version $containerd_version, the version of the image's $containerd_config (containerd 2.0-2.2 migrate the merged configuration by the version of the last file read)"
    source=$joined
}

# containerd_check: $containerd_unwired says why the image's config.toml cannot import the
# drop-in (empty: it can, or there is none and a minimal one is written); nothing is written. A
# version 1 config (no version line: plugins.cri) is not edited: 1.x validates the merged
# config as version 2 (ValidateV2) and refuses its plugin names.
containerd_check() {
    containerd_unwired=''
    containerd_version=''
    status=0
    contents_of "$containerd_config" || status=$?
    case $status in
        1) return 0 ;;
        2)
            containerd_unwired="$containerd_config is a link or not a regular file"
            return 0
            ;;
    esac
    target_of "$containerd_config" existing
    if [ "$(stat -c %s -- "$target")" -gt 65536 ]; then
        containerd_unwired="$containerd_config is larger than 64 KiB"
        return 0
    fi
    top=$(toml_top_level)
    containerd_version=$(printf '%s\n' "$contents" | toml_version)
    if [ -z "$containerd_version" ]; then
        containerd_unwired="$containerd_config is version 1 syntax (no version = 2 or 3), which the drop-in's tables cannot join: convert it (containerd config migrate)"
        return 0
    fi
    imports_lines=$(printf '%s\n' "$top" | grep -E '^[[:space:]]*imports[[:space:]]*=' || true)
    if [ -n "$imports_lines" ] && { [ "$(printf '%s\n' "$imports_lines" | grep -c '')" -ne 1 ] ||
        ! printf '%s\n' "$imports_lines" | grep -Eq "^[[:space:]]*imports[[:space:]]*=[[:space:]]*\[[^]#]*\][[:space:]]*(#.*)?$"; }; then
        containerd_unwired="the imports of $containerd_config are not a one-line array: add \"$containerd_import\" to them by hand"
        return 0
    fi
    [ "$containerd_version" = 2 ] || return 0 # 2.x merges plugin tables: nothing to carry
    probe=$(mktemp) || die "cannot create a temporary file"
    printf '%s\n' "$contents" >"$probe"
    if ! awk -v config="$containerd_config" "$(carry_cri_program)" "$probe" /dev/null >/dev/null; then
        containerd_unwired="the [plugins.\"io.containerd.grpc.v1.cri\"] settings of $containerd_config are not plain tables (a dotted key, an inline table), which containerd 1.x would lose to the drop-in's whole table: merge them into the drop-in by hand"
    fi
    rm -f -- "$probe"
}

# toml_top_level: the lines of $contents before its first table header.
toml_top_level() {
    printf '%s\n' "$contents" | sed -n '/^[[:space:]]*\[/q;p'
}

# imports_covers LINE: the one-line imports array LINE has an entry whose glob matches the
# drop-in (filepath.Glob's pattern, as the shell's case reads it).
imports_covers() {
    entries=$(printf '%s' "$1" | sed 's/^[^[]*\[//; s/\][^]]*$//' | tr ',' '\n' | tr -d " \t\"'")
    set -f
    for entry in $entries; do
        # shellcheck disable=SC2254 # the entry is a glob: matched as one
        case $containerd_dropin in $entry) set +f && return 0 ;; esac
    done
    set +f
    return 1
}

# wire_containerd DROPIN: config.toml imports the drop-in: an imports line added or extended, or
# a minimal config.toml written (containerd with no config.toml reads no drop-in either).
wire_containerd() {
    containerd_dropin=$1
    import_record=${record%/*}/containerd-import
    if [ -n "$containerd_unwired" ]; then
        say "containerd: $1 is not in effect: $containerd_unwired"
        failed=$((failed + 1))
        return 0
    fi
    status=0
    contents_of "$containerd_config" || status=$?
    if [ "$status" -eq 1 ]; then
        # the drop-in's own version (3 for a containerd 2 target), which it is then read in
        dropin_version=2
        if contents_of "$1"; then dropin_version=$(printf '%s\n' "$contents" | toml_version); fi
        write_text "$containerd_config" "$(printf 'version = %s\nimports = ["%s"]' "${dropin_version:-2}" "$containerd_import")"
        write_text "$import_record" file
        return 0
    fi
    target_of "$containerd_config" existing
    imports_line=$(toml_top_level | grep -E '^[[:space:]]*imports[[:space:]]*=' || true)
    if [ -n "$imports_line" ] && imports_covers "$imports_line"; then
        say "unchanged $containerd_config (its imports read $1)"
        unchanged=$((unchanged + 1))
        return 0
    fi
    quoted=$(printf '%s' "$containerd_import" | sed 's/[/*.]/\\&/g')
    edited=$(mktemp) || die "cannot create a temporary file"
    if [ -z "$imports_line" ]; then
        printf 'imports = ["%s"]\n%s\n' "$containerd_import" "$contents" >"$edited"
        added_what=line
    else
        printf '%s\n' "$contents" | sed "/^[[:space:]]*imports[[:space:]]*=/{
            s/\\[[[:space:]]*]/[\"$quoted\"]/
            t
            s/]/, \"$quoted\"]/
        }" >"$edited"
        added_what=entry
    fi
    put "$edited" "$(stat -c %a -- "$target")"
    rm -f -- "$edited"
    say "wired $containerd_config: its imports read $containerd_import"
    installed=$((installed + 1))
    write_text "$import_record" "$added_what"
}

# unwire_containerd: a bundle without the drop-in takes back what an earlier install added: the
# minimal file it wrote, else its entry of the imports line (the line too when nothing else is
# left in it).
unwire_containerd() {
    import_record=${record%/*}/containerd-import
    contents_of "$import_record" || return 0
    added_what=$contents
    ! removable "$import_record" || rm -f -- "$target"
    status=0
    contents_of "$containerd_config" || status=$?
    [ "$status" -eq 0 ] || return 0
    target_of "$containerd_config" existing
    minimal=$(printf 'imports = ["%s"]' "$containerd_import")
    if [ "$added_what" = file ] && { [ "$contents" = "version = 2
$minimal" ] || [ "$contents" = "version = 3
$minimal" ]; }; then
        removable "$containerd_config" || return 0
        rm -f -- "$target"
        say "removed $containerd_config (written for the drop-in the bundle no longer carries)"
        return 0
    fi
    quoted=$(printf '%s' "$containerd_import" | sed 's/[/*.]/\\&/g')
    edited=$(mktemp) || die "cannot create a temporary file"
    printf '%s\n' "$contents" | sed "/^[[:space:]]*imports[[:space:]]*=/{
        s/,[[:space:]]*[\"']${quoted}[\"']//
        s/[\"']${quoted}[\"'][[:space:]]*,[[:space:]]*//
        s/[\"']${quoted}[\"']//
    }" | sed '/^[[:space:]]*imports[[:space:]]*=[[:space:]]*\[[[:space:]]*\][[:space:]]*$/d' >"$edited"
    if ! cmp -s -- "$edited" "$target"; then
        put "$edited" "$(stat -c %a -- "$target")"
        say "took \"$containerd_import\" back from the imports of $containerd_config (the bundle no longer carries a containerd drop-in)"
        installed=$((installed + 1))
    fi
    rm -f -- "$edited"
}

# --- services -----------------------------------------------------------------------------------

# unit_in_image UNIT: a unit directory of the target has UNIT (or its template). The directories
# are resolved inside the root like every path (a directory link that leaves it ends only this
# lookup); a unit file that is a link counts as present and is never followed (systemd's own
# links, /dev/null masks and aliases, may point anywhere, in the image or out of it).
unit_in_image() { # unit
    template=$(printf '%s' "$1" | sed 's/@[^.]*\./@./')
    for unit_dir in /etc/systemd/system /usr/local/lib/systemd/system /usr/lib/systemd/system /lib/systemd/system; do
        found_dir=$( (resolve_dir "$unit_dir" existing && printf '%s' "$dir") 2>/dev/null) || continue
        for unit_file in "$found_dir/$1" "$found_dir/$template"; do
            if [ -L "$unit_file" ] || [ -f "$unit_file" ]; then
                return 0
            fi
        done
    done
    return 1
}

# --- units of an image (--root DIR other than /): their links made here -------------------------

# `systemctl --root=DIR enable` makes the links of a unit's [Install] section itself and writes
# through a link at a .wants or .requires directory, absolute or relative, out of DIR (observed
# with systemctl 252, Debian 12: the link lands where the directory link points). So with --root
# DIR the links are made here, each directory resolved inside DIR like every target (resolve_dir:
# a link that leaves it is refused), as systemctl 252 makes them (tests/test_install_links.py
# compares the two):
# - the unit file is the first of unit_dirs with the unit's name; a link there is a mask when it
#   points to /dev/null, else passed over (never followed) for the next directory;
# - the [Install] lines of it and of its drop-ins (<unit>.d/*.conf of every unit directory, a
#   name in a higher directory hiding the same name lower, in name order) are read as data
#   (contents_of); an empty assignment empties the list;
# - WantedBy=, RequiredBy=, UpheldBy=: /etc/systemd/system/<target>.wants|.requires|.upholds/
#   <unit>, Alias=: /etc/systemd/system/<alias>, each a link to the unit file; Also=: those
#   units too.
# A word that is not a plain unit name (a specifier such as %i, a template, quotes), a continued
# line or a drop-in that is a link fails the unit, reported, before any of its links is made; a
# link place already taken by something else is reported, not replaced. Disable removes links
# only, never through a directory link. Template units are enabled when the image boots.
unit_dirs='/etc/systemd/system /usr/local/lib/systemd/system /usr/lib/systemd/system /lib/systemd/system'
unit_links_limit=32 # units reached through Also=

is_plain_unit() { # a unit name without a template, a specifier or an escape
    case $1 in
        .* | -* | *[!A-Za-z0-9:_.-]*) return 1 ;;
        ?*.service | ?*.socket | ?*.target | ?*.timer | ?*.path | ?*.mount | ?*.automount | ?*.swap | ?*.slice) return 0 ;;
    esac
    return 1
}

# unit_file UNIT: $unit_path is the image path of UNIT's file; 1 absent, 2 masked.
unit_file() {
    for unit_dir in $unit_dirs; do
        found_dir=$( (resolve_dir "$unit_dir" existing && printf '%s' "$dir") 2>/dev/null) || continue
        if [ -L "$found_dir/$1" ]; then
            [ "$(readlink -- "$found_dir/$1")" != /dev/null ] || return 2
        elif [ -f "$found_dir/$1" ]; then
            unit_path=$unit_dir/$1
            return 0
        fi
    done
    return 1
}

# install_lines UNIT: the [Install] assignments of UNIT's file and drop-ins, "Key word" a line
# ("Key -" empties the list); "bad" where one cannot be read as plain data.
install_lines() {
    {
        printf '%s\n' "$unit_path"
        for unit_dir in $unit_dirs; do
            found_dir=$( (resolve_dir "$unit_dir/$1.d" existing && printf '%s' "$dir") 2>/dev/null) || continue
            for dropin in "$found_dir"/*.conf; do
                [ -e "$dropin" ] || [ -L "$dropin" ] || continue
                case ${dropin##*/} in
                    *[!A-Za-z0-9@_.:+-]*) printf '%s\n' bad ;;
                    *) printf '%s\t%s\n' "${dropin##*/}" "$unit_dir/$1.d/${dropin##*/}" ;;
                esac
            done
        done
    } | awk -F '\t' 'NR == 1 { print; next } NF == 1 { print; next } !seen[$1]++' |
        { read -r fragment && printf '%s\n' "$fragment" && sort -t "$tab" -k 1,1 | cut -f 2; } |
        while read -r source_file; do
            if [ "$source_file" = bad ] || ! contents_of "$source_file"; then
                printf '%s\n' bad
                continue
            fi
            printf '%s\n' "$contents" | awk '
                /^[ \t]*\[/ { section = $0; gsub(/[ \t]/, "", section); next }
                section != "[Install]" || /^[ \t]*([#;]|$)/ { next }
                /\\[ \t]*$/ { print "bad"; next }
                {
                    key = $0; sub(/=.*/, "", key); gsub(/[ \t]/, "", key)
                    if (key !~ /^(WantedBy|RequiredBy|UpheldBy|Alias|Also)$/) next
                    value = substr($0, index($0, "=") + 1)
                    if (value ~ /^[ \t]*$/) print key " -"
                    count = split(value, words, /[ \t]+/)
                    for (i = 1; i <= count; i++) if (words[i] != "") print key " " words[i]
                }'
        done
}

# unit_plan UNIT: $link_plan is "place target" lines (image paths) for UNIT and its Also= units,
# $link_names the names links to them may carry; 1, with $why, when one cannot be made.
unit_plan() {
    link_plan='' link_names='' todo=$1 seen_units='' count=0
    while [ -n "$todo" ]; do
        current=${todo%% *}
        case $todo in *' '*) todo=${todo#* } ;; *) todo='' ;; esac
        case " $seen_units " in *" $current "*) continue ;; esac
        seen_units="$seen_units $current"
        count=$((count + 1))
        [ "$count" -le "$unit_links_limit" ] || { why="more than $unit_links_limit units through Also="; return 1; }
        is_plain_unit "$current" || { why="a unit of its [Install] is not a plain unit name (a template or specifier)"; return 1; }
        status=0
        unit_file "$current" || status=$?
        case $status in
            1) why="$current has no unit file in $root other than a link (links are not followed)" && return 1 ;;
            2) why="$current is masked in $root" && return 1 ;;
        esac
        wanted='' required='' upheld='' aliases=''
        words=$(install_lines "$current")
        while read -r key word; do
            case $key in '') continue ;; bad)
                why="an [Install] file of $current is not a plain file of plain lines" && return 1 ;;
            esac
            [ "$word" = - ] || is_plain_unit "$word" ||
                { why="[Install] of $current names a word that is not a plain unit name (a template, specifier or quote)"; return 1; }
            case $key:$word in
                WantedBy:-) wanted='' ;;
                RequiredBy:-) required='' ;;
                UpheldBy:-) upheld='' ;;
                Alias:-) aliases='' ;;
                Also:-) ;;
                WantedBy:*) wanted="$wanted $word.wants/$current" ;;
                RequiredBy:*) required="$required $word.requires/$current" ;;
                UpheldBy:*) upheld="$upheld $word.upholds/$current" ;;
                Alias:*)
                    [ "${word##*.}" = "${current##*.}" ] || { why="an Alias= of $current is not of its type" && return 1; }
                    aliases="$aliases $word"
                    ;;
                Also:*) todo="${todo:+$todo }$word" ;;
            esac
        done <<WORDS
$words
WORDS
        link_names="$link_names $current $aliases"
        for place in $wanted $required $upheld $aliases; do
            [ "$place" = "$current" ] || link_plan="$link_plan/etc/systemd/system/$place $unit_path$newline"
        done
    done
}

# make_link PLACE TARGET: a link at the image's PLACE to TARGET, its directory inside the root.
make_link() {
    target_of "$1" create
    if [ -L "$target" ] && [ "$(readlink -- "$target")" = "$2" ]; then
        return 0
    elif [ -e "$target" ] || [ -L "$target" ]; then
        say "$1 is already there and is not a link to $2: not replaced"
        return 1
    fi
    ln -s -- "$2" "$target" || die "cannot create $target"
    say "linked $1 -> $2"
}

# drop_links NAMES: the links of /etc/systemd/system and of its .wants, .requires and .upholds
# directories (not linked ones) named one of NAMES or pointing to a file of that name.
drop_links() {
    resolve_dir /etc/systemd/system unlinked || return 0
    for entry in "$dir"/* "$dir"/*.wants/* "$dir"/*.requires/* "$dir"/*.upholds/*; do
        [ -L "$entry" ] || continue
        [ "${entry%/*}" = "$dir" ] || [ ! -L "${entry%/*}" ] || continue
        link_target=$(readlink -- "$entry")
        [ "$link_target" != /dev/null ] || continue
        case " $1 " in
            *" ${entry##*/} "* | *" ${link_target##*/} "*) rm -f -- "$entry" ;;
        esac
    done
}

unit_links() { # action unit: enable, disable or mask in the image at $root
    case $1 in
        mask)
            if make_link "/etc/systemd/system/$2" /dev/null; then say "mask $2"; else failed=$((failed + 1)); fi
            return 0
            ;;
        disable)
            names=$2
            ! unit_plan "$2" || names=$link_names
            drop_links "$names"
            say "disable $2"
            return 0
            ;;
    esac
    if ! unit_plan "$2"; then
        say "enable $2 failed: $why; nothing of it enabled"
        failed=$((failed + 1))
        return 0
    fi
    if [ -z "$link_plan" ]; then
        static_unit "$2" "nothing was enabled"
        return 0
    fi
    made=yes
    while read -r place link_to <&3; do
        [ -z "$place" ] || make_link "$place" "$link_to" || made=no
    done 3<<LINKS
$link_plan
LINKS
    if [ "$made" = yes ]; then
        say "enable $2"
        deferred_units="${deferred_units:+$deferred_units, }$2"
    else
        say "enable $2 failed"
        failed=$((failed + 1))
    fi
}

# An image build: the unit is enabled, disabled or masked in the target's unit files and is not
# started or stopped (no --now). On / (a build VM, a chroot) systemctl talks to the manager when
# one runs, else edits the files itself; with --root it edits the files of DIR.
service_offline() { # action unit
    if [ "$1" != mask ] && ! unit_in_image "$2"; then
        say "$2 is not installed in $root: $1 skipped"
        skipped=$((skipped + 1))
        return 0
    fi
    if [ "$root" != / ]; then
        unit_links "$1" "$2"
        return 0
    fi
    if ! command -v systemctl >/dev/null 2>&1; then
        say "systemctl not found on this host: $1 $2 skipped (run: systemctl $1 $2 in the image)"
        skipped=$((skipped + 1))
        return 0
    fi
    root_option=--root=$root
    [ "$root" != / ] || root_option=''
    if systemctl ${root_option:+"$root_option"} --quiet "$1" "$2" </dev/null; then
        if [ "$1" = enable ] && is_static "$root_option" "$2"; then
            static_unit "$2" "nothing was enabled"
            return 0
        fi
        say "$1 $2"
        [ "$1" != enable ] || deferred_units="${deferred_units:+$deferred_units, }$2"
    else
        say "$1 $2 failed"
        failed=$((failed + 1))
    fi
}

# is_runtime_parts WORD: a comma-separated list of containerd, docker, kubelet and persistenced.
is_runtime_parts() {
    case ,$1, in *,,*) return 1 ;; esac
    parts_left=$1
    while [ -n "$parts_left" ]; do
        case ${parts_left%%,*} in containerd | docker | kubelet | persistenced) ;; *) return 1 ;; esac
        case $parts_left in *,*) parts_left=${parts_left#*,} ;; *) parts_left= ;; esac
    done
}

# --- kubelet: the drop-in directory read through --config-dir ------------------------------------

# kubelet reads /etc/kubernetes/kubelet.conf.d only with --config-dir, which kubeadm's
# 10-kubeadm.conf does not pass; the bundle's kubelet.service.d drop-in adds it to
# $KUBELET_CONFIG_ARGS, which kubeadm's ExecStart expands. kubelet_check: $kubelet_unwired says
# why that does not reach kubelet (no ExecStart of the image's kubelet.service and its drop-ins
# expands the variable or passes --config-dir itself); nothing is written.
kubelet_config_dir=/etc/kubernetes/kubelet.conf.d
kubelet_unwired=''

kubelet_start_lines() { # the ExecStart lines of the image's kubelet.service and its drop-ins
    for unit_dir in /etc/systemd/system /usr/local/lib/systemd/system /usr/lib/systemd/system /lib/systemd/system; do
        ! contents_of "$unit_dir/kubelet.service" || printf '%s\n' "$contents"
        found_dir=$( (resolve_dir "$unit_dir/kubelet.service.d" existing && printf '%s' "$dir") 2>/dev/null) || continue
        for unit_file in "$found_dir"/*.conf; do
            case ${unit_file##*/} in *[!A-Za-z0-9@_.:+-]* | '*.conf') continue ;; esac
            ! contents_of "$unit_dir/kubelet.service.d/${unit_file##*/}" || printf '%s\n' "$contents"
        done
    done | sed -e ':a' -e '/\\$/N' -e 's/\\\n/ /' -e 'ta' | grep -E '^[[:space:]]*ExecStart[[:space:]]*=' || true
}

kubelet_check() {
    kubelet_unwired=''
    unit_in_image kubelet.service || return 0 # the require line names it
    start_lines=$(kubelet_start_lines)
    if printf '%s\n' "$start_lines" | grep -Eq "\\\$\{?KUBELET_CONFIG_ARGS\}?([^A-Za-z0-9_]|$)|--config-dir[= ]$kubelet_config_dir"; then
        return 0
    fi
    kubelet_unwired="no ExecStart of kubelet.service in $root expands \$KUBELET_CONFIG_ARGS (kubeadm's 10-kubeadm.conf does), so kubelet would not get --config-dir=$kubelet_config_dir: add it to how kubelet starts"
}

# --- what the target must carry for the plan (the "require" lines) -----------------------------

# command_in_image NAME: a bin directory of the target has NAME; a link there counts as present
# and is never followed (it may point anywhere in the image, or out of it).
command_in_image() {
    for bin_dir in /usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin; do
        # in a subshell: a directory link that leaves the root ends only this lookup
        found_dir=$( (resolve_dir "$bin_dir" existing && printf '%s' "$dir") 2>/dev/null) || continue
        if [ -L "$found_dir/$1" ] || { [ -f "$found_dir/$1" ] && [ -x "$found_dir/$1" ]; }; then
            return 0
        fi
    done
    return 1
}

# missing_needs: the require lines the target lacks, as "unit X, command Y".
missing_needs() {
    lacking=''
    while read -r what name <&3; do
        [ -n "$name" ] || continue
        case $what in
            unit) ! unit_in_image "$name" || continue ;;
            command) ! command_in_image "$name" || continue ;;
        esac
        lacking="${lacking:+$lacking, }$what $name"
    done 3<<NEEDS
$needs
NEEDS
    printf '%s' "$lacking"
}

# wiring_problems PATHS: $unwired names each drop-in among the bundle's PATHS (one a line) that
# its consumer would not read; $containerd_dropins and $kubelet_unwired for wire_dropins.
wiring_problems() {
    unwired=''
    containerd_dropins=$(printf '%s\n' "$1" | grep -E '^/etc/containerd/conf\.d/[^/]+\.toml$' || true)
    kubelet_dropins=$(printf '%s\n' "$1" | grep -E "^$kubelet_config_dir/[^/]+\.conf\$" || true)
    if [ -n "$containerd_dropins" ]; then
        containerd_check
        [ -z "$containerd_unwired" ] || unwired="containerd's import of $containerd_import ($containerd_unwired)"
    fi
    if [ -n "$kubelet_dropins" ]; then
        kubelet_check
        [ -z "$kubelet_unwired" ] || unwired="${unwired:+$unwired, }kubelet's --config-dir ($kubelet_unwired)"
    fi
}

# wire_dropins: after the files and the record, the drop-ins wired into what reads them
# (containerd's imports) or taken back; what cannot be wired fails the run, named.
wire_dropins() {
    if [ -n "$containerd_dropins" ]; then
        wire_containerd "$(printf '%s\n' "$containerd_dropins" | head -n 1)"
    else
        unwire_containerd
    fi
    if [ -n "$kubelet_unwired" ]; then
        say "kubelet: $kubelet_config_dir is not in effect: $kubelet_unwired"
        failed=$((failed + 1))
    fi
}

# check_needs: --strict stops here, before anything is written; otherwise the run goes on and
# says what will not work until the target has it.
check_needs() {
    lacking=$(missing_needs)
    wiring_problems "$(printf '%s' "$files" | sed 's/^[^ ]* //')"
    [ -z "$unwired" ] || lacking="${lacking:+$lacking, }$unwired"
    [ -n "$lacking" ] || return 0
    if [ "$strict" = yes ]; then
        die "strict: $root lacks what the plan needs: $lacking; nothing installed (install the packages that provide them before $tool's install.sh)"
    fi
    say "warning: $root lacks what the plan needs: $lacking (its settings do not take effect until it is installed; --strict fails here)"
}

# --- boot arguments, per mechanism (see the header) ---------------------------------------------

edit_bls_entry() { # image path of one entry: its options line edited as text
    status=0
    contents_of "$1" || status=$?
    if [ "$status" -ne 0 ]; then
        say "$1 is not a plain file; not edited"
        return 1
    fi
    count=$(printf '%s\n' "$contents" | grep -c '^options[[:space:]]' || true)
    if [ "$count" -gt 1 ]; then
        say "$1 has $count options lines; not edited"
        return 1
    fi
    current=$(printf '%s\n' "$contents" | sed -n 's/^options[[:space:]]*//p')
    if ! is_boot_cmdline "$current"; then
        say "$1: its options are not plain words or grub variables (quotes, or a '\$' inside a word); not edited"
        return 1
    fi
    new=$(edited_cmdline "$current")
    entry_file=$(mktemp) || die "cannot create a temporary file"
    if [ "$count" -eq 1 ]; then
        printf '%s\n' "$contents" | while IFS= read -r entry_line; do
            case $entry_line in
                options[[:space:]]*) printf 'options %s\n' "$new" ;;
                *) printf '%s\n' "$entry_line" ;;
            esac
        done >"$entry_file"
    else
        printf '%s\noptions %s\n' "$contents" "$new" >"$entry_file"
    fi
    if same_file "$entry_file" "$target" "$(stat -c %a -- "$target")"; then
        say "unchanged $1"
        unchanged=$((unchanged + 1))
    else
        put "$entry_file" "$(stat -c %a -- "$target")"
        say "edited the options of $1"
        installed=$((installed + 1))
    fi
    rm -f -- "$entry_file"
}

# edit_grub_default: GRUB_CMDLINE_LINUX of /etc/default/grub, in an image build (live, grubby
# --update-kernel=ALL edits it). RHEL 9.0-9.2's grub2-mkconfig writes "root=... ro
# $GRUB_CMDLINE_LINUX $GRUB_CMDLINE_LINUX_DEFAULT" into every entry's options (rhboot/grub2
# 10_linux.in update_bls_cmdline()), so arguments only in the entries would be lost at the next
# kernel update or grub2-mkconfig. The file is sourced by a shell: only one line of the form
# GRUB_CMDLINE_LINUX="plain words" is edited; anything else is said and left alone.
edit_grub_default() {
    status=0
    contents_of /etc/default/grub || status=$?
    case $status in
        1) return 0 ;;
        2)
            say "/etc/default/grub is not a plain file; GRUB_CMDLINE_LINUX not edited"
            return 1
            ;;
    esac
    count=$(printf '%s\n' "$contents" | grep -c '^[[:space:]]*\(export[[:space:]]*\)\{0,1\}GRUB_CMDLINE_LINUX=' || true)
    [ "$count" -gt 0 ] || return 0
    plain=$(printf '%s\n' "$contents" | grep -c '^GRUB_CMDLINE_LINUX="[^"$`\\]*"[[:space:]]*$' || true)
    current=$(printf '%s\n' "$contents" | sed -n 's/^GRUB_CMDLINE_LINUX="\([^"]*\)"[[:space:]]*$/\1/p')
    if [ "$count" -ne 1 ] || [ "$plain" -ne 1 ] || ! is_plain_cmdline "$current"; then
        say "/etc/default/grub: GRUB_CMDLINE_LINUX is not one line GRUB_CMDLINE_LINUX=\"plain words\"; not edited (grub2-mkconfig of RHEL 9.0-9.2 would take the arguments out of the entries)"
        return 1
    fi
    new=$(edited_cmdline "$current")
    grub_file=$(mktemp) || die "cannot create a temporary file"
    printf '%s\n' "$contents" | while IFS= read -r grub_line; do
        case $grub_line in
            GRUB_CMDLINE_LINUX=*) printf 'GRUB_CMDLINE_LINUX="%s"\n' "$new" ;;
            *) printf '%s\n' "$grub_line" ;;
        esac
    done >"$grub_file"
    if same_file "$grub_file" "$target" "$(stat -c %a -- "$target")"; then
        say "unchanged /etc/default/grub"
        unchanged=$((unchanged + 1))
    else
        put "$grub_file" "$(stat -c %a -- "$target")"
        say "edited GRUB_CMDLINE_LINUX of /etc/default/grub"
        installed=$((installed + 1))
    fi
    rm -f -- "$grub_file"
}

# An image build of / (a build VM, a chroot): the image's own update-grub, so that the image is
# captured with the arguments in grub.cfg. With --root DIR: the image's update-grub run chrooted
# when the image can (grub_chrooted), else at its first boot (grub_at_first_boot).
boot_image_grub() {
    if [ "$root" = / ] && command -v update-grub >/dev/null 2>&1; then
        run_step bootloader
    elif [ "$uninstall" = yes ]; then
        # no unit of the tool is left behind to regenerate grub.cfg: the image's own next
        # update-grub (any kernel update runs it) drops the arguments with the drop-in gone
        say "kernel arguments: grub.cfg of $root keeps them until the image's update-grub runs next"
    elif grub_chrooted; then
        take_back_grub_unit
        grub_deferred="; grub.cfg regenerated in the image, in effect at its first boot"
    else
        grub_at_first_boot
    fi
}

# grub_chrooted: the image's own update-grub, chrooted, as image builders run it, when the image
# can: DIR is a filesystem of its own (the image's disk mounted there: grub-probe then names the
# image's device; on a directory of this host's filesystem it would name this host's, and
# grub.cfg would boot the host's root), this host is root with chroot, unshare and mount, and it
# runs the image's programs (its /bin/true runs: the same architecture). /dev, /proc and /sys are
# bound in a mount namespace of the run's own, so no mount outlives it. 1 when the image cannot
# or update-grub failed (said why): then its first boot does it.
grub_chrooted() {
    [ "$(id -u)" = 0 ] || return 1
    for program in chroot unshare mount; do
        command -v "$program" >/dev/null 2>&1 || return 1
    done
    image_command update-grub || return 1
    if [ "$(stat -c %d -- "$root")" = "$(stat -c %d -- /)" ]; then
        say "kernel arguments: $root is not a filesystem of its own (the image's disk mounted), so its update-grub is not run here"
        return 1
    fi
    for api_dir in dev proc sys; do
        if [ ! -d "$root/$api_dir" ] || [ -L "$root/$api_dir" ]; then
            say "kernel arguments: the image has no /$api_dir directory to bind; its update-grub is not run here"
            return 1
        fi
    done
    if ! chroot "$root" /bin/true 2>/dev/null; then
        say "kernel arguments: the image's programs do not run on this host; its update-grub is not run here"
        return 1
    fi
    # shellcheck disable=SC2016 # expanded by the inner shell
    if unshare -m sh -c 'mount --make-rprivate / && mount --rbind /dev "$1/dev" &&
        mount -t proc proc "$1/proc" && mount --rbind /sys "$1/sys" && exec chroot "$1" "$2"' \
        sh "$root" "$found"; then
        say "regenerated grub.cfg of $root with its own update-grub (chrooted)"
        return 0
    fi
    say "kernel arguments: the image's update-grub failed chrooted"
    return 1
}

# image_command NAME: $found is the path in the image of its program NAME (a bin directory of
# the target, resolved inside the root; the program itself is never run here); 1 if none.
image_command() {
    for bin_dir in /usr/sbin /usr/bin /sbin /bin; do
        found_dir=$( (resolve_dir "$bin_dir" existing && printf '%s' "$dir") 2>/dev/null) || continue
        if [ -L "$found_dir/$1" ] || { [ -f "$found_dir/$1" ] && [ -x "$found_dir/$1" ]; }; then
            found=$bin_dir/$1
            return 0
        fi
    done
    return 1
}

# grub_at_first_boot: nothing of the image is run on this host (its programs may be for another
# architecture, and a hostile image's would run here as root). Instead a oneshot unit of the
# image runs its own update-grub once at first boot, so grub.cfg carries the drop-in and the
# arguments are in effect from the boot after. Once: the unit writes a marker in the record
# directory and does not start while it is there; this run removes the marker, so that arguments
# handed over again (another bundle) are regenerated again. Never a loop: nothing reboots.
grub_at_first_boot() {
    grub_unit=$tool-update-grub.service
    if ! image_command update-grub; then
        say "kernel arguments: the image has no update-grub; the grub.d drop-in is read when its grub.cfg is next generated"
        return 0
    fi
    grub_marker=${record%/*}/grub-regenerated
    write_text "/etc/systemd/system/$grub_unit" "# Written by $tool's install.sh: grub.cfg regenerated once with /etc/default/grub.d
[Unit]
Description=$tool: regenerate grub.cfg once with the kernel arguments of /etc/default/grub.d
ConditionPathExists=!$grub_marker
RequiresMountsFor=/boot ${grub_marker%/*}

[Service]
Type=oneshot
ExecStart=/bin/sh -c \"$found && : >$grub_marker\"

[Install]
WantedBy=multi-user.target"
    if removable "$grub_marker"; then
        rm -f -- "$target"
        say "removed $grub_marker: $grub_unit regenerates grub.cfg again at the next boot"
    fi
    service enable "$grub_unit"
    grub_deferred="; $grub_unit runs update-grub at first boot, in effect from the boot after"
}

# image_mechanism (an image build): $mechanism is bootc in a bootc / ostree image (RHEL 9.4+ and
# Fedora image mode): bootc takes the image's kernel arguments from /usr/lib/bootc/kargs.d/*.toml
# (containers/bootc lib/src/kargs.rs get_kargs_in_root, KARGS_PATH) and writes the BLS entries
# itself (docs/src/building/kernel-arguments.md). Its markers: /usr/lib/bootc (bootc's own
# directory) or /usr/lib/ostree/prepare-root.conf (every ostree-based image boots through it).
image_mechanism() {
    if (resolve_dir /usr/lib/bootc existing) 2>/dev/null ||
        (target_of /usr/lib/ostree/prepare-root.conf existing && [ -f "$target" ]) 2>/dev/null; then
        mechanism=bootc
    fi
}

# boot_bootc: the bundle's arguments as one kargs.d file, rewritten whole: bootc applies the
# difference between the image's old and new sets at the next update and keeps the machine's own
# (kernel-arguments.md), so an argument a later bundle drops is dropped from the file only. The
# format (kargs.rs Config, deny_unknown_fields): kargs = [strings], optional
# match-architectures, which is left out (Rust's names, not uname's: the bundle is per machine).
# Words are the safe alphabet: no quote or backslash to escape in a TOML basic string.
boot_bootc() {
    kargs_file=/usr/lib/bootc/kargs.d/90-$tool.toml
    if [ -z "$kernel_args" ]; then
        if removable "$kargs_file"; then
            rm -f -- "$target"
            say "removed $kargs_file"
        fi
        return 0
    fi
    set -f
    kargs=''
    for arg in $kernel_args; do
        kargs="${kargs:+$kargs, }\"$arg\""
    done
    set +f
    write_text "$kargs_file" "# Written by $tool's install.sh: the bundle's kernel arguments, for bootc
kargs = [$kargs]"
}

# boot_check_unit (an image build): a oneshot unit of the image compares /proc/cmdline at each
# boot with the arguments recorded here (kernel-args: added; kernel-args-removed) and says, one
# journal line per argument, which are not in effect; with kernel-args-reboot once it reboots
# once to take them (a marker in the record directory, removed here: never a loop). The check
# script is fixed text of this script, run by /bin/sh (write_text writes 0644).
boot_check_unit() {
    check_script=/usr/lib/$tool/kernel-args-check
    check_unit=$tool-kernel-args.service
    check_dir=${record%/*}
    # bundles before 0.2.0 wrote it to /usr/local/libexec/<tool>: removed, that directory if empty
    legacy=/usr/local/libexec/$tool
    if target_of "$legacy/kernel-args-check" existing && [ -e "$target" ]; then
        remove_own "$legacy/kernel-args-check"
        ! resolve_dir "$legacy" unlinked || ! rmdir -- "$dir" 2>/dev/null || say "removed $legacy"
    fi
    if [ "$uninstall" = yes ]; then
        take_back_boot_check
        return 0
    fi
    # what bundles removed and this one does not add again, accumulated: a second run of the
    # same bundle (which removes nothing) keeps the record as it is
    previous=''
    if contents_of "$check_dir/kernel-args-removed" && is_plain_cmdline "$contents"; then
        previous=$contents
    fi
    gone=''
    set -f
    for word in $previous $removed; do
        case " $gone $kernel_args " in *" $word "*) ;; *) gone="${gone:+$gone }$word" ;; esac
    done
    set +f
    write_text "$check_dir/kernel-args-removed" "$(printf '%s' "$gone" | tr ' ' '\n')"
    write_text "$check_script" "$(kernel_args_check)"
    write_text "/etc/systemd/system/$check_unit" "# Written by $tool's install.sh: are the kernel arguments of the bundle in effect?
[Unit]
Description=$tool: check that the kernel arguments of the bundle are in effect
ConditionPathExists=$check_dir/kernel-args
RequiresMountsFor=$check_dir
After=$tool-update-grub.service

[Service]
Type=oneshot
ExecStart=/bin/sh $check_script $check_dir${args_reboot:+ $args_reboot}
SyslogIdentifier=$tool-kernel-args

[Install]
WantedBy=multi-user.target"
    if removable "$check_dir/kernel-args-rebooted"; then
        rm -f -- "$target"
        say "removed $check_dir/kernel-args-rebooted: $check_unit may reboot once again"
    fi
    service enable "$check_unit"
}

# The check script boot_check_unit installs (its own words are the record's: checked words).
# TEST_SYSROOT (for tests only, never set by the unit) stands in for / (proc/cmdline).
kernel_args_check() {
    cat <<'CHECK'
#!/bin/sh
# Written by install.sh: RECORD_DIR [--reboot-once]. One line per kernel argument of the bundle
# (RECORD_DIR/kernel-args) not on /proc/cmdline, and per removed one (kernel-args-removed) still
# on it; exit 1 if any. --reboot-once: then reboot, once (marker RECORD_DIR/kernel-args-rebooted).
# Files are read with the shell's read, not cat: the unit runs at every boot of the image.
set -u
dir=$1
cmdline=''
IFS= read -r cmdline <"${TEST_SYSROOT:-}/proc/cmdline" || [ -n "$cmdline" ] || exit 1
list_keys=' modprobe.blacklist rd.driver.blacklist module_blacklist '
set -f
words_of() { # FILE: its lines as words in $words (none when it is not there)
    words=''
    [ -f "$1" ] || return 0
    while IFS= read -r line || [ -n "$line" ]; do words="$words $line"; done <"$1"
}
on_cmdline() { # word: on the command line; a list argument: each element in an occurrence
    case " $cmdline " in *" $1 "*) return 0 ;; esac
    case $1 in *=*) ;; *) return 1 ;; esac
    case $list_keys in *" ${1%%=*} "*) ;; *) return 1 ;; esac
    have=,
    for word in $cmdline; do
        case $word in "${1%%=*}"=*) have="$have${word#*=}," ;; esac
    done
    rest=${1#*=},
    while [ -n "$rest" ]; do
        case $have in *",${rest%%,*},"*) ;; *) return 1 ;; esac
        rest=${rest#*,}
    done
}
missing=0
words_of "$dir/kernel-args"
for arg in $words; do
    on_cmdline "$arg" && continue
    echo "kernel argument $arg not in effect: the bootloader config was not regenerated"
    missing=1
done
words_of "$dir/kernel-args-removed"
for arg in $words; do
    case " $cmdline " in *" $arg "*) ;; *) continue ;; esac
    echo "kernel argument $arg still in effect although the bundle removed it: the bootloader config was not regenerated"
    missing=1
done
[ "$missing" = 1 ] && [ "${2:-}" = --reboot-once ] || exit "$missing"
if [ -e "$dir/kernel-args-rebooted" ]; then
    echo "rebooted once already for the kernel arguments ($dir/kernel-args-rebooted); not again"
    exit 1
fi
: >"$dir/kernel-args-rebooted" || exit 1
echo "rebooting once so that the kernel arguments take effect"
exec systemctl reboot
CHECK
}

# --- tuned: the bundle's profile layered on the selected one ------------------------------------

# report_deferred: what an image build leaves to the image's first boot.
report_deferred() {
    step_list=''
    while read -r step word <&3; do
        [ -z "$step" ] || step_list="${step_list:+$step_list, }$(summary_of "$step")"
    done 3<<STEPS
$steps
STEPS
    deferred="$step_list${step_list:+${deferred:+, }}$deferred"
    [ -z "$deferred_units" ] || deferred="${deferred:+$deferred, }start $deferred_units"
    say "deferred to first boot: ${deferred:-nothing}"
}

# --- --uninstall: take back what an install did --------------------------------------------------

# take_back_boot_check: boot_check_unit's unit and script, for --uninstall (its records go with
# the record directory).
take_back_boot_check() {
    if target_of "/etc/systemd/system/$check_unit" existing && { [ -e "$target" ] || [ -L "$target" ]; }; then
        service disable "$check_unit"
        remove_own "/etc/systemd/system/$check_unit"
    fi
    remove_own "$check_script"
    if resolve_dir "${check_script%/*}" unlinked && rmdir -- "$dir" 2>/dev/null; then
        say "removed ${check_script%/*}"
    fi
}

# take_back_grub_unit: the oneshot an earlier image build wrote to run update-grub at first boot.
take_back_grub_unit() {
    grub_unit=$tool-update-grub.service
    target_of "/etc/systemd/system/$grub_unit" existing || return 0
    { [ -e "$target" ] || [ -L "$target" ]; } || return 0
    service disable "$grub_unit"
    remove_own "/etc/systemd/system/$grub_unit"
}

# image_units_left: the image's units the bundle enabled, disabled or masked (no unit file of
# the bundle's): their state before the install is not recorded, so it is not guessed.
image_units_left() {
    left=''
    while read -r action unit <&3; do
        [ -n "$unit" ] || continue
        # a unit of the bundle's, or one whose drop-in of the bundle's was taken back above
        case $newline$files in *" /etc/systemd/system/$unit$newline"* | *" /etc/systemd/system/$unit.d/"*) continue ;; esac
        left="${left:+$left, }$action $unit"
    done 3<<SERVICES
$services
SERVICES
    [ -z "$left" ] || say "left as the install made them (their state before is not recorded): $left"
}

# prune_own_dirs: the directories of the record's files that the take-back left empty, each
# and its parents while they are the tool's own (/etc/<tool>, a tuned profile's, /usr/lib/<tool>
# and below: a set's members/<name>/rootfs/...), not merely a path with its name (a user's
# /etc/<tool>-data); never through a link. In a pipe's subshell: a path whose directory is a
# file ends the pruning, not the take-back.
prune_own_dirs() {
    printf '%s\n' "${record_lines:-}" | while IFS= read -r old; do
        stale_candidate "$old" || continue
        old=${old%/*}
        while case $old in /etc/"$tool" | /etc/tuned/"$tool"-* | /etc/tuned/profiles/"$tool"-* | /usr/lib/"$tool" | /usr/lib/"$tool"/* | /usr/local/lib/"$tool" | /usr/local/lib/"$tool"/* | /usr/local/libexec/"$tool") ;; *) false ;; esac; do
            if resolve_dir "$old" unlinked; then
                rmdir -- "$dir" 2>/dev/null || break
                say "removed $old"
            fi
            old=${old%/*}
        done
    done
}

# recorded_profile: the install record (record_lines) lists a tuned profile's file: only then is
# a profile of the tool's in the selection this record's to take out.
recorded_profile() {
    case $newline${record_lines:-} in *"$newline/etc/tuned/"*) return 0 ;; esac
    return 1
}

uninstall_bundle() {
    installed=0 unchanged=0 skipped=0 failed=0 deferred='' deferred_units=''
    say "taking back the $label bundle from $root ($where)"
    removal_reason='taken back'
    remove_stale_files ''
    prune_own_dirs
    remove_own "$record"
    containerd_dropins=''
    unwire_containerd
    left=-
    ! recorded_profile || tuned_unlayer || :
    [ "$left" = - ] || deferred="${deferred:+$deferred, }tuned loads ${left:-its recommended profile}"
    kernel_args=''
    boot_arguments
    take_back_grub_unit
    for own in kernel-args kernel-args-removed kernel-args-rebooted tuned-previous grub-regenerated; do
        remove_own "${record%/*}/$own"
    done
    if resolve_dir "${record%/*}" unlinked && rmdir -- "$dir" 2>/dev/null; then
        say "removed ${record%/*}"
        # a set's record directory is /var/lib/<tool>/set: its parent too, when left empty
        case ${record%/*/*} in *"$tool"*)
            ! resolve_dir "${record%/*/*}" unlinked || ! rmdir -- "$dir" 2>/dev/null || say "removed ${record%/*/*}"
            ;;
        esac
    fi
    image_units_left
    say "deferred to first boot: ${deferred:-nothing}"
    say "taken back: $failed failed"
    [ "$failed" -eq 0 ] || exit 1
    exit 0
}

# --- what a killed run left ----------------------------------------------------------------------

# sweep_temporaries: the temporaries of a run killed before it renamed them (put's
# .<name>.<tool>-tmp.XXXXXX, always beside the file it replaces), removed from every directory
# this script writes to: those of install.list's files and texts (a tuned profile's in both of
# tuned's directories), of the files the install record lists, and the fixed ones below. Only
# that name, never a directory, never through a link (resolve_dir unlinked).
sweep_temporaries() {
    old_record=''
    ! contents_of "$record" || old_record=$contents
    for swept in $(
        {
            printf '%s\n' "$files" | cut -d ' ' -f 2
            printf '%s\n' "$texts" | cut -d ' ' -f 1
            printf '%s\n' "$old_record" | while IFS= read -r old; do
                ! stale_candidate "$old" || printf '%s\n' "$old"
            done
            printf '%s/x\n' "${record%/*}" /etc /etc/tuned /etc/kernel /etc/default /etc/default/grub.d \
                /boot/loader/entries /etc/containerd /etc/systemd/system /usr/lib/bootc/kargs.d "/usr/lib/$tool"
        } | awk '{ sub(/\/[^\/]*$/, "") } sub(/^\/etc\/tuned(\/profiles)?\//, "") { print "/etc/tuned/" $0; $0 = "/etc/tuned/profiles/" $0 } 1' |
            sort -u
    ); do
        is_path "$swept" || continue
        # in a subshell: a component that is no directory is not this sweep's to report
        swept_dir=$( (resolve_dir "$swept" unlinked && printf '%s' "$dir") 2>/dev/null) || continue
        for leftover in "$swept_dir"/.*."$tool"-tmp.??????; do
            if [ -L "$leftover" ] || { [ -e "$leftover" ] && [ ! -d "$leftover" ]; }; then
                rm -f -- "$leftover"
                say "removed $swept/${leftover##*/} (a temporary of an interrupted run)"
            fi
        done
    done
}

# --- --check --pubkey: the signed provenance -----------------------------------------------------

# check_provenance PUBKEY: the bundle's provenance.intoto.jsonl (`gen sign`: a DSSE envelope on
# one line, of an in-toto statement) signed by PUBKEY (PEM, ECDSA P-256) and every file of the
# bundle as its statement says: none changed, missing or added. The signature is checked with the
# node's openssl over DSSE's PAE ("DSSEv1 <len> <type> <len> <payload>", secure-systems-lab/dsse
# protocol.md) before anything of the payload is read; then the statement's subjects (the form
# render/provenance.py writes: sorted keys, two-space indent, "subject" last) as sha256sum lines.
check_provenance() {
    envelope=$bundle/provenance.intoto.jsonl
    { [ -f "$envelope" ] && [ ! -L "$envelope" ]; } || die "provenance: no $envelope (gen sign BUNDLE --key KEY)"
    command -v openssl >/dev/null 2>&1 || die "provenance: verifying it needs openssl"
    work=$(mktemp -d) || die "cannot create a temporary directory"
    # shellcheck disable=SC2020 # each of the five characters becomes a newline: a field a line
    line=$(head -n 1 -- "$envelope" | tr ',{}[]' '\n\n\n\n\n')
    printf '%s\n' "$line" | sed -n 's/^ *"payload": "\([A-Za-z0-9+/=]*\)"$/\1/p' |
        openssl base64 -d -A >"$work/statement" || provenance_bad "$envelope: no payload"
    printf '%s\n' "$line" | grep -qx ' *"payloadType": "application/vnd.in-toto+json"' ||
        provenance_bad "$envelope: not an in-toto statement's envelope"
    { printf 'DSSEv1 28 application/vnd.in-toto+json %s ' "$(wc -c <"$work/statement" | tr -d ' ')"
        cat -- "$work/statement"; } >"$work/pae"
    signed=no
    for sig in $(printf '%s\n' "$line" | sed -n 's/^ *"sig": "\([A-Za-z0-9+/=]*\)"$/\1/p'); do
        printf '%s' "$sig" | openssl base64 -d -A >"$work/sig" || continue
        if openssl dgst -sha256 -verify "$1" -signature "$work/sig" "$work/pae" >/dev/null 2>&1; then
            signed=yes
        fi
    done
    [ "$signed" = yes ] || provenance_bad "$envelope: no signature by $1"
    subjects=$(awk '/^  "subject": \[$/ { s = 1 } s && /^  \]/ { s = 0 }
        s && /"sha256": / { gsub(/[" ]/, ""); sub(/.*:/, ""); d = $0 }
        s && /"name": / { sub(/^ *"name": "/, ""); sub(/"$/, ""); print d "  " $0 }' "$work/statement")
    bad=''
    while read -r digest name <&3; do
        case $name in '' | /* | *..* | *[!A-Za-z0-9._/@+-]*) provenance_bad "a subject is not a plain bundle path" ;; esac
        if [ ! -f "$bundle/$name" ] || [ -L "$bundle/$name" ]; then
            bad="$bad$newline$name: missing"
        elif [ "$(sha256sum <"$bundle/$name" | cut -d' ' -f1)" != "$digest" ]; then
            bad="$bad$newline$name: differs from the signed statement"
        fi
    done 3<<SUBJECTS
$subjects
SUBJECTS
    [ ! -f "$bundle/provenance.json" ] ||
        [ "$(sha256sum <"$bundle/provenance.json")" = "$(sha256sum <"$work/statement")" ] ||
        bad="$bad${newline}provenance.json: differs from the signed statement"
    set -f
    for name in $(cd -- "$bundle" && find . ! -type d | sed 's|^\./||'); do
        case $name in manifest.json | provenance.json | provenance.intoto.jsonl) continue ;; esac
        case "$newline$subjects$newline" in *"  $name$newline"*) ;; *) bad="$bad$newline$name: not in the signed statement" ;; esac
    done
    set +f
    [ -z "$bad" ] || provenance_bad "the bundle is not what its signed provenance says:$bad"
    rm -rf -- "$work"
    say "provenance: signed by $1; every file as it says"
}

provenance_bad() { # message
    rm -rf -- "$work"
    die "provenance: $1"
}

# --- the run ------------------------------------------------------------------------------------

root=/
check_only=no
pubkey=''
uninstall=no
image_build=no
strict=no
no_block=''
while [ $# -gt 0 ]; do
    case $1 in
        --check)
            check_only=yes
            shift
            ;;
        --image-build)
            image_build=yes
            shift
            ;;
        --pubkey)
            [ $# -ge 2 ] || usage 2
            pubkey=$2
            shift 2
            ;;
        --uninstall)
            uninstall=yes
            image_build=yes
            shift
            ;;
        --strict)
            strict=yes
            shift
            ;;
        --no-block)
            no_block=yes
            shift
            ;;
        --root)
            [ $# -ge 2 ] || usage 2
            root=$2
            shift 2
            ;;
        --root=*)
            root=${1#--root=}
            shift
            ;;
        -h | --help) usage 0 ;;
        *) usage 2 ;;
    esac
done

tab=$(printf '\t')
newline='
'
list=$bundle/install.list
if [ ! -f "$list" ] || [ -L "$list" ]; then
    die "bundle is incomplete: install.list is missing" 2
fi
read_list
if [ -n "$pubkey" ]; then
    { [ "$check_only" = yes ] && [ -f "$pubkey" ]; } || usage 2
    check_provenance "$pubkey"
fi
if [ "$check_only" = yes ]; then
    while read -r mode path <&3; do
        if [ -n "$path" ] && { [ ! -f "$bundle/rootfs$path" ] || [ -L "$bundle/rootfs$path" ]; }; then
            die "bundle is incomplete: rootfs$path is missing"
        fi
    done 3<<FILES
$files
FILES
    exit 0
fi
[ -d "$root" ] || die "no such directory: $root" 2
root=$(CDPATH='' cd -P -- "$root" && pwd -P)

# in_chroot: / is not the root of process 1 (systemd-detect-virt --chroot compares the two; without
# it, the same comparison where /proc/1/root can be read, as root).
in_chroot() {
    if command -v systemd-detect-virt >/dev/null 2>&1 && systemd-detect-virt --quiet --chroot; then
        return 0
    fi
    init_root=$(stat -Lc %d:%i /proc/1/root/ 2>/dev/null) || return 1
    [ "$init_root" != "$(stat -Lc %d:%i /)" ]
}

# Live only when nothing says image build: the root is /, systemd runs it, it is not a chroot and
# no --image-build was given. Each reason is said, so a build log shows why nothing was started.
live=no
if [ "$root" != / ]; then
    where="image build: --root $root"
elif [ "$image_build" = yes ]; then
    where='image build: --image-build'
elif [ ! -d /run/systemd/system ]; then
    where='image build: systemd is not running'
elif in_chroot; then
    where='image build: in a chroot'
else
    live=yes
    where='live system'
fi

installed=0
unchanged=0
skipped=0
failed=0
deferred=''
deferred_units=''
sweep_temporaries
if [ "$uninstall" = yes ]; then
    uninstall_bundle # exits
fi
say "installing the $label bundle into $root ($where)"
check_needs

# 1. Files of the overlay, with fixed modes (the record's list: the tuned profile's path as
# tuned_place put it).
installed_paths=$(printf '%s' "$files" | sed 's/^[^ ]* //')
while read -r mode path <&3; do
    [ -z "$path" ] || install_file "$mode" "$path"
done 3<<FILES
$files
FILES

# 2. Files an earlier bundle installed that this one does not carry.
remove_stale_files "$installed_paths"
write_text "$record" "$installed_paths"

# 2b. The drop-ins wired into what reads them (containerd's imports), or taken back.
wire_dropins

# 3. Fixed text files.
while read -r path word <&3; do
    [ -z "$path" ] || write_text "$path" "$word"
done 3<<TEXTS
$texts
TEXTS

# 4. Services and activation.
if [ "$live" = yes ]; then
    run_step reload
fi
while read -r action unit <&3; do
    [ -z "$unit" ] || service "$action" "$unit"
done 3<<SERVICES
$services
SERVICES
if [ "$live" = yes ]; then
    while read -r step word <&3; do
        [ -z "$step" ] || run_step "$step" ${word:+"$word"}
    done 3<<STEPS
$steps
STEPS
fi

# 5. The tuned selection and the boot arguments, live and offline.
if [ -n "$tuned_profile" ] || recorded_profile; then
    tuned_layer
fi
boot_arguments
if [ "$live" = yes ]; then
    say "limits.d applies to new login sessions; system.conf.d defaults and kernel arguments at the next boot"
else
    say "sysctl, tmpfiles, udev, modules and boot units take effect when the image boots"
    report_deferred
fi

say "done: $installed written, $unchanged unchanged, $skipped skipped, $failed failed"
[ "$failed" -eq 0 ] || exit 1
