# Probe run by megane-jupyter-bridge with a candidate Python (see python.go).
# It reports the facts jupyter_core uses to build the config search path and
# whether traitlets can be imported. It reads nothing and writes nothing
# except one JSON object on stdout.
import json
import os
import site
import sys

out = {
    "executable": sys.executable,
    "prefix": sys.prefix,
    "base_prefix": getattr(sys, "base_prefix", sys.prefix),
    "enable_user_site": bool(site.ENABLE_USER_SITE),
    "userbase": None,
    "traitlets": None,
    "jupyter_core": None,
    "jupyter_server": None,
    "server_proxy": False,
    "notebook_shim": False,
    "env_auto": False,
    "externally_managed": False,
}
try:
    out["userbase"] = site.getuserbase() if hasattr(site, "getuserbase") else site.USER_BASE
except Exception:
    pass
try:
    import traitlets

    out["traitlets"] = traitlets.__version__
except Exception:
    pass
try:
    import jupyter_core

    out["jupyter_core"] = jupyter_core.__version__
except Exception:
    pass
try:
    import importlib.util

    spec = importlib.util.find_spec("jupyter_server")
    if spec is not None:
        try:
            from jupyter_server._version import __version__ as v

            out["jupyter_server"] = v
        except Exception:
            out["jupyter_server"] = "unknown"
    out["server_proxy"] = importlib.util.find_spec("jupyter_server_proxy") is not None
    out["notebook_shim"] = importlib.util.find_spec("notebook_shim") is not None
except Exception:
    pass
# jupyter_core >= 5 prefers the environment level over the user level inside
# a virtualenv, or a conda environment other than base, that the user owns
# (prefer_environment_over_user); this mirrors that test.
try:
    owned = os.stat(sys.prefix).st_uid == os.getuid() or os.access(sys.prefix, os.W_OK)
    cp = os.environ.get("CONDA_PREFIX")
    venv = sys.prefix != out["base_prefix"]
    conda = bool(cp) and sys.prefix.startswith(cp) and os.environ.get("CONDA_DEFAULT_ENV", "base") != "base"
    out["env_auto"] = bool(owned and (venv or conda))
except Exception:
    pass
# PEP 668: a distribution's Python (Debian's /usr/bin/python3) whose pip
# refuses to install; a venv made over it is not.
try:
    import sysconfig

    out["externally_managed"] = sys.prefix == out["base_prefix"] and os.path.isfile(
        os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")
    )
except Exception:
    pass
sys.stdout.write(json.dumps(out))
