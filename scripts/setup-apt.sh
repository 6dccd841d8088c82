# Sourced by the setup steps that install Debian packages (scripts/setup.d/*.sh): apt_install PACKAGE...
# installs them without recommends, waiting for dpkg's lock if another apt holds it. The package lists are
# fetched once per `scripts/setup.sh` run (it names a stamp file in GATED_SETUP_APT_STAMP), not once per step;
# a step run on its own fetches them itself.
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  local opts=(-o DPkg::Lock::Timeout=600)
  local stamp=${GATED_SETUP_APT_STAMP:-}
  if [ -z "$stamp" ] || [ ! -e "$stamp" ]; then
    apt-get "${opts[@]}" update -qq
    if [ -n "$stamp" ]; then : >"$stamp"; fi
  fi
  apt-get "${opts[@]}" install -y -qq --no-install-recommends "$@" >/dev/null
}
