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
# The twine that the release workflow publishes with (its pin): this check
# must not run an older one, or a dist it passes may still be refused there.
want=$(sed -n 's/.*"twine==\([0-9.]*\)".*/\1/p' .github/workflows/release.yml | head -n1)
test -n "$want" || { echo "twine-check: .github/workflows/release.yml pins no twine==X"; exit 1; }
have=$(chroot "$root" /usr/bin/env PATH=/usr/bin:/bin HOME=/tmp sh -c "twine --version" | sed -n 's/^twine version \([0-9.]*\).*/\1/p')
if [ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -n1)" != "$want" ]; then
  echo "twine-check: the chroot's twine $have is older than the $want the release workflow publishes with"
  exit 1
fi
echo "twine-check: twine $have (the release workflow publishes with $want)"
chroot "$root" /usr/bin/env PATH=/usr/bin:/bin HOME=/tmp sh -c "cd /tmp/megane-twine-check && twine --no-color check --strict $(echo $files)"
