# shellcheck shell=bash
# Debian root filesystems for the scripts that need one: the Slurm chroots (tools/slurm-cluster.sh)
# and the controller image's local base (tools/controller-image.sh); sourced, not run. Root only.
#
# The sourcing script defines log MESSAGE and die MESSAGE, and sources tools/lib/host-packages.sh.

is_mounted() { awk -v p="$1" '$2 == p { f = 1 } END { exit !f }' /proc/mounts; }

# proc, sys, dev, dev/pts: what apt's postinst scripts and the daemons need. Plain (non-recursive)
# mounts, each only if not already there, so a second start does not stack them.
mount_root() {
  local r=$1
  is_mounted "$r/proc"    || mount -t proc proc "$r/proc"
  is_mounted "$r/sys"     || mount -t sysfs sysfs "$r/sys"
  is_mounted "$r/dev"     || mount --bind /dev "$r/dev"
  is_mounted "$r/dev/pts" || mount --bind /dev/pts "$r/dev/pts"
}

# Unmount everything below $1, deepest first.
umount_root() {
  local r=$1 m
  awk -v p="$r/" 'index($2, p) == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m"
  done
}

# Delete a directory that may still hold mounts: unmount first, and never cross into another
# filesystem (a leftover bind of /dev must not take the host's /dev with it).
remove_tree() {
  umount_root "$1"
  rm -rf --one-file-system "$1"
}

# debootstrap_tree DIR SUITE MIRROR LOG PACKAGE...: a minbase Debian SUITE in the existing DIR, with
# PACKAGEs installed and apt's cache emptied; output to LOG, its tail shown on failure. No service
# starts from a postinst (policy-rc.d stays, as in Debian's container images). DIR's proc, sys and
# dev mounts are gone when it returns; on failure the caller removes DIR (remove_tree).
debootstrap_tree() {
  local dir=$1 suite=$2 mirror=$3 blog=$4
  shift 4
  apt_install_host debootstrap
  # The generic "sid" script handles every current suite, whatever this debootstrap knows.
  debootstrap --variant=minbase "$suite" "$dir" "$mirror" /usr/share/debootstrap/scripts/sid \
    >"$blog" 2>&1 || { tail -n 20 "$blog" >&2; die "debootstrap $suite failed (log: $blog)"; }
  printf '#!/bin/sh\nexit 101\n' >"$dir/usr/sbin/policy-rc.d"
  chmod 755 "$dir/usr/sbin/policy-rc.d"
  # sid's Release file on this mirror is past its Valid-Until date; harmless for the others.
  echo 'Acquire::Check-Valid-Until "false";' >"$dir/etc/apt/apt.conf.d/99bridge"
  cp /etc/hosts /etc/resolv.conf "$dir/etc/" 2>/dev/null || true
  mount_root "$dir"
  { chroot "$dir" apt-get update -q && chroot "$dir" apt-get install -y -q --no-install-recommends "$@"
  } >>"$blog" 2>&1 || { tail -n 20 "$blog" >&2; umount_root "$dir"; die "package install in $suite tree failed (log: $blog)"; }
  chroot "$dir" apt-get clean
  umount_root "$dir"
}
