# Run by megane-jupyter-bridge with the Jupyter server's Python (see
# entrypoints.go). It loads every jupyter_serverproxy_servers entry point as
# jupyter-server-proxy 4 does (importlib.metadata, load(), then a call with no
# arguments) and writes one JSON list on stdout: name, value, distribution,
# and the options the call returned (or why it failed). It writes nothing else.
import json
import sys

try:
    from importlib.metadata import entry_points
except ImportError:  # Python < 3.8: jupyter-server-proxy 4 needs 3.8
    sys.stdout.write("[]")
    sys.exit(0)

try:
    eps = entry_points(group="jupyter_serverproxy_servers")
except TypeError:  # Python 3.8 and 3.9: a dict of groups
    eps = entry_points().get("jupyter_serverproxy_servers", [])

out = []
for ep in eps:
    d = {"name": ep.name, "value": ep.value, "dist": "", "dist_version": ""}
    dist = getattr(ep, "dist", None)
    if dist is not None:
        d["dist"] = dist.metadata["Name"] or ""
        d["dist_version"] = dist.version or ""
    try:
        options = ep.load()()
        d["options"] = json.loads(json.dumps(options, default=repr))
    except Exception as e:
        d["error"] = "%s: %s" % (type(e).__name__, e)
    out.append(d)
sys.stdout.write(json.dumps(out))
