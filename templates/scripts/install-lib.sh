# shellcheck shell=sh
# install.sh's functions that a first boot runs too (a fixed script, identical in every bundle).
# install.sh sources it from its bundle. cloud-init's user-data writes it, without its comment
# lines, to /run/<tool>/install-lib.sh, and the first-boot script sources it and calls the same
# functions in install.sh's order for a live system: the install record, the stale files,
# services and activation steps, the tuned selection and the boot arguments
# (generator/render/firstboot.py). One copy of the shell for both paths.
#
# The caller sets: tool, root, live, record, bundle (install_file's rootfs/), kernel_args,
# tuned_profile and the counters installed, unchanged, skipped, failed, deferred; no_block, when
# set (install.sh --no-block), makes every unit start, restart and stop queue its job, not wait. For an image
# (live=no: install.sh only; a first boot is live) these functions call install.sh's own
# service_offline, image_mechanism, boot_bootc, boot_image_grub, boot_check_unit, edit_bls_entry
# and edit_grub_default; install_file calls merge_nccl_conf and carry_image_cri for the files a
# first boot never installs with it (nccl.conf, rccl.conf, containerd's drop-in).
# shellcheck disable=SC2154 # the variables above are the caller's

say() {
    printf '%s\n' "$tool: $*"
}

die() { # message [exit status]
    printf '%s\n' "$tool: error: $1" >&2
    exit "${2:-1}"
}

# --- the data -----------------------------------------------------------------------------------
is_word() { # word: the alphabet of plain data words
    case $1 in '' | *[!A-Za-z0-9_.,:=+/@%*-]*) return 1 ;; esac
    return 0
}

is_path() { # an absolute path without '..', '//', a trailing '/' or any unusual character
    case $1 in
        /*/ | */../* | */.. | *//* | */./* | */. | *[!A-Za-z0-9@_.:/-]*) return 1 ;;
        /?*) return 0 ;;
    esac
    return 1
}

is_profile() { # a tuned profile name (tuned's loader accepts [a-zA-Z0-9_.-], no leading '.')
    case $1 in '' | .* | *[!A-Za-z0-9_.-]*) return 1 ;; esac
    return 0
}

# --- paths inside the target root ---------------------------------------------------------------
# resolve_dir PATH create|existing|unlinked: $dir is the physical directory of the target's PATH.
# Each component is resolved inside the root: a link that leaves it, absolute or relative, is
# refused, and so is a component that is not a directory. With "existing", a missing one returns
# 1; "unlinked" (a removal) passes no link at all, on / too: status 2 at the first one.
resolve_dir() {
    if [ "$root" = / ] && [ "$2" != unlinked ]; then
        dir=$1
        if [ ! -d "$dir" ]; then
            [ "$2" = create ] || return 1
            mkdir -p -- "$dir" || die "cannot create $dir"
        fi
        return 0
    fi
    dir=${root%/}
    rest=${1#/}
    while [ -n "$rest" ]; do
        name=${rest%%/*}
        case $rest in */*) rest=${rest#*/} ;; *) rest='' ;; esac
        next=$dir/$name
        if [ -L "$next" ]; then
            [ "$2" != unlinked ] || return 2
            case $(readlink -- "$next") in
                /*) die "$next is an absolute symbolic link that leaves the image; refusing to write through it" ;;
            esac
            real=$(CDPATH='' cd -P -- "$next" 2>/dev/null && pwd -P) ||
                die "$next is a symbolic link to no directory; refusing to write through it"
            case $real in
                "$root" | "$root"/*) dir=$real ;;
                *) die "$next is a symbolic link that leaves the image; refusing to write through it" ;;
            esac
        elif [ -d "$next" ]; then
            dir=$next
        elif [ -e "$next" ]; then
            die "$next is not a directory"
        elif [ "$2" = create ]; then
            mkdir -- "$next" || die "cannot create $next"
            dir=$next
        else
            return 1
        fi
    done
    return 0
}

# target_of PATH create|existing|unlinked: $target is PATH in the root (its directory resolved).
target_of() {
    resolve_dir "${1%/*}" "$2" || return
    [ -n "${1%/*}" ] || dir=${dir%/}
    target=$dir/${1##*/}
    if [ -d "$target" ] && [ ! -L "$target" ]; then
        die "$target is a directory where the file $1 goes; refusing"
    fi
    return 0
}

# removable PATH: $target is PATH in the root, there, and reached through no symbolic link;
# status 1 when absent or when a directory on its way is a link (said, counted failed).
removable() {
    target_of "$1" unlinked || {
        [ $? = 1 ] || {
            say "$1: a directory on its path is a symbolic link; not removed"
            failed=$((failed + 1))
        }
        return 1
    }
    [ -e "$target" ] || [ -L "$target" ]
}

same_file() { # source target mode: the target is a plain file with this content and mode
    [ -f "$2" ] && [ ! -L "$2" ] && cmp -s -- "$1" "$2" && [ "$(stat -c %a -- "$2")" = "${3#0}" ]
}

# put SOURCE MODE: replace $target with a copy of SOURCE, atomically, through a temporary that
# mktemp creates beside it (never a fixed name that could be planted; .<name>.<tool>-tmp.XXXXXX,
# which install.sh sweeps after a killed run); a link at $target is replaced, never followed.
put() {
    temporary=$(mktemp -- "$dir/.${target##*/}.$tool-tmp.XXXXXX") || die "cannot create a temporary file in $dir"
    if ! cat -- "$1" >"$temporary" || ! chmod "$2" "$temporary"; then
        rm -f -- "$temporary"
        die "cannot write $temporary"
    fi
    if [ "$(id -u)" = 0 ]; then
        chown 0:0 "$temporary"
    fi
    if [ -L "$target" ]; then
        rm -f -- "$target"
    fi
    mv -f -- "$temporary" "$target"
}

# merge_daemon_json: dockerd reads this one file and no drop-ins, and an image often has one
# already (registry mirrors, log options, a data root). So the bundle's daemon.json is merged into
# the one in place instead of replacing it: objects merged key by key, the bundle's values
# winning, every other key kept (jq's `*` on objects, "merged recursively"; python3 when there is
# no jq), sorted and indented as the bundle writes it. $source becomes the merged file; a
# re-install merges to the same bytes (unchanged). A link is replaced, never followed or read.
# Returns 1 (the file left as it is, the step failed) when the one in place is not a JSON object
# or there is no tool here to merge it.
merge_daemon_json() { # path-in-root
    { [ -f "$target" ] && [ ! -L "$target" ]; } || return 0
    ! cmp -s -- "$source" "$target" || return 0
    merged=$(mktemp) || die "cannot create a temporary file"
    if command -v jq >/dev/null 2>&1; then
        jq -S --indent 2 -s 'if (.[0] | type) == "object" then .[0] * .[1] else error end' \
            -- "$target" "$source" >"$merged" 2>/dev/null
    elif command -v python3 >/dev/null 2>&1; then
        python3 -I -c 'import json, sys
def merge(base, ours):
    if not isinstance(base, dict) or not isinstance(ours, dict):
        return ours
    return {**base, **{key: merge(base.get(key), value) for key, value in ours.items()}}
with open(sys.argv[1]) as there, open(sys.argv[2]) as ours:
    base = json.load(there)
    if not isinstance(base, dict):
        sys.exit(1)
    print(json.dumps(merge(base, json.load(ours)), indent=2, sort_keys=True))' \
            "$target" "$source" >"$merged" 2>/dev/null
    else
        rm -f -- "$merged"
        say "$target: a daemon.json is in place and neither jq nor python3 is here to merge the bundle's keys into it: left as it is"
        failed=$((failed + 1))
        return 1
    fi || {
        rm -f -- "$merged"
        say "$target: the daemon.json in place is not a JSON object: left as it is, the bundle's keys not merged"
        failed=$((failed + 1))
        return 1
    }
    say "merging the bundle's keys into $1: its values win, the file's other keys are kept"
    source=$merged
}

nccl_conf_image() { printf '%s' "${record%/*}/${1##*/}.image"; } # path-in-root

# ours_in_place PATH: the install record lists PATH and the file there starts with the bundle's
# header (_header.j2): an earlier install wrote it. An image's file the merge left as it is (too
# large) is in the record too, and must be neither replaced nor removed later.
ours_in_place() {
    contents_of "$record" || return 1
    printf '%s\n' "$contents" | grep -qxF -- "$1" || return 1
    target_of "$1" existing || return 1
    { [ -f "$target" ] && [ ! -L "$target" ]; } || return 1
    head -c 4096 -- "$target" | sed -n 2p | grep -q "^# Generated by $tool: "
}

# restore_nccl_conf: a bundle without NCCL settings puts the image's own file back, byte for
# byte with its mode; 1 when none was kept (the bundle's file is then removed).
restore_nccl_conf() { # path-in-root
    kept=$(nccl_conf_image "$1")
    removable "$kept" || return 1
    { [ -f "$target" ] && [ ! -L "$target" ]; } || return 1
    kept_file=$target
    target_of "$1" create
    put "$kept_file" "$(stat -c %a -- "$kept_file")"
    rm -f -- "$kept_file"
    say "restored the image's own $1 (the bundle no longer sets NCCL variables)"
}

# tuned_place PATH: $place is where PATH goes; for the bundle's tuned profile, the directory the
# target's tuned reads local profiles from, told by where its package put its own: tuned 2.23
# moved them to /usr/lib/tuned/profiles/<name> and reads local ones from /etc/tuned/profiles only
# (redhat-performance/tuned 6d3aa94: Makefile TUNED_PROFILESDIR, tuned/consts.py
# CFG_DEF_PROFILE_DIRS); up to 2.22 /usr/lib/tuned/<name> and /etc/tuned/<name> (LOAD_DIRECTORIES).
# Without tuned in the target the bundle's path stays. The record gets the path used.
tuned_place() {
    place=$1
    case $1 in /etc/tuned/*"$tool"-*/tuned.conf) ;; *) return 0 ;; esac
    if resolve_dir /usr/lib/tuned/profiles existing; then
        place=/etc/tuned/profiles
    else
        resolve_dir /usr/lib/tuned existing || return 0
        place=/etc/tuned
    fi
    name=${1%/*}
    place=$place/${name##*/}/tuned.conf
    [ "$place" = "$1" ] && return
    say "$1 goes to $place: the directory tuned reads here"
    installed_paths=$(printf '%s\n' "$installed_paths" | awk -v a="$1" -v b="$place" '$0 == a { $0 = b } 1')
}

# --- the bundle's files into the target -----------------------------------------------------------
install_file() { # mode path-in-root
    source="$bundle/rootfs$2"
    if [ ! -f "$source" ] || [ -L "$source" ]; then
        die "bundle is incomplete: rootfs$2 is missing"
    fi
    from=$source
    tuned_place "$2"
    set -- "$1" "$place"
    target_of "$2" create
    [ "$2" != /etc/docker/daemon.json ] || merge_daemon_json "$2" || return 0
    case $2 in /etc/[nr]ccl.conf) merge_nccl_conf "$2" || return 0 ;; esac
    case $2 in /etc/containerd/conf.d/*.toml) carry_image_cri "$2" ;; esac
    if same_file "$source" "$target" "$1"; then
        [ "$source" = "$from" ] || rm -f -- "$source"
        say "unchanged $2"
        unchanged=$((unchanged + 1))
        return 0
    fi
    put "$source" "$1"
    [ "$source" = "$from" ] || rm -f -- "$source"
    say "installed $2 (mode $1)"
    installed=$((installed + 1))
}

write_text() { # path-in-root text (one line or more, without the final newline)
    text_file=$(mktemp) || die "cannot create a temporary file"
    printf '%s\n' "$2" >"$text_file"
    target_of "$1" create
    if same_file "$text_file" "$target" 0644; then
        say "unchanged $1"
        unchanged=$((unchanged + 1))
    else
        put "$text_file" 0644
        say "wrote $1"
        installed=$((installed + 1))
    fi
    rm -f -- "$text_file"
}

# --- services -----------------------------------------------------------------------------------
# is_static [--root=DIR] UNIT: a packaged unit with no [Install] section in it or any drop-in,
# so `systemctl enable` changes nothing and still exits 0 (Ubuntu's nvidia-persistenced.service
# without the bundle's drop-in is started by udev only). The tool's own units have [Install].
is_static() {
    case $2 in "$tool"-*) return 1 ;; esac
    [ "$(systemctl ${1:+"$1"} is-enabled -- "$2" 2>/dev/null </dev/null)" = static ]
}

static_unit() { # unit what-happened
    say "enable $1: the unit is static (no [Install] section in it or a drop-in): $2; only another unit, a socket, a timer or udev starts it"
    failed=$((failed + 1))
}

service_live() { # action unit
    if [ "$1" != mask ] && ! systemctl cat -- "$2" >/dev/null 2>&1 </dev/null; then
        say "$2 is not installed: $1 skipped"
        skipped=$((skipped + 1))
        return 0
    fi
    if systemctl ${no_block:+--no-block} --quiet "$1" --now -- "$2" </dev/null; then
        if [ "$1" = enable ] && is_static '' "$2"; then
            static_unit "$2" "started now, not enabled for the next boot"
            return 0
        fi
        say "$1 $2"
    else
        say "$1 $2 failed"
        failed=$((failed + 1))
    fi
}

service() { # action unit: on the live system or in the image
    if [ "$live" = yes ]; then service_live "$1" "$2"; else service_offline "$1" "$2"; fi
}

# --- activation steps on a live system: one function per step name of install.list -------------
step_reload() { systemctl daemon-reload; }
step_sysctl() { sysctl --system >/dev/null; }
step_tmpfiles() { systemd-tmpfiles --create "$1"; }
step_modules() { systemctl ${no_block:+--no-block} restart systemd-modules-load.service; }
step_udev() { udevadm control --reload && udevadm trigger --action=change --subsystem-match=block; }

# With no profile left (a bundle without one, over one that had it), tuned-adm auto_profile:
# tuned's automatic mode, its recommended profile, what it loads at its next start without the
# selection files (tuned/daemon/daemon.py _get_startup_profile); no profile is guessed here.
step_tuned() { # profiles: the selection, left to right (tuned-adm takes several); '': none
    if ! systemctl is-active --quiet tuned.service; then
        what=${1:+the profiles}
        say "tuned is not running; it loads ${what:-its recommended profile} when it starts"
    elif [ -z "$1" ]; then
        say "no profile is left selected: tuned loads its recommended profile"
        tuned-adm auto_profile
    else
        set -f
        # shellcheck disable=SC2086 # one argument per profile name; names are checked words
        tuned-adm profile $1
    fi
}

# The container runtime and kubelet files (issue 14), after daemon-reload. containerd is
# restarted only if it runs (its shims keep the containers alive; a stopped one reads the files
# when it starts). dockerd stops its containers unless live-restore is on, and kubelet refuses a
# new CPU or memory manager policy while its old checkpoints are there: neither is restarted.
# nvidia-persistenced is restarted only if it runs: one started with Ubuntu's packaged
# --no-persistence-mode keeps persistence off until it restarts with the bundle's drop-in.
step_runtime() { # containerd,docker,kubelet,persistenced (the parts the plan configures)
    case ,$1, in *,containerd,*) systemctl ${no_block:+--no-block} try-restart containerd.service ;; esac
    case ,$1, in *,persistenced,*) systemctl ${no_block:+--no-block} try-restart nvidia-persistenced.service ;; esac
    case ,$1, in *,docker,*) say "restart docker.service when its containers may stop" ;; esac
    case ,$1, in *,kubelet,*)
        say "kubelet: drain the node, remove /var/lib/kubelet/cpu_manager_state and memory_manager_state, restart kubelet"
        ;;
    esac
}

step_bootloader() { # after the bundle's files are in place; $mechanism, $kernel_args, $removed
    if [ "$mechanism" = bls ]; then
        if ! command -v grubby >/dev/null 2>&1; then
            say "the boot entries are BLS but there is no grubby; installed kernels keep their arguments"
            return 1
        fi
        grubby --update-kernel=ALL ${kernel_args:+"--args=$kernel_args"} ${removed:+"--remove-args=$removed"}
    elif command -v update-grub >/dev/null 2>&1; then
        update-grub
    else
        say "no update-grub or grubby; add to the kernel command line: $kernel_args"
    fi
    say "kernel arguments take effect at the next boot"
}

summary_of() { # step name
    case $1 in
        reload) printf '%s' "reload systemd units" ;;
        sysctl) printf '%s' "apply sysctl.d" ;;
        tmpfiles) printf '%s' "write sysfs values" ;;
        modules) printf '%s' "load modules" ;;
        udev) printf '%s' "apply I/O scheduler rules" ;;
        tuned) printf '%s' "switch tuned to the profile" ;;
        runtime) printf '%s' "apply the unit drop-ins, container runtime and kubelet files" ;;
        bootloader) printf '%s' "refresh the boot loader configuration" ;;
    esac
}

run_step() { # name [word]
    step_name=$1
    shift
    summary=$(summary_of "$step_name")
    say "$summary"
    if ! ("step_$step_name" "$@") </dev/null; then
        say "$summary: failed"
        failed=$((failed + 1))
    fi
}

# --- files an earlier bundle installed that this one does not carry -----------------------------
# A line of the install record is used only when it names a file this tool could have installed:
# under /etc with the tool's name in the file's own name, a file of /etc/<tool>, of the scripts'
# directory (before 0.2.0 /usr/local/libexec/<tool>) or of a tuned profile directory of the
# tool's, or a file whose name cannot carry the tool's, each read at one fixed path by its consumer (layout.UNNAMED_TARGETS).
stale_candidate() { # path
    is_path "$1" || return 1
    case $1 in /etc/docker/daemon.json | /etc/nccl.conf | /etc/rccl.conf) return 0 ;; esac
    case ${1%/*} in /etc/"$tool" | /usr/lib/"$tool" | /usr/lib/"$tool"/set* | /usr/local/libexec/"$tool" | /usr/local/lib/"$tool"/set*) return 0 ;; esac
    case ${1%/*/*} in /etc/tuned | /etc/tuned/profiles) case ${1#"${1%/*/*}"/} in "$tool"-*/tuned.conf) return 0 ;; esac ;; esac
    case $1 in /etc/*/*"$tool"*) case ${1##*/} in *"$tool"*) return 0 ;; esac ;; esac
    return 1
}

removal_reason='no longer in the bundle'

remove_stale() { # path-in-root of a file an earlier bundle installed
    # the image's own nccl.conf (rccl.conf), kept by merge_nccl_conf, goes back instead
    case $1 in /etc/nccl.conf | /etc/rccl.conf)
        restore_nccl_conf "$1" && return 0
        target_of "$1" existing || return 0
        if [ -f "$target" ] && [ ! -L "$target" ] && ! ours_in_place "$1"; then
            say "$1 is the image's own, not the bundle's: left in place"
            return 0
        fi
        ;;
    esac
    removable "$1" || return 0
    gone=$target
    case $1 in
        # a timer too (the metrics timer): disabled first, so no link in timers.target.wants
        # is left pointing at the removed file
        /etc/systemd/system/*.service | /etc/systemd/system/*.timer | /etc/systemd/system/*.path) service disable "${1##*/}" ;;
        # A drop-in with an [Install] section (nvidia-persistenced's WantedBy): the unit is
        # disabled while the drop-in is still there, so that the links its [Install] made go too
        # (systemctl disable removes the links the unit's [Install], drop-ins included, names).
        /etc/systemd/system/*.service.d/*.conf)
            if contents_of "$1" && printf '%s\n' "$contents" | grep -q '^\[Install\]'; then
                unit_of_dropin=${1%/*}
                unit_of_dropin=${unit_of_dropin##*/}
                service disable "${unit_of_dropin%.d}"
            fi
            ;;
    esac
    rm -f -- "$gone"
    say "removed $1 ($removal_reason)"
}

remove_stale_files() { # the new record's text
    target_of "$record" existing || return 0
    [ -e "$target" ] || [ -L "$target" ] || return 0
    # bounded: a bundle installs tens of files, and a forged record of 60,000 lines ran minutes
    if [ -L "$target" ] || [ ! -f "$target" ] || [ "$(stat -c %s -- "$target")" -gt 65536 ] ||
        [ "$(grep -c '' -- "$target")" -gt 1024 ]; then
        say "the install record $record is not a plain file of at most 1024 lines and 64 KiB; it was not used"
        failed=$((failed + 1))
        return 0
    fi
    record_lines=$(cat -- "$target")
    line_number=0
    while IFS= read -r old <&3; do
        line_number=$((line_number + 1))
        [ -n "$old" ] || continue
        if ! stale_candidate "$old"; then
            say "line $line_number of the install record $record is not a file $tool installs; ignored"
            failed=$((failed + 1))
        elif ! printf '%s\n' "$1" | grep -qxF -- "$old"; then
            remove_stale "$old"
        fi
    done 3<<RECORD
$record_lines
RECORD
}

# --- files of the target read as data: never through a link, never a FIFO, never echoed -------
# contents_of PATH: $contents is the text of the target's regular file PATH (at most 64 KiB).
# Status 1: PATH is absent; 2: it is a link or not a regular file (not read).
contents_of() {
    contents=''
    target_of "$1" existing || return 1
    [ -e "$target" ] || [ -L "$target" ] || return 1
    if [ -L "$target" ] || [ ! -f "$target" ]; then
        return 2
    fi
    contents=$(head -c 65536 -- "$target")
}

words_not_in() { # list other: the words of list that other lacks
    set -f
    out=''
    for word in $1; do
        case " $2 " in *" $word "*) ;; *) out="${out:+$out }$word" ;; esac
    done
    set +f
    printf '%s' "$out"
}

is_plain_cmdline() { # text: words of the safe alphabet only (no quotes, no $kernelopts)
    set -f
    for word in $1; do
        is_word "$word" || {
            set +f
            return 1
        }
    done
    set +f
}

# is_grub_variable WORD: a whole word that grub2's blscfg expands from its environment when it
# reads an entry: '$' and a name of letters, digits and '_' (rhboot/grub2 rhel-9-main,
# grub-core/commands/blscfg.c expand_val(): a variable ends at the first character that is not
# alphanumeric or '_'). tuned's kernel-install plugin appends $tuned_params to the options of
# grub's entries (redhat-performance/tuned 92-tuned.install); RHEL 8 entries use $kernelopts.
is_grub_variable() {
    case $1 in \$ | \$*[!A-Za-z0-9_]*) return 1 ;; \$?*) return 0 ;; esac
    return 1
}

# is_boot_cmdline TEXT: plain words and whole blscfg variables: the options of a BLS entry or
# /etc/kernel/cmdline that can be edited as text (a variable stays where it stands; anything
# else, quotes or a '$' inside a word, is not edited).
is_boot_cmdline() {
    set -f
    for word in $1; do
        is_word "$word" || is_grub_variable "$word" || {
            set +f
            return 1
        }
    done
    set +f
}

without_variables() { # text: its words less the blscfg variables
    set -f
    out=''
    for word in $1; do
        is_grub_variable "$word" || out="${out:+$out }$word"
    done
    set +f
    printf '%s' "$out"
}

# Arguments whose value is a comma-separated list that their reader accumulates: the image's
# list and the bundle's are merged (each element once, the image's first), never replaced.
#   modprobe.blacklist   kmod, libkmod/libkmod-config.c kcmdline_parse_result(): every
#                        occurrence, split at ','
#   rd.driver.blacklist  dracut, modules.d/90kernel-modules/parse-kernel.sh: every occurrence
#                        (getargs), split at ','
#   module_blacklist     the kernel, kernel/module/main.c: a charp core_param (the last occurrence
#                        wins), split at ',' by blacklisted(): one merged word keeps both lists
list_keys=' modprobe.blacklist rd.driver.blacklist module_blacklist '

is_list_arg() { # word: key=list with one of the list keys
    case $1 in *=*) ;; *) return 1 ;; esac
    case $list_keys in *" ${1%%=*} "*) return 0 ;; esac
    return 1
}

# list_elements KEY WORDS: the elements of each KEY=list among WORDS, each once, in order.
list_elements() {
    set -f
    elements=''
    for word in $2; do
        case $word in "$1"=*) ;; *) continue ;; esac
        rest=${word#*=},
        while [ -n "$rest" ]; do
            element=${rest%%,*}
            rest=${rest#*,}
            [ -n "$element" ] || continue
            case ,$elements, in *",$element,"*) ;; *) elements="${elements:+$elements,}$element" ;; esac
        done
    done
    printf '%s' "$elements"
}

without_elements() { # list drop: the elements of the comma list not in the other
    kept=''
    rest=${1:+$1,}
    while [ -n "$rest" ]; do
        element=${rest%%,*}
        rest=${rest#*,}
        case ,$2, in *",$element,"*) ;; *) kept="${kept:+$kept,}$element" ;; esac
    done
    printf '%s' "$kept"
}

# image_list KEY CURRENT: the image's elements of KEY in CURRENT, less those the tool added
# before (an element the image had itself and an earlier bundle added too goes with it).
image_list() {
    without_elements "$(list_elements "$1" "$2")" "$(list_elements "$1" "$removed")"
}

# edited_cmdline CURRENT: CURRENT without the words the tool removes and without any argument of
# the bundle's names, then the bundle's arguments; a second edit changes nothing. A blscfg
# variable ($tuned_params) is no argument of the bundle's and is never removed: it keeps its place.
# A list argument (list_keys) of the bundle's carries the image's elements first, then its own.
edited_cmdline() {
    set -f
    out=''
    for word in $1; do
        case " $removed " in *" $word "*) continue ;; esac
        key=${word%%=*}
        keep=yes
        for arg in $kernel_args; do
            [ "$key" != "${arg%%=*}" ] || keep=no
        done
        if [ "$keep" = yes ] && is_list_arg "$word" && [ -n "$(list_elements "$key" "$removed")" ]; then
            word=$key=$(image_list "$key" "$word")
            [ "$word" != "$key=" ] || keep=no
        fi
        [ "$keep" = no ] || out="${out:+$out }$word"
    done
    for arg in $kernel_args; do
        if is_list_arg "$arg"; then
            key=${arg%%=*}
            arg=$key=$(list_elements "$key" "$key=$(image_list "$key" "$1") $arg")
        fi
        out="${out:+$out }$arg"
    done
    set +f
    printf '%s' "$out"
}

# --- boot arguments, per mechanism (install.sh's header) -----------------------------------------
# read_added_args: $added, what an earlier install added, from its record; 1 if it is unusable.
read_added_args() {
    added=''
    status=0
    contents_of "$args_record" || status=$?
    case $status in
        1) return 0 ;;
        2)
            say "the kernel-argument record $args_record is not a plain file; it was not used"
            return 1
            ;;
    esac
    if ! is_plain_cmdline "$contents"; then
        say "the kernel-argument record $args_record is not a list of arguments; it was not used"
        return 1
    fi
    added=$(printf '%s' "$contents" | tr '\n' ' ')
}

bls_entries() { # the image paths of the BLS entries, one a line, in name order
    resolve_dir /boot/loader/entries existing || return 0
    for entry in "$dir"/*.conf; do
        [ -e "$entry" ] || [ -L "$entry" ] || continue
        case ${entry##*/} in
            *[!A-Za-z0-9@_.:+-]*) printf '%s\n' "$tool: a BLS entry with an unusual name is skipped" >&2 ;;
            *) printf '%s\n' "/boot/loader/entries/${entry##*/}" ;;
        esac
    done
}

# boot_mechanism: $mechanism is bls when the target boots from BLS entries (RHEL 9), else
# grub-dropin (Debian, Ubuntu: grub-mkconfig sources /etc/default/grub.d/*.cfg).
boot_mechanism() {
    mechanism=grub-dropin
    resolve_dir /boot/loader/entries existing || true
    entries=$(bls_entries)
    status=0
    contents_of /etc/default/grub || status=$?
    if [ -n "$entries" ]; then
        mechanism=bls
    elif [ "$status" -eq 0 ] && printf '%s\n' "$contents" |
        grep -Eq "^[[:space:]]*(export[[:space:]]+)?GRUB_ENABLE_BLSCFG=(true|\"true\"|'true')[[:space:]]*(#.*)?$"; then
        mechanism=bls
    fi
}

# edit_kernel_cmdline SEED: /etc/kernel/cmdline, which kernel-install reads for kernels installed
# later; a missing one starts from SEED (the options of the last BLS entry, less its blscfg
# variables: every kernel-install layout reads the file, only grub's blscfg expands them, and
# tuned's 92-tuned.install appends $tuned_params to each new grub entry itself).
edit_kernel_cmdline() {
    status=0
    contents_of /etc/kernel/cmdline || status=$?
    case $status in
        0) current=$(printf '%s' "$contents" | tr '\n' ' ') ;;
        1) current=$1 ;;
        *)
            say "/etc/kernel/cmdline is not a plain file; not edited"
            return 1
            ;;
    esac
    if [ "$status" -eq 1 ] && [ -z "$current" ]; then
        say "no /etc/kernel/cmdline and no BLS entry to start it from; kernels installed later lack the arguments"
        return 1
    fi
    if ! is_boot_cmdline "$current"; then
        say "/etc/kernel/cmdline is not plain words or grub variables (quotes, or a '\$' inside a word); not edited"
        return 1
    fi
    write_text /etc/kernel/cmdline "$(edited_cmdline "$current")"
}

boot_bls() { # the BLS entries and GRUB_CMDLINE_LINUX (grubby live, text offline), then /etc/kernel/cmdline
    if [ "$live" = yes ]; then
        run_step bootloader
    else
        while read -r entry <&3; do
            [ -z "$entry" ] || edit_bls_entry "$entry" || failed=$((failed + 1))
        done 3<<ENTRIES
$entries
ENTRIES
        edit_grub_default || failed=$((failed + 1))
    fi
    last_entry=$(bls_entries | tail -n 1)
    seed=''
    if [ -n "$last_entry" ] && contents_of "$last_entry"; then
        seed=$(printf '%s\n' "$contents" | sed -n 's/^options[[:space:]]*//p' | head -n 1)
        # RHEL 8's entries say 'options $kernelopts' (rhboot/grubby grubby-bls before fc69ba6):
        # the words, root= among them, are in /boot/grub2/grubenv, which grub2-mkconfig writes;
        # a file started without them would lack root= for the kernels kernel-install adds later
        case " $seed " in *" \$kernelopts "*) contents_of /etc/kernel/cmdline || {
            say "/etc/kernel/cmdline not started: the entries take \$kernelopts from grubenv"
            return 0
        } ;; esac
        ! is_boot_cmdline "$seed" || seed=$(without_variables "$seed")
    fi
    edit_kernel_cmdline "$(edited_cmdline "$seed")" || failed=$((failed + 1))
}

boot_arguments() {
    args_record=${record%/*}/kernel-args
    grub_deferred=
    failed_before=$failed
    read_added_args || failed=$((failed + 1))
    removed=$(words_not_in "$added" "$kernel_args")
    [ -n "$kernel_args" ] || [ -n "$removed" ] || return 0
    boot_mechanism
    [ "$live" = yes ] || image_mechanism
    say "boot arguments ($mechanism): add '${kernel_args:-nothing}', remove '${removed:-nothing}'"
    if [ "$mechanism" = bootc ]; then
        boot_bootc
    elif [ "$mechanism" = bls ]; then
        boot_bls
    elif [ "$live" = yes ]; then
        run_step bootloader
    else
        boot_image_grub
    fi
    [ "$live" = yes ] || deferred="${deferred:+$deferred, }the kernel arguments (${kernel_args:-none; removed: $removed}$grub_deferred)"
    # Only a complete edit is recorded: after a failure the next run removes the old ones again.
    if [ "$failed" -eq "$failed_before" ]; then
        write_text "$args_record" "$(printf '%s' "$kernel_args" | tr ' ' '\n')"
        [ "$live" = yes ] || boot_check_unit
    fi
}

# --- tuned: the bundle's profile layered on the selected one ------------------------------------
# tuned's own files (tuned/consts.py ACTIVE_PROFILE_FILE, PROFILE_MODE_FILE)
tuned_active=/etc/tuned/active_profile
tuned_mode=/etc/tuned/profile_mode

# tuned_selection: $base is the selection less the tool's profiles and $ours says whether it had
# one; status 1 (said, counted failed) when active_profile is no plain list of profile names.
tuned_selection() {
    base='' ours=no status=0
    contents_of "$tuned_active" || status=$?
    if [ "$status" -eq 2 ]; then
        say "$tuned_active is not a plain file; the tuned selection is left alone"
        failed=$((failed + 1))
        return 1
    fi
    set -f
    for name in $contents; do
        if ! is_profile "$name"; then
            set +f
            say "$tuned_active is not a list of profile names; the tuned selection is left alone"
            failed=$((failed + 1))
            return 1
        fi
        case $name in "$tool"-*) ours=yes ;; *) base="${base:+$base }$name" ;; esac
    done
    set +f
}

# remove_own PATH: a file of the tool's own state in the target (the record and its sidecars).
remove_own() {
    removable "$1" || return 0
    rm -f -- "$target"
    say "removed $1"
}

# tuned_unlayer: the tool's profiles dropped from the selection; when no other profile is left,
# the selection files go (tuned then starts with its recommended profile, as before any install:
# tuned/daemon/daemon.py _get_startup_profile). $left: the profiles left, '' when the files
# went, '-' when none of ours was selected. Status 1: no list to edit (said, counted failed).
tuned_unlayer() {
    left=-
    tuned_selection || return 1
    [ "$ours" = yes ] || return 0
    left=$base
    if [ -n "$base" ]; then
        # profile_mode stays manual: tuned reads a selection without one as manual too
        # (tuned/daemon/daemon.py _get_startup_profile: manual = profile is not None)
        write_text "$tuned_active" "$base"
    else
        remove_own "$tuned_active"
        remove_own "$tuned_mode"
    fi
}

# tuned_applies SELECTION ('' for none: tuned's recommended profile): live now, else deferred.
tuned_applies() {
    if [ "$live" = yes ]; then
        run_step tuned "$1"
    else
        deferred="${deferred:+$deferred, }tuned loads ${1:-its recommended profile}"
    fi
}

# tuned_layer: the bundle's profile last in the selection. A bundle without one (tuned: off)
# takes the tool's out, as --uninstall does: the install record removes an earlier bundle's
# profile files, and tuned refuses a selection that names a missing profile, loading none of it
# (tuned/daemon/daemon.py _load_profiles: "Requested profile ... doesn't exist";
# tuned/profiles/loader.py Loader._load_profile: "Cannot find profile"). tuned-previous goes too:
# with none of ours selected there is nothing to restore, and a later layered install records
# the selection it then finds.
tuned_layer() {
    previous_record=${record%/*}/tuned-previous
    if [ -z "$tuned_profile" ]; then
        tuned_unlayer || return 0
        remove_own "$previous_record"
        [ "$left" = - ] || tuned_applies "$left"
        return 0
    fi
    tuned_selection || return 0
    # The selection before the tool's first install, kept once: the one to restore.
    status=0
    contents_of "$previous_record" || status=$?
    if [ "$status" -eq 1 ]; then
        write_text "$previous_record" "$base"
    fi
    selection="${base:+$base }$tuned_profile"
    write_text "$tuned_active" "$selection"
    write_text "$tuned_mode" manual
    tuned_applies "$selection"
}
