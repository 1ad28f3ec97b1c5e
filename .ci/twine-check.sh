#!/usr/bin/env bash
# make twine-check: twine check --strict, as PyPI's upload reads them, on
# the release's files, run with the twine the release workflow publishes
# with or a newer one; an older one fails the check (a dist it passes may
# still be refused there). Here that twine is the Debian 13 chroot's 6.1
# (PyPI is out of reach; Debian 12's 4.0.2 cannot read Metadata-Version
# 2.4); where pip can reach PyPI (the workflows), TWINE names the pinned
# one: TWINE="python -m twine".
#
#   .ci/twine-check.sh [DIR]   the *.whl and *.tar.gz in DIR (default: the
#                              Linux wheel and the sdist, built here)
#   CHROOT: $MEGANE_TRIXIE or /var/cache/megane-trixie
set -euo pipefail
cd "$(dirname "$0")/.."
root="${MEGANE_TRIXIE:-/var/cache/megane-trixie}"
# The twine that the release workflow publishes with (its pin).
want=$(sed -n 's/.*"twine==\([0-9.]*\)".*/\1/p' .github/workflows/release.yml | head -n1)
test -n "$want" || { echo "twine-check: .github/workflows/release.yml pins no twine==X"; exit 1; }
if [ -n "${TWINE:-}" ]; then
  work=$(mktemp -d)
  inside=$work
  run() { (cd "$work" && eval "$TWINE \"\$@\""); }
else
  test -x "$root/usr/bin/twine" || { echo "twine-check: no twine in the chroot at $root (.ci/trixie-chroot.sh installs it), and TWINE is not set"; exit 1; }
  work="$root/tmp/megane-twine-check"
  inside=/tmp/megane-twine-check
  run() { chroot "$root" /usr/bin/env PATH=/usr/bin:/bin HOME=/tmp sh -c 'cd "$0" && twine "$@"' "$inside" "$@"; }
fi
rm -rf "$work" && mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
if [ -n "${1:-}" ]; then
  cp "$1"/*.whl "$1"/*.tar.gz "$work/"
else
  make -s wheels WHEEL_PLATFORMS=linux/amd64 DIST="$work" >/dev/null 2>&1 || make -s wheels WHEEL_PLATFORMS=linux/amd64 DIST="$work"
  make -s sdist DIST="$work" >/dev/null 2>&1 || make -s sdist DIST="$work"
fi
have=$(run --version | sed -n 's/^twine version \([0-9.]*\).*/\1/p')
if [ -z "$have" ] || [ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -n1)" != "$want" ]; then
  echo "twine-check: twine ${have:-(none)} is older than the $want the release workflow publishes with"
  exit 1
fi
files=$(cd "$work" && ls -- *.whl *.tar.gz)
# shellcheck disable=SC2086 # one argument per file name (no spaces in them)
if ! out=$(COLUMNS=1000 run --no-color check --strict $files 2>&1); then
  echo "$out" | sed 's/^/twine-check: /'
  echo "twine-check: twine $have refused the above: PyPI would too"
  exit 1
fi
echo "$out" | sed 's/^Checking /twine-check: /'
n=$(echo "$files" | wc -l)
echo "twine-check: twine $have (the release workflow publishes with $want) passed all $n files"
