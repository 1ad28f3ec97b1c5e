#!/usr/bin/env bash
# make release-rehearsal: every step of .github/workflows/release.yml that
# can run off GitHub, with the same scripts and tool versions, one line per
# step (the steps' own lines follow theirs). It fails when the publish
# step's twine would refuse a file, when two builds differ, when any binary
# was built by another Go than go.mod's toolchain line, or when a linked
# module's licence is missing. The workflow runs it before it builds what
# it publishes, so a release that cannot pass it cannot be published.
#
#   .ci/release-rehearsal.sh    TWINE: see .ci/twine-check.sh; RELEASE_TAG:
#                               the tag to check (default v<the version>)
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
step() { printf '\nrelease-rehearsal: %s (+%ss)\n' "$*" "$(( $(date +%s) - start ))"; }
work=.cache/rehearsal
rm -rf "$work" && mkdir -p "$work"
GOTOOLCHAIN=$(sed -n 's/^toolchain \(go[0-9.]*\)$/\1/p' go.mod)
export GOTOOLCHAIN

step "1. the tag: build job, 'The tag is the binary's version'"
v=$(go run ./cmd/megane-jupyter-bridge version | sed -n 1p | cut -d' ' -f2)
# The release workflow passes its tag; elsewhere, the tag this version needs.
bash .ci/release-tag.sh "${RELEASE_TAG:-v$v}"

step "2. the release's files, first build: build job, 'The release's files' (.ci/release-files.sh)"
bash .ci/release-files.sh "$work/a" 2>"$work/a.log" || { cat "$work/a.log"; exit 1; }

step "3. the same files, second build, with an empty Go build cache: they must be the same bytes"
GOCACHE="$PWD/$work/gocache" bash .ci/release-files.sh "$work/b" 2>"$work/b.log" >/dev/null || { cat "$work/b.log"; exit 1; }
for f in "$work"/a/dist/* "$work"/a/extra/recipe.yaml "$work"/a/extra/SHA256SUMS; do
  rel=${f#"$work"/a/}
  cmp -s "$f" "$work/b/$rel" || { echo "release-rehearsal: $rel differs between two builds"; exit 1; }
done
echo "release-rehearsal: the $(find "$work/a/dist" -type f | wc -l) files of dist/, the recipe and SHA256SUMS are the same bytes (the SBOMs differ only in their serial number and timestamp)"
rm -rf "$work/b" "$work/gocache"

step "4. twine check --strict on every file: publish job, 'Publish to PyPI' (its twine or newer)"
bash .ci/twine-check.sh "$work/a/dist"

step "5. pip builds the Linux wheel's bytes from the sdist, whose backend gives the sdist again: build job (make sdist-check)"
{ make -s sdist-check 2>"$work/sdist-check.log" || { cat "$work/sdist-check.log" >&2; exit 1; }; } | grep -E '^(sdist-check|megane_jupyter_bridge)'

step "done: what only GitHub can run (the platform smoke tests, the attestations, the upload) is listed in RELEASING.md"
