#!/usr/bin/env bash
# Installs Dovecot (IMAP, LMTP) and Postfix (SMTP) for the email channel's tests, which start their own
# instances on loopback ports with their own config directories (test/infra/dovecot.ts, postfix.ts).
# Idempotent: does nothing when both are present. No mail service is started or enabled here: Postfix is
# preseeded as "No configuration" and the packages' start scripts are held back by policy-rc.d.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../setup-apt.sh"

if [ -x /usr/sbin/dovecot ] && [ -x /usr/lib/dovecot/lmtp ] && [ -x /usr/lib/dovecot/imap ] \
  && [ -x /usr/lib/postfix/sbin/master ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "50-mail.sh: root is needed to install dovecot-imapd, dovecot-lmtpd and postfix" >&2
  exit 1
fi

# Postfix asks how it should be configured; the tests write their own main.cf, so: none.
echo 'postfix postfix/main_mailer_type select No configuration' | debconf-set-selections

# A machine with an init system would start both daemons on install: refuse that for the time of the
# install, unless the machine already refuses it (container images ship such a policy-rc.d).
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod 755 "$policy"
  own_policy=1
fi
cleanup() { if [ "$own_policy" = 1 ]; then rm -f "$policy"; fi; }
trap cleanup EXIT

apt_install \
  dovecot-core dovecot-imapd dovecot-lmtpd postfix >/dev/null
/usr/sbin/dovecot --version >/dev/null
test -x /usr/lib/postfix/sbin/master
echo "50-mail.sh: dovecot $(/usr/sbin/dovecot --version | cut -d' ' -f1) and postfix $(postconf -d -h mail_version) installed"
