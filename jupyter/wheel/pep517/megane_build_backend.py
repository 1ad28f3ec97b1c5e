"""The PEP 517 build backend of megane-jupyter-bridge's source distribution.

pyproject.toml names this file (backend-path), so pip needs nothing but the
sdist: building a wheel runs ``go run ./cmd/internal/mkwheel`` for the
platform Go builds for (``go env GOOS GOARCH``), which builds the statically
linked binary and writes the same wheel ``make wheels`` writes. Go must be
on PATH, and the Go that builds must be at least go.mod's toolchain line
(the pinned Go: older ones have known vulnerabilities in their standard
library that reach the bridge); with GOTOOLCHAIN=auto, Go's default, an
older go fetches the pinned one itself. Standard library only; it never
downloads anything itself (Go fetches modules missing from its cache, and
the pinned toolchain).
"""

import os
import re
import shutil
import subprocess
import sys


def _gomod(pattern):
    """The first group of pattern on a line of go.mod, or None."""
    try:
        with open("go.mod", encoding="utf-8") as f:
            for line in f:
                m = re.match(pattern, line)
                if m:
                    return m.group(1)
    except OSError:
        pass
    return None


def _needed_go():
    """The Go version go.mod asks for (its go line)."""
    return _gomod(r"go\s+(\S+)\s*$") or "the version in go.mod"


def _pinned_go():
    """The Go go.mod's toolchain line pins (such as go1.27.3), or None."""
    return _gomod(r"toolchain\s+(go\S+)\s*$")


def _go_release(v):
    """go1.27.3 -> (1, 27, 3); go1.28rc1 -> (1, 28, -1): a pre-release
    comes before its release."""
    m = re.match(r"go(\d+)\.(\d+)(?:\.(\d+)|(rc|beta)\d+)?", v)
    if not m:
        return None
    return (int(m.group(1)), int(m.group(2)), int(m.group(3)) if m.group(3) else (-1 if m.group(4) else 0))


def _check_go(go):
    """Refuses, in one line, a Go older than go.mod's toolchain line. Run in
    the source directory, go switches to the pinned toolchain itself when
    GOTOOLCHAIN allows it (auto), fetching it once."""
    want = _pinned_go()
    if want is None:
        return
    proc = subprocess.run([go, "env", "GOVERSION"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    have = proc.stdout.strip()
    if proc.returncode != 0 or not have:
        raise SystemExit(
            "megane-jupyter-bridge is built with %s (go.mod's toolchain line), which go could not fetch (%s): "
            "install Go %s or later, or build once where go can reach its module proxy"
            % (want, (proc.stderr.strip().splitlines() or ["no output"])[-1], want[2:])
        )
    hv, wv = _go_release(have), _go_release(want)
    if hv is not None and wv is not None and hv < wv:
        raise SystemExit(
            "megane-jupyter-bridge is built with %s or later (go.mod's toolchain line), not %s, whose standard library "
            "has known vulnerabilities that reach the bridge: install Go %s, or let go fetch it (GOTOOLCHAIN=auto, "
            "the default, instead of GOTOOLCHAIN=%s)" % (want, have, want[2:], os.environ.get("GOTOOLCHAIN", "local"))
        )


def _go():
    go = shutil.which("go")
    if go is None:
        pinned = _pinned_go()
        raise SystemExit(
            "building megane-jupyter-bridge from source needs Go >= %s on PATH" % (pinned[2:] if pinned else _needed_go())
        )
    _check_go(go)
    return go


def _go_env(go, *names):
    out = subprocess.run([go, "env"] + list(names), check=True, stdout=subprocess.PIPE, universal_newlines=True)
    return out.stdout.split()


def _mkwheel(args, for_target=False):
    """Runs mkwheel with args (and the target GOOS/GOARCH when for_target)
    and returns the last path it printed."""
    go = _go()
    goos, goarch, hostos, hostarch = _go_env(go, "GOOS", "GOARCH", "GOHOSTOS", "GOHOSTARCH")
    env = dict(os.environ)
    # mkwheel itself runs here; it builds the binary for GOOS/GOARCH (a
    # cross build, as conda-forge's osx-arm64 one, names it as an argument).
    env["GOOS"], env["GOARCH"] = hostos, hostarch
    cmd = [go, "run", "./cmd/internal/mkwheel"] + args
    if for_target:
        cmd.append(goos + "/" + goarch)
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, universal_newlines=True)
    if proc.returncode != 0:
        raise SystemExit("megane-jupyter-bridge: %s failed (exit status %d; its errors are above)" % (" ".join(cmd[1:]), proc.returncode))
    lines = proc.stdout.split()
    if not lines:
        raise SystemExit("megane-jupyter-bridge: %s wrote no file" % " ".join(cmd[1:]))
    return lines[-1]


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    path = _mkwheel(["-out", os.path.abspath(wheel_directory)], for_target=True)
    return os.path.basename(path)


def build_sdist(sdist_directory, config_settings=None):
    path = _mkwheel(["-sdist", "-out", os.path.abspath(sdist_directory)])
    return os.path.basename(path)


if __name__ == "__main__":
    sys.exit("megane_build_backend is a PEP 517 build backend: pip runs it (pip wheel DIR)")
