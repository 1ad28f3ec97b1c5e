# JupyterHub: who may use the Builder tools on a single-user server.
#
# The bridge admits a person only if the single-user server lets them execute
# kernels. JupyterHub's default authorizer lets anyone with access to a server
# do everything there; to give some people access without execution (a
# teacher who looks at a student's files, say), declare jupyter_server scopes
# here and install the authorizer of jupyter_server_config.py beside this file
# in the single-user image.
#
# This file is loaded, as it is, by the JupyterHub end-to-end test
# (cmd/megane-jupyter-bridge/hub_e2e_test.go: load_subconfig), so what it says
# is what the test proves. Merge it into your jupyterhub_config.py.

c = get_config()  # noqa: F821

# Two scopes on a single-user server: read (open it, see files) and execute
# (run kernels, and with them the Builder's tool buttons).
c.JupyterHub.custom_scopes = {
    "custom:jupyter_server:read:*": {
        "description": "open a server and read its files",
    },
    "custom:jupyter_server:execute:*": {
        "description": "run kernels and Builder tools on a server",
        "subscopes": ["custom:jupyter_server:read:*"],
    },
}

# A server's OAuth client must be allowed to hand these scopes on, or the
# single-user server never sees them.
c.Spawner.oauth_client_allowed_scopes = [
    "access:servers!server",
    "custom:jupyter_server:read:*!server",
    "custom:jupyter_server:execute:*!server",
]

# Everyone may execute on their own servers. To let someone only look at
# another's server, give them access and read but not execute, e.g.:
#   {"name": "viewer", "users": ["vera"],
#    "scopes": ["access:servers!user=alice", "custom:jupyter_server:read:*!user=alice"]}
c.JupyterHub.load_roles = [
    {
        "name": "user",
        "scopes": [
            "self",
            "custom:jupyter_server:execute:*!user",
            "custom:jupyter_server:read:*!user",
        ],
    },
]
