"""The PEP 517 build backend of megane-jupyter-bridge's source distribution.

pyproject.toml names this file (backend-path), so pip needs nothing but the
sdist: building a wheel runs ``go run ./cmd/internal/mkwheel`` for the
platform Go builds for (``go env GOOS GOARCH``), which builds the statically
linked binary and writes the same wheel ``make wheels`` writes. Go must be
on PATH. Standard library only; it never downloads anything itself (Go
fetches modules missing from its cache).
"""

import os
import re
import shutil
import subprocess
import sys


def _needed_go():
    """The Go version go.mod asks for (its go line)."""
    try:
        with open("go.mod", encoding="utf-8") as f:
            for line in f:
                m = re.match(r"go\s+(\S+)\s*$", line)
                if m:
                    return m.group(1)
    except OSError:
        pass
    return "the version in go.mod"


def _go():
    go = shutil.which("go")
    if go is None:
        raise SystemExit(
            "building megane-jupyter-bridge from source needs Go >= %s on PATH" % _needed_go()
        )
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
