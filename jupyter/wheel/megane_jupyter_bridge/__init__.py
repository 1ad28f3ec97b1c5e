"""megane-jupyter-bridge for jupyter-server-proxy.

This package carries the megane-jupyter-bridge binary (bin/ beside this file)
and registers it with jupyter-server-proxy through the
``jupyter_serverproxy_servers`` entry point ``megane``: installing the wheel
into the environment that runs Jupyter is the whole installation. Its
registration is the one ``megane-jupyter-bridge install`` writes
(registration.json, written from the Go source when the wheel is built),
with the absolute path of the binary installed here as the command.

The console script ``megane-jupyter-bridge`` (and ``python -m
megane_jupyter_bridge``) runs the same binary, for ``doctor``, ``servers``,
``check`` and the rest.
"""

import json
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def binary():
    """The absolute path of the bridge binary this package installed."""
    name = "megane-jupyter-bridge.exe" if os.name == "nt" else "megane-jupyter-bridge"
    return os.path.join(_HERE, "bin", name)


def setup_megane():
    """jupyter-server-proxy's entry point: the registration of the bridge."""
    with open(os.path.join(_HERE, "registration.json"), encoding="utf-8") as f:
        reg = json.load(f)
    reg["command"] = [binary()] + list(reg["command"])
    return reg


def main():
    """The console script: run the binary with this process's arguments."""
    args = [binary()] + sys.argv[1:]
    if os.name == "nt":
        # Windows has no exec: wait for the binary and pass its status on.
        import subprocess

        sys.exit(subprocess.call(args))
    os.execv(args[0], args)
