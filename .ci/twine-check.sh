#!/usr/bin/env bash
# make twine-check (issue 25): twine check --strict, as PyPI's upload reads
# them, on the Linux wheel and the sdist, run with the Debian 13 chroot's
# twine 6.1 (Debian 12's 4.0.2 cannot read Metadata-Version 2.4; PyPI is out
# of reach here, so no newer one can be installed). The files are built
# into the chroot's /tmp.
#
#   .ci/twine-check.sh [CHROOT]   (default $MEGANE_TRIXIE or /var/cache/megane-trixie)
set -euo pipefail
cd "$(dirname "$0")/.."
root="${1:-${MEGANE_TRIXIE:-/var/cache/megane-trixie}}"
test -x "$root/usr/bin/twine" || { echo "twine-check: no twine in the chroot at $root (.ci/trixie-chroot.sh installs it)"; exit 1; }
work="$root/tmp/megane-twine-check"
rm -rf "$work" && mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
make -s wheels WHEEL_PLATFORMS=linux/amd64 DIST="$work" >/dev/null 2>&1 || make -s wheels WHEEL_PLATFORMS=linux/amd64 DIST="$work"
make -s sdist DIST="$work" >/dev/null 2>&1 || make -s sdist DIST="$work"
files=$(cd "$work" && ls *.whl *.tar.gz)
test "$(echo "$files" | wc -l)" = 2 || { echo "twine-check: want one wheel and one sdist, built: $files"; exit 1; }
chroot "$root" /usr/bin/env PATH=/usr/bin:/bin HOME=/tmp sh -c "cd /tmp/megane-twine-check && twine --version | head -n1 && twine --no-color check --strict $(echo $files)"
