#!/bin/sh
# Install configurable-http-proxy from npm into its own prefix (idempotent),
# for the JupyterHub 3.0 test of the auth package (issue 4). Debian 12's
# node-configurable-http-proxy does not run on the NodeSource node this
# machine uses (it cannot find its Debian-packaged modules).
#
#   .ci/hub-chp.sh [PREFIX]   (default $MEGANE_CHP_PREFIX or /opt/megane-chp)
#
# The binary is PREFIX/node_modules/.bin/configurable-http-proxy.
set -eu
PREFIX=${1:-${MEGANE_CHP_PREFIX:-/opt/megane-chp}}
BIN="$PREFIX/node_modules/.bin/configurable-http-proxy"
if [ -x "$BIN" ] && "$BIN" --version >/dev/null 2>&1; then
	echo "configurable-http-proxy $("$BIN" --version) ready in $PREFIX"
	exit 0
fi
mkdir -p "$PREFIX"
npm install --no-audit --no-fund --prefix "$PREFIX" configurable-http-proxy@4
echo "configurable-http-proxy $("$BIN" --version) installed in $PREFIX"
