#!/bin/sh
# Build (once) a Debian 13 "trixie" chroot holding jupyter_server 2.x and
# JupyterHub 5.x, for the auth package's tests (issue 4). Idempotent: a
# finished chroot is marked with a stamp naming its package list and is
# reused as it is; an interrupted build is thrown away and redone.
#
#   .ci/trixie-chroot.sh [DIR]      (default $MEGANE_TRIXIE or /var/cache/megane-trixie)
#
# Needs root and debootstrap. Uses the mirror this machine's apt uses.
# Run things inside with .ci/trixie-run.sh (mounts /proc, /dev, /sys).
set -eu

DIR=${1:-${MEGANE_TRIXIE:-/var/cache/megane-trixie}}
# jupyterhub depends on node-configurable-http-proxy (and nodejs) in trixie.
# wine64 (10.0) runs the Windows test binaries (issue 14): bookworm's wine 8.0
# lacks bcryptprimitives.dll, which Go's Windows runtime needs.
# python3-aiohttp is what the real jupyter-server-proxy 4.4 needs besides
# jupyter_server (issue 24: the tests copy it and simpervisor from
# ../shared/vendor, which no registry here carries); python3-venv gives the
# venv and pip the Hub test installs the bridge's wheel with. twine (6.1)
# is what make twine-check runs (issue 25): Debian 12's 4.0.2 cannot read
# the wheel's and the sdist's Metadata-Version 2.4.
PKGS="python3-jupyter-server jupyterhub wine64 python3-aiohttp python3-venv twine"
STAMP="$DIR/.megane-trixie-ready"
WANT="trixie: $PKGS"

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
	echo "trixie chroot ready in $DIR"
	exit 0
fi

# A finished chroot built for another package list gets the packages it
# lacks, in place (cheaper than a new debootstrap).
if [ -f "$STAMP" ]; then
	echo "trixie chroot in $DIR: installing $PKGS"
	cp /etc/resolv.conf "$DIR/etc/resolv.conf"
	mount -t proc proc "$DIR/proc"
	mount --bind /dev "$DIR/dev"
	ok=0
	chroot "$DIR" sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $PKGS >/dev/null && apt-get clean" && ok=1
	umount -l "$DIR/proc" "$DIR/dev"
	if [ $ok = 1 ]; then
		echo "$WANT" > "$STAMP"
		echo "trixie chroot ready in $DIR"
		exit 0
	fi
	echo "installing into the existing chroot failed: building it anew"
fi

# The mirror apt already uses (deb822 or one-line sources), else deb.debian.org.
MIRROR=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -m1 '/debian/*$' || true)
if [ -z "$MIRROR" ]; then
	MIRROR=$(grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | awk '{print $2}' | grep -m1 '/debian/*$' || true)
fi
MIRROR=${MIRROR:-http://deb.debian.org/debian}

TMP="$DIR.building"
umount_all() {
	for m in proc sys dev/pts dev; do
		mountpoint -q "$TMP/$m" 2>/dev/null && umount -l "$TMP/$m" || true
	done
}
trap umount_all EXIT
umount_all
rm -rf "$TMP"
mkdir -p "$(dirname "$DIR")"

start=$(date +%s)
echo "debootstrap trixie from $MIRROR into $TMP"
debootstrap --variant=minbase \
	--keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
	trixie "$TMP" "$MIRROR"
cp /etc/resolv.conf "$TMP/etc/resolv.conf"
mount -t proc proc "$TMP/proc"
mount --bind /dev "$TMP/dev"
chroot "$TMP" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $PKGS
chroot "$TMP" apt-get clean
umount_all
trap - EXIT

rm -rf "$DIR"
mv "$TMP" "$DIR"
echo "$WANT" > "$STAMP"
echo "trixie chroot built in $DIR in $(( $(date +%s) - start ))s"
chroot "$DIR" python3 -c 'import jupyter_server, jupyterhub; print("jupyter_server", jupyter_server.__version__, "jupyterhub", jupyterhub.__version__)'
