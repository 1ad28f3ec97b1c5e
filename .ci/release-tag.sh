#!/usr/bin/env bash
# The tag is the binary's version: the release workflow's first check, and
# make release-rehearsal's (with the tag the version would need).
#
#   .ci/release-tag.sh TAG
set -euo pipefail
cd "$(dirname "$0")/.."
tag="${1:?usage: .ci/release-tag.sh TAG}"
GOTOOLCHAIN=$(sed -n 's/^toolchain \(go[0-9.]*\)$/\1/p' go.mod)
export GOTOOLCHAIN
v=$(go run ./cmd/megane-jupyter-bridge version | sed -n 1p | cut -d' ' -f2)
if [ "v$v" != "$tag" ]; then
  echo "release-tag: tag $tag, but the binary says $v: change the version constant in cmd/megane-jupyter-bridge/main.go (and recipe/recipe.yaml's)"
  exit 1
fi
echo "release-tag: $tag is the binary's version"
