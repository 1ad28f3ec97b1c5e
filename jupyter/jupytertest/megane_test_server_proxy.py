"""A test stand-in for jupyter-server-proxy 4.4, as a Jupyter server extension.

jupyter-server-proxy cannot be installed where the tests run, so this module
does what it does for one kind of entry (a command it starts and proxies), as
measured and described in shared/design/field-notes.md:

- It reads ``c.ServerProxy.servers`` (the registration that
  ``megane-jupyter-bridge install`` writes), then the servers of the
  ``jupyter_serverproxy_servers`` entry points of the environment (what the
  bridge's wheel installs), as jupyter-server-proxy 4 does: each entry point
  NAME is loaded and called with no arguments, and the dict it returns is that
  server's options; one that fails to load is warned about and skipped. It
  serves each server NAME at ``{base_url}NAME/(.*)``; ``{base_url}NAME``
  redirects to ``NAME/``. The handlers are added in that order (configuration
  first), so when both name the same server, the configured one is served.
- Every request is authenticated by Jupyter first: a WebSocket upgrade without
  a user is a plain HTTP 403, anything else goes through
  ``web.authenticated`` (403 or a login redirect). The authorizer is never
  asked. The Origin check is Jupyter's (allow_origin, allow_origin_pat).
- On the first request it starts ``command`` with ``{port}`` and
  ``{base_url}`` filled in, in the server's cwd, with the server's environment
  plus ``environment``, and polls ``GET /`` on the port without credentials
  until any HTTP answer, for ``timeout`` seconds (default 5). A process that
  exited is started again on the next request.
- Paths: ``absolute_url`` false forwards ``/<rest>``, true forwards
  ``{base_url}NAME/<rest>``; the query (any ``?token=`` too) is kept; every
  request header is forwarded, the original Host included; WebSockets get no
  X-Forwarded-* headers.
- WebSockets: the browser is answered with the first offered subprotocol
  before the backend is contacted; if the backend refuses the upgrade the
  browser, which already has its 101, sees the connection dropped (1006);
  backend messages are limited to 10 MiB; the backend's close reaches the
  browser as a close frame without its code.
- Plain HTTP is relayed whole (status, headers but hop-by-hop ones, body).

It is test code: it never runs in a deployment.
"""

import asyncio
import atexit
import os
import socket
import subprocess
import sys
import warnings
from importlib.metadata import entry_points
from urllib.parse import quote

from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import url_path_join
from tornado import httpclient, web, websocket
from traitlets import Dict
from traitlets.config import Configurable

BACKEND_MESSAGE_LIMIT = 10 * 1024 * 1024  # fixed in jupyter-server-proxy
HOP_BY_HOP = {"Content-Length", "Transfer-Encoding", "Connection"}


class ServerProxy(Configurable):
    servers = Dict(config=True, help="jupyter-server-proxy's servers")


class Process:
    """One configured server's process, started on demand (simpervisor's job)."""

    def __init__(self, name, spec, base_url, log):
        self.name, self.spec, self.base_url, self.log = name, spec, base_url, log
        self.proc = None
        self.port = None
        self.lock = asyncio.Lock()

    def _free_port(self):
        s = socket.socket()
        s.bind(("", 0))
        port = s.getsockname()[1]
        s.close()
        return port

    async def _answers(self):
        client = httpclient.AsyncHTTPClient()
        try:
            await client.fetch(
                "http://localhost:%d/" % self.port,
                raise_error=False,
                follow_redirects=False,
                request_timeout=2,
            )
            return True
        except Exception:
            return False

    async def ensure(self):
        async with self.lock:
            if self.proc is not None and self.proc.poll() is None:
                return self.port
            if self.port is None:
                self.port = self._free_port()
            args = {"port": str(self.port), "base_url": self.base_url, "unix_socket": ""}
            cmd = [c.format(**args) for c in self.spec["command"]]
            env = dict(os.environ)
            env.update({k: v.format(**args) for k, v in self.spec.get("environment", {}).items()})
            self.log.info("megane_test_server_proxy: starting %s", cmd)
            self.proc = subprocess.Popen(cmd, env=env, cwd=os.getcwd())
            timeout = float(self.spec.get("timeout", 5))
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            while loop.time() < deadline:
                if self.proc.poll() is not None:
                    break
                if await self._answers():
                    return self.port
                await asyncio.sleep(0.1)
            raise web.HTTPError(500, "could not start %s in time" % self.name)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class ProxyHandler(websocket.WebSocketHandler, JupyterHandler):
    def initialize(self, process, context_path, absolute_url):
        self.process = process
        self.context_path = context_path
        self.absolute_url = absolute_url
        self.subprotocols = None
        self.backend = None

    async def prepare(self, *args, **kwargs):
        prepared = super().prepare(*args, **kwargs)
        if prepared is not None:  # jupyter_server 2.x: a coroutine
            await prepared
        if self.is_upgrade():
            if not self.current_user:
                raise web.HTTPError(403)
        else:
            web.authenticated(lambda handler: None)(self)

    def is_upgrade(self):
        return self.request.method == "GET" and self.request.headers.get("Upgrade", "").lower() == "websocket"

    def check_origin(self, origin=None):
        return JupyterHandler.check_origin(self, origin)

    def check_xsrf_cookie(self):
        pass  # jupyter-server-proxy leaves that to the backend

    def backend_url(self, scheme, rest):
        path = url_path_join(self.context_path, rest) if self.absolute_url else rest
        if not path.startswith("/"):
            path = "/" + path
        path = quote(path, safe=":/?#[]@!$&'()*+,;=-._~")
        url = "%s://localhost:%d%s" % (scheme, self.process.port, path)
        if self.request.query:
            url += "?" + self.request.query
        return url

    # --- WebSocket ---

    def select_subprotocol(self, subprotocols):
        self.subprotocols = subprotocols or None
        return subprotocols[0] if subprotocols else None

    async def get(self, rest):
        if not self.is_upgrade():
            return await self.relay(rest)
        return await super().get(rest)

    async def open(self, rest):
        await self.process.ensure()
        headers = self.request.headers.copy()
        req = httpclient.HTTPRequest(self.backend_url("ws", rest), headers=headers)

        def on_backend(message):
            if message is None:
                self.close()
            else:
                self.write_message(message, binary=isinstance(message, bytes))

        # Raises when the backend refuses: tornado then drops the browser's
        # connection without a close frame.
        self.backend = await websocket.websocket_connect(
            req,
            on_message_callback=on_backend,
            subprotocols=self.subprotocols,
            max_message_size=BACKEND_MESSAGE_LIMIT,
        )

    def on_message(self, message):
        if self.backend is not None:
            self.backend.write_message(message, binary=isinstance(message, bytes))

    def on_close(self):
        if self.backend is not None:
            self.backend.close()

    # --- plain HTTP ---

    async def relay(self, rest):
        await self.process.ensure()
        body = self.request.body if self.request.method in ("POST", "PUT", "PATCH") else None
        req = httpclient.HTTPRequest(
            self.backend_url("http", rest),
            method=self.request.method,
            headers=self.request.headers.copy(),
            body=body,
            follow_redirects=False,
            decompress_response=False,
            allow_nonstandard_methods=True,
            request_timeout=300,
        )
        resp = await httpclient.AsyncHTTPClient().fetch(req, raise_error=False)
        if resp.code == 599:
            raise web.HTTPError(500, str(resp.error))
        self.set_status(resp.code, resp.reason)
        self._headers = type(self._headers)()
        for k, v in resp.headers.get_all():
            if k not in HOP_BY_HOP:
                self.add_header(k, v)
        if resp.body:
            self.write(resp.body)

    async def post(self, rest):
        return await self.relay(rest)

    async def head(self, rest):
        return await self.relay(rest)


class AddSlash(JupyterHandler):
    @web.authenticated
    def get(self):
        self.redirect(self.request.path + "/")


def _jupyter_server_extension_points():
    return [{"module": "megane_test_server_proxy"}]


_jupyter_server_extension_paths = _jupyter_server_extension_points

_processes = []


def _load_jupyter_server_extension(serverapp):
    # MEGANE_TEST_PROXY_PROFILE=FILE profiles the server's thread (where
    # tornado relays) and writes the cProfile stats to FILE at exit.
    profile_to = os.environ.get("MEGANE_TEST_PROXY_PROFILE")
    if profile_to:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
        atexit.register(profiler.dump_stats, profile_to)
    base_url = serverapp.base_url
    handlers = []
    servers = list(ServerProxy(parent=serverapp).servers.items())
    servers += _entrypoint_servers(serverapp.log)
    for name, spec in servers:
        process = Process(name, spec, base_url, serverapp.log)
        _processes.append(process)
        context = url_path_join(base_url, name)
        kwargs = {"process": process, "context_path": context, "absolute_url": bool(spec.get("absolute_url", False))}
        handlers.append((url_path_join(base_url, name, r"(.*)"), ProxyHandler, kwargs))
        handlers.append((context, AddSlash))
    serverapp.web_app.add_handlers(".*$", handlers)
    serverapp.log.info("megane_test_server_proxy: serving %s", [h[0] for h in handlers])


load_jupyter_server_extension = _load_jupyter_server_extension


def _entrypoint_servers(log):
    """(name, options) of every jupyter_serverproxy_servers entry point."""
    servers = []
    for ep in entry_points(group="jupyter_serverproxy_servers"):
        try:
            spec = ep.load()()
        except Exception as e:
            warnings.warn("entry_point %s was unable to be loaded: %s" % (ep.name, e))
            continue
        log.info("megane_test_server_proxy: entry point %s (%s): %s", ep.name, ep.value, spec)
        servers.append((ep.name, spec))
    return servers


def _unload_jupyter_server_extension(serverapp):
    for p in _processes:
        p.stop()


atexit.register(_unload_jupyter_server_extension, None)
