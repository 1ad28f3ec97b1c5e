#!/usr/bin/env bash
# TestInstalledWheel where it can run here (issue 25): the Linux wheel
# pip-installed into a venv of the Debian 13 chroot (jupyter_server 2.15)
# beside the real jupyter-server-proxy and simpervisor of ../shared/vendor
# (copied into the venv, as pip would install them from PyPI, which is out
# of reach here). The same test runs in the platform jobs of
# .github/workflows/ci.yml on macOS and Windows with everything from PyPI.
#
#   .ci/wheel-smoke.sh [CHROOT]   (default $MEGANE_TRIXIE or /var/cache/megane-trixie)
set -euo pipefail
cd "$(dirname "$0")/.."
root="${1:-${MEGANE_TRIXIE:-/var/cache/megane-trixie}}"
vendor="$(cd .. && pwd)/shared/vendor"
test -d "$vendor/jupyter-server-proxy-4.4.0/jupyter_server_proxy" || { echo "wheel-smoke: no $vendor/jupyter-server-proxy-4.4.0"; exit 1; }
test -x "$root/usr/bin/python3" || { echo "wheel-smoke: no chroot at $root (.ci/trixie-chroot.sh builds it)"; exit 1; }
chroot "$root" python3 -c 'import aiohttp' 2>/dev/null || chroot "$root" /usr/bin/env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-aiohttp >/dev/null
work="$root/tmp/megane-wheel-smoke"
rm -rf "$work" && mkdir -p "$work/dist"
trap 'rm -rf "$work"' EXIT
make -s wheels WHEEL_PLATFORMS=linux/amd64 DIST="$work/dist" >/dev/null
CGO_ENABLED=0 make -s go-test-args ARGS="-c -o $work/cmd.test ./cmd/megane-jupyter-bridge/"
whl=$(basename "$work"/dist/*.whl)
chroot "$root" python3 -m venv --system-site-packages /tmp/megane-wheel-smoke/venv
chroot "$root" /tmp/megane-wheel-smoke/venv/bin/pip install -q --no-index --no-deps "/tmp/megane-wheel-smoke/dist/$whl"
sp=$(ls -d "$work"/venv/lib/python3*/site-packages)
cp -r "$vendor/jupyter-server-proxy-4.4.0/jupyter_server_proxy" "$vendor/simpervisor-1.0.0/simpervisor" "$sp/"
mkdir -p "$work/venv/etc/jupyter/jupyter_server_config.d"
cp "$vendor/jupyter-server-proxy-4.4.0/jupyter_server_proxy/etc/jupyter_server_config.d/jupyter-server-proxy.json" "$work/venv/etc/jupyter/jupyter_server_config.d/"
# jupyter_server comes from the chroot's system site: its launcher, as pip writes one.
printf '#!/tmp/megane-wheel-smoke/venv/bin/python3\nimport sys\nfrom jupyter_server.serverapp import main\nsys.exit(main())\n' > "$work/venv/bin/jupyter-server"
chmod 755 "$work/venv/bin/jupyter-server"
unshare --mount --propagation private /bin/sh -c 'mount -t proc proc "$0/proc" && exec chroot "$0" /usr/bin/env MEGANE_SMOKE_VENV=/tmp/megane-wheel-smoke/venv HOME=/tmp/megane-wheel-smoke PATH=/usr/bin:/bin /tmp/megane-wheel-smoke/cmd.test -test.run "^TestInstalledWheel$" -test.v' "$root"
# The newcomer's check in that venv (jupyter_server 2.15, the real
# jupyter-server-proxy): doctor, run as the README says, from a fresh HOME
# with the venv active, exits 0 and names in its first line the venv's
# Python, found as the one the bridge is installed in.
mkdir -p "$work/home"
# (/proc mounted, as on a real machine: the binary finds its own path there.)
# shellcheck disable=SC2016 # $0 is expanded by the inner shell
doctor=$(unshare --mount --propagation private /bin/sh -c 'mount -t proc proc "$0/proc" && exec chroot "$0" /usr/bin/env HOME=/tmp/megane-wheel-smoke/home VIRTUAL_ENV=/tmp/megane-wheel-smoke/venv PATH=/tmp/megane-wheel-smoke/venv/bin:/usr/bin:/bin megane-jupyter-bridge doctor' "$root") ||
  { echo "$doctor"; echo "wheel-smoke: doctor exited non-zero in the venv"; exit 1; }
first=$(echo "$doctor" | head -n1)
case "$first" in
  "ok:      Jupyter's Python: /tmp/megane-wheel-smoke/venv/bin/python3, found by the Python environment the bridge is installed in"*) echo "wheel-smoke: doctor in the venv exits 0; $first" ;;
  *) echo "$doctor"; echo "wheel-smoke: doctor's first line does not name the venv's Python"; exit 1 ;;
esac
