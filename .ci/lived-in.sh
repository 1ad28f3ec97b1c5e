#!/usr/bin/env bash
# The suite's second run, in a "lived-in" setup (issue 29): the machine as a
# contributor's is, not CI's sterile one. Debian's Jupyter packages with
# their recommends (so /usr/bin/jupyter exists), a pyenv-style python3 shim
# first on PATH, a user-level ~/.jupyter with MeganeBuilderTools settings,
# and JUPYTER_* variables set. A test that reads the host instead of making
# what it means fails here rather than on a contributor's machine.
#
#   .ci/lived-in.sh [go test flags and packages]   (default: the packages
#   that find Python, Jupyter and the user's directories: ./jupyter/... ./cmd/...)
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq jupyter-core jupyter-notebook python3-ipykernel >/dev/null
test -x /usr/bin/jupyter || { echo "lived-in: /usr/bin/jupyter is missing after installing jupyter-core"; exit 1; }

# Go's own caches stay where they are: a new HOME must not mean a new module
# download and a cold build.
export GOPATH="$(go env GOPATH)" GOMODCACHE="$(go env GOMODCACHE)" GOCACHE="$(go env GOCACHE)"
home=$(mktemp -d /tmp/megane-lived-in.XXXXXX)
trap 'rm -rf "$home"' EXIT
# A pyenv shim: a script that finds the real python3 and execs it.
mkdir -p "$home/.pyenv/shims"
cat > "$home/.pyenv/shims/python3" <<'SHIM'
#!/usr/bin/env bash
set -e
exec /usr/bin/python3 "$@"
SHIM
cp "$home/.pyenv/shims/python3" "$home/.pyenv/shims/python"
chmod 755 "$home/.pyenv/shims/python3" "$home/.pyenv/shims/python"
# A user's Jupyter settings: a tool server of their own, and a launcher-less
# bridge registration left by an earlier install.
mkdir -p "$home/.jupyter" "$home/.local/share/jupyter/runtime"
cat > "$home/.jupyter/jupyter_server_config.json" <<'CFG'
{"MeganeBuilderTools": {"mcp_servers": {"lived-in-user-tool": {"command": "lived-in-tool-that-is-not-installed"}}},
 "ServerProxy": {"servers": {"megane": {"command": ["/nonexistent/megane-jupyter-bridge", "serve", "--port={port}"]}}}}
CFG
echo "c.ServerApp.open_browser = False" > "$home/.jupyter/jupyter_server_config.py"

export HOME="$home"
export PATH="$home/.pyenv/shims:$PATH"
export JUPYTER_CONFIG_DIR="$home/.jupyter"
export JUPYTER_DATA_DIR="$home/.local/share/jupyter"
export JUPYTER_RUNTIME_DIR="$home/.local/share/jupyter/runtime"
export JUPYTER_PATH="$home/.local/share/jupyter"
export JUPYTER_PLATFORM_DIRS=1
export JUPYTER_TOKEN=lived-in-token
export PYENV_VERSION=system
echo "lived-in: HOME=$HOME, python3 is $(command -v python3), jupyter is $(command -v jupyter), JUPYTER_CONFIG_DIR=$JUPYTER_CONFIG_DIR"
if [ $# -eq 0 ]; then
  set -- ./jupyter/... ./cmd/...
fi
exec make -s go-test-args ARGS="-count=1 -timeout 25m $*"
