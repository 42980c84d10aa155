#!/usr/bin/env sh
# The system programs the test suite drives as real third-party peers: redis-server, redis-cli and
# redis-benchmark (the Redis-protocol tests and the side-by-side benchmarks), nft (silent network
# cuts between network namespaces) and promtool (the alert rules' tests, from Debian's prometheus). Installed from Debian's packages when missing and when this
# machine can (root with apt-get); otherwise the tests that need them say which program is missing.
set -u
missing=""
for program in redis-server:redis-server redis-cli:redis-tools redis-benchmark:redis-tools nft:nftables promtool:prometheus; do
  command -v "${program%%:*}" >/dev/null 2>&1 || missing="$missing ${program#*:}"
done
[ -z "$missing" ] && exit 0
packages=$(printf '%s\n' $missing | sort -u | tr '\n' ' ')
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-test-deps: not root with apt-get; install these yourself for the full suite: $packages" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends $packages >/dev/null 2>&1 \
  || { apt-get update >/dev/null 2>&1 && apt-get install -y --no-install-recommends $packages >/dev/null 2>&1; } \
  || echo "install-test-deps: apt-get could not install: $packages (the tests that need them will say so)" >&2
exit 0
