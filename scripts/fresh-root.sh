# A truly clean Debian 12 root, for scripts/test-fresh and scripts/test-bundle (sourced by both):
# a `debootstrap --variant=minbase bookworm` tree, made once and kept as a tarball ($BASE),
# unpacked anew at $ROOT for every run (so nothing of an earlier run remains), entered with
# chroot, and removed when the script exits (FRESH_KEEP=1: left there, unmounted, for a look).
# The sourcing script sets ROOT and defines say and die; it runs as root.
CACHE=${FRESH_CACHE:-/var/cache/framesrv-fresh}
MIRROR=${FRESH_MIRROR:-http://deb.debian.org/debian}
BASE=$CACHE/bookworm-minbase.tar

# Everything mounted under the root, deepest first.
mounts_under() { awk -v r="$ROOT" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/mounts | sort -r; }

unmount_all() {
    local m
    for m in $(mounts_under); do umount -l "$m" 2>/dev/null || true; done
}

# Removes the root, never while anything (the toolchain, /dev) is still mounted inside it.
remove_root() {
    unmount_all
    [ -z "$(mounts_under)" ] || die "still mounted under $ROOT: $(mounts_under | tr '\n' ' '); not removing it"
    rm -rf --one-file-system "$ROOT"
}

make_base() {
    [ -f "$BASE" ] && return 0
    command -v debootstrap >/dev/null 2>&1 || {
        say "installing debootstrap"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
    }
    local tree=$CACHE/tree
    rm -rf --one-file-system "$tree"
    mkdir -p "$CACHE"
    say "debootstrap --variant=minbase bookworm (once; kept as $BASE)"
    debootstrap --variant=minbase bookworm "$tree" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
        || die "debootstrap failed: see $CACHE/debootstrap.log"
    tar -C "$tree" -cf "$BASE.part" . && mv "$BASE.part" "$BASE"
    rm -rf --one-file-system "$tree"
}

# A new root at $ROOT (an old one removed first) with /proc, /sys, /dev, /dev/shm and /run
# mounted as on a machine, removed (or with FRESH_KEEP unmounted) when the script exits.
new_root() {
    [ -e "$ROOT" ] && remove_root
    make_base
    trap '[ -n "${FRESH_KEEP:-}" ] && unmount_all || remove_root' EXIT
    mkdir -p "$ROOT"
    tar -C "$ROOT" -xf "$BASE"
    # The root a mount of its own, as / is on a machine (ip netns exec remounts / as a slave).
    mount --bind "$ROOT" "$ROOT"
    mount -t proc proc "$ROOT/proc"
    mount -t sysfs sysfs "$ROOT/sys"
    mount --rbind /dev "$ROOT/dev"
    mount --make-rslave "$ROOT/dev"
    mount -t tmpfs -o mode=1777 shm "$ROOT/dev/shm"
    mkdir -p "$ROOT/run"
    mount -t tmpfs tmpfs "$ROOT/run"
}

# Runs ARGS in the root in a clean environment, as a new user would; VAR=value arguments before
# the command add to it (a PATH given so replaces the default one).
in_root() {
    chroot "$ROOT" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
}
