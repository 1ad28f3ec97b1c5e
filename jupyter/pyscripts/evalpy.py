# Evaluates Jupyter .py configuration files for megane-jupyter-bridge (see
# python.go). Each file is loaded on its own with traitlets'
# PyFileConfigLoader, exactly as Jupyter loads it, but nothing else happens:
# no application, no server, no extensions. The request comes as JSON on
# stdin: {"files": [...], "traits": [["Section", "trait"], ...]}. The answer
# is one JSON object on the original stdout; anything the files print goes
# to stderr.
import json
import os
import sys
import traceback

real_out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
sys.stdout = sys.stderr

req = json.load(sys.stdin)

from traitlets.config.loader import Config, LazyConfigValue, PyFileConfigLoader


def plain(v):
    if isinstance(v, Config):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return v


results = []
for path in req["files"]:
    res = {"file": path, "values": {}}
    d, base = os.path.split(path)
    try:
        cfg = PyFileConfigLoader(base, path=d or None).load_config()
    except Exception as e:
        line = None
        for fr in traceback.extract_tb(e.__traceback__):
            if os.path.abspath(fr.filename) == os.path.abspath(path):
                line = fr.lineno
        if isinstance(e, SyntaxError) and e.filename and os.path.abspath(e.filename) == os.path.abspath(path):
            line = e.lineno
        res["error"] = "%s: %s" % (type(e).__name__, e)
        res["line"] = line
        results.append(res)
        continue
    for section, trait in req["traits"]:
        if section not in cfg or trait not in cfg[section]:
            continue
        v = cfg[section][trait]
        key = section + "." + trait
        try:
            if isinstance(v, LazyConfigValue):
                ops = v.to_dict()
                upd = ops.pop("update", None)
                res["values"][key] = {
                    "kind": "lazy",
                    "update": plain(upd) if upd is not None else None,
                    "other": sorted(k for k, x in ops.items() if x),
                }
            else:
                res["values"][key] = {"kind": "value", "value": plain(v)}
            json.dumps(res["values"][key], allow_nan=False)
        except Exception as e:
            res["values"][key] = {"kind": "error", "error": "the value is not JSON data (%s)" % e}
    results.append(res)

real_out.write(json.dumps({"results": results}))
real_out.flush()
