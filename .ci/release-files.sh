#!/usr/bin/env bash
# The release's files, as the release workflow's build job makes them and
# make release-rehearsal makes them twice: OUT/dist (the five wheels and
# the sdist, uploaded to PyPI) and OUT/extra (SHA256SUMS, a CycloneDX SBOM
# per platform, the conda-forge recipe with the sdist's sha256), then
# mkwheel -release checks them (every binary built by go.mod's pinned Go,
# licence files against the modules each links, the recipe against the
# sdist and the darwin wheels, an SBOM per platform naming what its binary
# links). One line per step.
#
#   .ci/release-files.sh OUT
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: .ci/release-files.sh OUT}"
dist="$out/dist" extra="$out/extra"
rm -rf "$dist" "$extra" && mkdir -p "$dist" "$extra"
# Every go command here runs the pinned Go (go.mod's toolchain line), as
# the Makefile's do.
GOTOOLCHAIN=$(sed -n 's/^toolchain \(go[0-9.]*\)$/\1/p' go.mod)
export GOTOOLCHAIN
# The SBOM tool, built once for this machine (it reads the module graph
# for GOOS/GOARCH from the environment, so it cannot be go run with them).
CYCLONEDX_VERSION=v1.10.0
cdx="$PWD/.cache/bin/cyclonedx-gomod-$CYCLONEDX_VERSION"
if [ ! -x "$cdx" ]; then
  rm -rf .cache/bin.tmp && mkdir -p .cache/bin
  GOBIN="$PWD/.cache/bin.tmp" go install "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$CYCLONEDX_VERSION"
  mv .cache/bin.tmp/cyclonedx-gomod "$cdx" && rm -rf .cache/bin.tmp
fi
make -s wheels DIST="$dist" >/dev/null
make -s sdist DIST="$dist" >/dev/null
make -s recipe DIST="$dist" RECIPE_OUT="$extra/recipe.yaml"  # rebuilds the sdist: the same bytes
(cd "$dist" && sha256sum -- *.whl *.tar.gz) > "$extra/SHA256SUMS"
for p in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64; do
  goos=${p%/*} goarch=${p#*/}
  GOOS=$goos GOARCH=$goarch CGO_ENABLED=0 \
    "$cdx" app -json -licenses -std -main cmd/megane-jupyter-bridge \
    -output "$extra/megane-jupyter-bridge-$goos-$goarch.cdx.json" 2>/dev/null
done
echo "release-files: $(ls "$dist" | wc -l) files in $dist, $(ls "$extra" | wc -l) in $extra"
go run ./cmd/internal/mkwheel -release "$dist" "$extra"
