# shellcheck shell=bash
# Debian packages on the host for the scripts that start real services (tools/slurm-cluster.sh,
# tools/kube-node.sh); sourced, not run. The sourcing script defines log MESSAGE.

missing_host_packages() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || echo "$p"
  done
}

# apt_install_host PACKAGE...: install those not installed yet; no daemon starts from a postinst.
apt_install_host() {
  local missing
  missing=$(missing_host_packages "$@")
  [[ -z $missing ]] && return 0
  log "installing on the host: ${missing//$'\n'/ }"
  # Without a policy-rc.d, postinst scripts would start the stock services (munge, slurm,
  # containerd) with their /etc configuration.
  local own_policy=""
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d
    own_policy=1
  fi
  # Another script may be installing at the same time: wait for dpkg's lock rather than fail.
  # shellcheck disable=SC2086
  apt-get install -y -q -o DPkg::Lock::Timeout=300 --no-install-recommends $missing >/dev/null ||
    { apt-get update -q >/dev/null &&
      apt-get install -y -q -o DPkg::Lock::Timeout=300 --no-install-recommends $missing >/dev/null; }
  [[ -n $own_policy ]] && rm -f /usr/sbin/policy-rc.d
  return 0
}
