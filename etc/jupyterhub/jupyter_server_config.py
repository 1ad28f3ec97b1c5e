# Single-user servers under JupyterHub: decide each action by the caller's
# custom:jupyter_server:<action>:<resource> scopes on this server (declared in
# jupyterhub_config.py beside this file). Put it where users cannot change it:
# the image's /etc/jupyter/jupyter_server_config.py, or {sys.prefix}/etc/jupyter.
#
# Loaded, as it is, by the JupyterHub end-to-end test
# (cmd/megane-jupyter-bridge/hub_e2e_test.go).

import os

from jupyterhub.singleuser.extension import JupyterHubAuthorizer


class GranularJupyterHubAuthorizer(JupyterHubAuthorizer):
    """Allow an action only with the matching custom scope on this server."""

    def is_authorized(self, handler, user, action, resource):
        owner = os.environ["JUPYTERHUB_USER"]
        server = owner + "/" + os.environ.get("JUPYTERHUB_SERVER_NAME", "")
        wanted = set()
        for suffix in ("!user=" + owner, "!server=" + server):
            for res in (resource, "*"):
                wanted.add("custom:jupyter_server:%s:%s%s" % (action, res, suffix))
        return bool(self.hub_auth.check_scopes(wanted, user.hub_user))


c = get_config()  # noqa: F821
c.ServerApp.authorizer_class = GranularJupyterHubAuthorizer

# A token revoked at the Hub keeps working on this server until its cached
# identity expires (HubAuth.cache_max_age, 300 s by default), and the bridge
# re-checks open sockets every minute. Shorten the cache to close a revoked
# user's sockets sooner, at the cost of more requests to the Hub:
# c.HubAuth.cache_max_age = 60
