#!/usr/bin/env bash
# install-clients.sh installs the third-party Kafka clients that
# integration/compat drives as subprocesses: kcat (Debian package) and
# kafkajs (npm, pinned by integration/compat/node/package-lock.json), and
# the headless browser the admin page's test drives: chromium (Debian), and
# the load balancer integration/lb puts in front of replicas with the PROXY
# protocol: haproxy (Debian).
#
# Idempotent: it installs only what is missing, so a second run does nothing.
# The Go clients (sarama, kafka-go, franz-go, confluent-kafka-go) come from
# go.mod and need nothing here.
#
# With CI=true a failed install fails the script (the compat tests would fail
# anyway on the missing client); elsewhere it warns and exits 0 so that
# `make test` still runs and the compat tests skip the missing client with a
# message that says how to install it.
set -uo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
node_dir="$repo_root/integration/compat/node"
failed=0

log() { printf 'install-clients: %s\n' "$*" >&2; }

as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo -n "$@"
	else
		log "need root for: $*"
		return 1
	fi
}

install_kcat() {
	if command -v kcat >/dev/null 2>&1; then
		log "kcat present: $(command -v kcat)"
		return 0
	fi
	log "installing kcat with apt-get"
	apt_install kcat
}

# apt_install installs Debian packages, updating the package lists once.
apt_updated=0
apt_install() {
	if ! command -v apt-get >/dev/null 2>&1; then
		log "apt-get not available; install $* by hand"
		return 1
	fi
	if [ "$apt_updated" -eq 0 ]; then
		as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2 || return 1
		apt_updated=1
	fi
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >&2
}

install_chromium() {
	for c in chromium chromium-browser google-chrome; do
		if command -v "$c" >/dev/null 2>&1; then
			log "browser present: $(command -v "$c")"
			return 0
		fi
	done
	log "installing chromium with apt-get"
	apt_install chromium
}

install_haproxy() {
	if command -v haproxy >/dev/null 2>&1; then
		log "haproxy present: $(command -v haproxy)"
		return 0
	fi
	log "installing haproxy with apt-get"
	apt_install haproxy
}

install_kafkajs() {
	# npm ci writes node_modules/.package-lock.json; a lock file newer than
	# it means the pinned versions changed since the last install.
	if [ -d "$node_dir/node_modules/kafkajs" ] &&
		[ ! "$node_dir/package-lock.json" -nt "$node_dir/node_modules/.package-lock.json" ]; then
		log "kafkajs present: $node_dir/node_modules"
		return 0
	fi
	if ! command -v npm >/dev/null 2>&1; then
		log "npm missing; install Node.js 18+ and npm, then rerun"
		return 1
	fi
	log "installing kafkajs with npm ci in $node_dir"
	(cd "$node_dir" && npm ci --no-audit --no-fund --ignore-scripts >&2)
}

install_kcat || failed=1
install_kafkajs || failed=1
install_chromium || failed=1
install_haproxy || failed=1

if [ "$failed" -ne 0 ]; then
	if [ "${CI:-}" = "true" ]; then
		log "FAILED to install a client (CI=true)"
		exit 1
	fi
	log "WARNING: a client or the browser could not be installed; the tests that need it will be skipped"
fi
exit 0
