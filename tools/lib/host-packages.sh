# shellcheck shell=bash
# Debian packages on the host for the scripts that start real services (tools/slurm-cluster.sh,
# tools/kube-node.sh); sourced, not run. The sourcing script defines log MESSAGE.

missing_host_packages() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || echo "$p"
  done
}

# One apt at a time on this host, for every checkout: `make test` starts services and builds images at
# once (tools/background.sh), and apt-get's own locks do not cover it all. DPkg::Lock::Timeout waits
# for dpkg's lock, not for the lists' lock of a concurrent `apt-get update` (which fails at once:
# "Could not get lock /var/lib/apt/lists/lock"); and the policy-rc.d below is one file, which one
# install would remove while another still relies on it.
HOST_APT_LOCK=/run/lock/bridge-host-apt.lock

# apt_install_host PACKAGE...: install those not installed yet; no daemon starts from a postinst.
# Fails if apt-get does (the caller's errexit stops it, or it tests the status).
apt_install_host() {
  [[ -z $(missing_host_packages "$@") ]] && return 0
  mkdir -p "$(dirname "$HOST_APT_LOCK")"
  (
    flock 6
    # Another script may have installed them while this one waited for the lock.
    missing=$(missing_host_packages "$@")
    [[ -z $missing ]] && exit 0
    log "installing on the host: ${missing//$'\n'/ }"
    # Without a policy-rc.d, postinst scripts would start the stock services (munge, slurm,
    # containerd) with their /etc configuration.
    own_policy=""
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
      printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d
      own_policy=1
    fi
    # An apt outside these scripts may hold dpkg's lock: wait for it rather than fail.
    status=0
    # shellcheck disable=SC2086
    apt-get install -y -q -o DPkg::Lock::Timeout=300 --no-install-recommends $missing >/dev/null ||
      { apt-get update -q >/dev/null &&
        apt-get install -y -q -o DPkg::Lock::Timeout=300 --no-install-recommends $missing >/dev/null; } ||
      status=$?
    [[ -z $own_policy ]] || rm -f /usr/sbin/policy-rc.d
    exit "$status"
  ) 6>"$HOST_APT_LOCK"
}
