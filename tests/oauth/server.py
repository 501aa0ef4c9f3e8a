"""An OAuth 2.1 authorization server and two MCP protected resources, in one process.

mcpfleet's tests of OAuth for remote streamable-HTTP servers run against it:

    python3 tests/oauth/server.py --journal PATH [--token-ttl SECS] [--deny]
        [--rotate | --no-rotate] [--revocation | --no-revocation]
        [--scopes "a b"] [--port PORT] [--tag TAG]

It listens on 127.0.0.1 (a free port unless --port), prints one line,
`http://127.0.0.1:PORT` (BASE below), and serves until SIGTERM or SIGINT, then
exits 0. --tag is ignored: it only lets a test find the process by its argv.

Two protected resources, BASE/mcp and BASE/other, each with its own protected
resource metadata (RFC 9728) and its own token audience: a token issued for one
is refused by the other. BASE is their authorization server (RFC 8414 metadata,
dynamic client registration per RFC 7591, PKCE S256 only, resource indicators
per RFC 8707, refresh token rotation, revocation per RFC 7009, and the
client_credentials grant for the confidential client `ci-client`/`ci-secret`).
/authorize has no consent page: it redirects at once, with a code, or with
error=access_denied under --deny. Errors about the client, its redirect_uri or
the `resource` are plain 400 answers; the others are redirected to the client.

With a good token, each resource is a minimal MCP server (JSON answers, never
SSE): initialize, ping, tools/list and tools/call of two tools, `whoami`
(answers the URL of the resource that served it) and `write` (needs the scope
mcp:write, else 403 insufficient_scope).

Every event is appended to the journal, one JSON object a line:

    {"t", "event": "register", "client_id", "ok", "error"}
    {"t", "event": "authorize", "client_id", "resource", "scope", "denied", "ok", "error"}
    {"t", "event": "token", "grant_type", "client_id", "resource", "ok", "error"}
          + {"scope", "access_token", "refresh_token"} when ok
    {"t", "event": "revoke", "client_id", "token", "kind", "revoked", "error"}
    {"t", "event": "request", "path", "http_method", "method", "token",
          "token_resource", "status"}

Tokens, codes, verifiers and secrets never appear in it, nor on stderr: a token
is only ever shown as the first 16 hex digits of its SHA-256 ("token",
"access_token", "refresh_token"), so a test can match a request to the token
response it came from. "method" is the JSON-RPC method (null when there is
none), "token_resource" the resource the presented token was issued for (null
for no token or an unknown one).
"""

import argparse
import base64
import hashlib
import json
import os
import re
import secrets
import signal
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_BODY = 1 << 20  # larger request bodies are answered 413
CODE_TTL = 60  # seconds an authorization code lives
PROTOCOL_VERSIONS = ("2025-03-26", "2025-06-18", "2025-11-25")
LATEST_PROTOCOL = "2025-11-25"
RESOURCE_PATHS = ("/mcp", "/other")
PRM_PREFIX = "/.well-known/oauth-protected-resource"
CI_CLIENT_ID, CI_CLIENT_SECRET = "ci-client", "ci-secret"
WRITE_SCOPE = "mcp:write"
OFFLINE_ACCESS = "offline_access"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
VERIFIER = re.compile(r"[A-Za-z0-9._~-]{43,128}")
GRANT_TYPES = ("authorization_code", "refresh_token", "client_credentials")

TOOLS = [
    {"name": "whoami", "description": "Answers the URL of the resource that served the call.",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "write", "description": "Pretends to write; needs the scope mcp:write.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
]


class Reject(Exception):
    """An error answer: HTTP status, OAuth error code, description, extra headers."""

    def __init__(self, status, error, description="", headers=None):
        super().__init__(error)
        self.status, self.error, self.description = status, error, description
        self.headers = headers or {}

    def body(self):
        body = {"error": self.error}
        if self.description:
            body["error_description"] = self.description
        return body


def fingerprint(value):
    """What the journal shows of a secret: a 16-hex-digit SHA-256 prefix."""
    return hashlib.sha256(value.encode()).hexdigest()[:16] if value else None


def pkce_s256(verifier):
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def single_values(text, where):
    """Parse a query or form body; OAuth parameters must not repeat."""
    values = {}
    for key, value in urllib.parse.parse_qsl(text, keep_blank_values=True):
        if key in values:
            raise Reject(400, "invalid_request", f"parameter {key} repeated in {where}")
        values[key] = value
    return values


def redirect_matches(registered, requested):
    """Exact match, or, per RFC 8252 section 7.3, any port on a loopback redirect."""
    if registered == requested:
        return True
    a, b = urllib.parse.urlsplit(registered), urllib.parse.urlsplit(requested)
    try:
        a.port, b.port  # an invalid port raises ValueError
    except ValueError:
        return False
    return (a.scheme == b.scheme == "http" and a.hostname in LOOPBACK_HOSTS
            and a.hostname == b.hostname and (a.path or "/") == (b.path or "/")
            and a.query == b.query and not b.fragment)


def with_params(uri, params):
    """`uri` with `params` appended to its query."""
    separator = "&" if urllib.parse.urlsplit(uri).query else ("" if uri.endswith("?") else "?")
    return uri + separator + urllib.parse.urlencode(params)


class Journal:
    """The append-only event log, one JSON object a line, fsync'd per line."""

    def __init__(self, path):
        self.lock = threading.Lock()
        self.file = open(path, "a", encoding="utf-8")

    def write(self, event, **fields):
        line = json.dumps({"t": time.time(), "event": event, **fields})
        with self.lock:
            if self.file.closed:  # a late request while shutting down
                return
            self.file.write(line + "\n")
            self.file.flush()
            os.fsync(self.file.fileno())

    def close(self):
        with self.lock:
            self.file.close()


class Fixture(ThreadingHTTPServer):
    """The server and all its state; everything mutable is guarded by self.lock."""

    daemon_threads = True

    def __init__(self, port, options, journal):
        super().__init__(("127.0.0.1", port), Handler)
        self.base = f"http://127.0.0.1:{self.server_address[1]}"
        self.journal = journal
        self.ttl, self.deny = options.token_ttl, options.deny
        self.rotate, self.revocation = options.rotate, options.revocation
        self.scopes = options.scopes.split()
        self.lock = threading.Lock()
        # client_id -> {"secret": str | None, "redirect_uris": [...]}
        self.clients = {CI_CLIENT_ID: {"secret": CI_CLIENT_SECRET, "redirect_uris": []}}
        # code -> {"client_id", "redirect_uri", "challenge", "resource", "scope", "expires"}
        self.codes = {}
        # access token -> {"client_id", "resource", "scope", "expires", "grant", "revoked"}
        self.access = {}
        # refresh token -> {"client_id", "resource", "scope", "grant", "revoked"}
        self.refresh = {}

    # --- documents ---------------------------------------------------------

    def resource_url(self, path):
        return self.base + path

    def prm_url(self, path):
        return self.base + PRM_PREFIX + path

    def resource_metadata(self, path):
        return {"resource": self.resource_url(path), "authorization_servers": [self.base],
                "scopes_supported": self.scopes, "bearer_methods_supported": ["header"]}

    def server_metadata(self):
        metadata = {  # RFC 8414
            "issuer": self.base,
            "authorization_endpoint": self.base + "/authorize",
            "token_endpoint": self.base + "/token",
            "registration_endpoint": self.base + "/register",
            "revocation_endpoint": self.base + "/revoke",
            "response_types_supported": ["code"],
            "grant_types_supported": list(GRANT_TYPES),
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_basic",
                                                      "client_secret_post"],
            "scopes_supported": self.scopes + [OFFLINE_ACCESS],
            "authorization_response_iss_parameter_supported": True,
        }
        if not self.revocation:
            del metadata["revocation_endpoint"]
        return metadata

    # --- grants (called with self.lock held) -------------------------------

    def resource_of(self, value):
        """The resource a `resource` parameter names, or None if it names neither."""
        return value if value in [self.resource_url(p) for p in RESOURCE_PATHS] else None

    def granted_scope(self, requested):
        """The scopes granted for a request; all of them (offline_access aside) if none asked."""
        asked = tuple(dict.fromkeys((requested or "").split()))
        unknown = [s for s in asked if s not in self.scopes and s != OFFLINE_ACCESS]
        if unknown:
            raise Reject(400, "invalid_scope", "unknown scope " + " ".join(unknown))
        return asked or tuple(self.scopes)

    def issue(self, client_id, resource, scope, grant, refresh=None, with_refresh=True):
        """A token response; a new refresh token unless `refresh` is given or not wanted."""
        access = "at-" + secrets.token_urlsafe(32)
        record = {"client_id": client_id, "resource": resource, "scope": scope,
                  "grant": grant, "revoked": False}
        self.access[access] = {**record, "expires": time.monotonic() + self.ttl}
        answer = {"access_token": access, "token_type": "Bearer", "expires_in": self.ttl,
                  "scope": " ".join(scope)}
        if with_refresh:
            if refresh is None:
                refresh = "rt-" + secrets.token_urlsafe(32)
                self.refresh[refresh] = record
            answer["refresh_token"] = refresh
        return answer

    def authorization_code(self, client_id, form):
        code = self.codes.pop(form.get("code") or "", None)  # single use, even when refused
        if code is None or code["expires"] < time.monotonic():
            raise Reject(400, "invalid_grant", "unknown, used or expired authorization code")
        if code["client_id"] != client_id:
            raise Reject(400, "invalid_grant", "code was issued to another client")
        if form.get("redirect_uri") != code["redirect_uri"]:
            raise Reject(400, "invalid_grant", "redirect_uri differs from the authorization")
        verifier = form.get("code_verifier") or ""
        if not VERIFIER.fullmatch(verifier) or pkce_s256(verifier) != code["challenge"]:
            raise Reject(400, "invalid_grant", "PKCE verification failed")
        if form.get("resource") != code["resource"]:
            raise Reject(400, "invalid_target", "resource differs from the authorization request")
        # A grant names the lineage of tokens that one authorization starts.
        return self.issue(client_id, code["resource"], code["scope"], secrets.token_hex(8))

    def refresh_token(self, client_id, form):
        old = form.get("refresh_token") or ""
        record = self.refresh.get(old)
        if record is None or record["revoked"] or record["client_id"] != client_id:
            raise Reject(400, "invalid_grant", "unknown, rotated or revoked refresh token")
        if "resource" in form and form["resource"] != record["resource"]:
            raise Reject(400, "invalid_target", "resource differs from the original grant")
        scope = record["scope"]
        if form.get("scope"):
            asked = tuple(dict.fromkeys(form["scope"].split()))
            if not set(asked) <= set(scope):
                raise Reject(400, "invalid_scope", "scope exceeds the original grant")
            scope = asked
        if not self.rotate:
            return self.issue(client_id, record["resource"], scope, record["grant"], refresh=old)
        record["revoked"] = True  # rotation: the old refresh token is spent
        answer = self.issue(client_id, record["resource"], scope, record["grant"])
        self.refresh[answer["refresh_token"]]["scope"] = record["scope"]
        return answer

    def client_credentials(self, client_id, form):
        if client_id != CI_CLIENT_ID:
            raise Reject(400, "unauthorized_client", "client_credentials is for ci-client only")
        resource = self.resource_of(form.get("resource"))
        if resource is None:
            raise Reject(400, "invalid_target", "resource must name a protected resource")
        scope = self.granted_scope(form.get("scope"))
        return self.issue(client_id, resource, scope, secrets.token_hex(8), with_refresh=False)

    def revoke(self, client_id, token):
        """Revoke `token` if `client_id` (None: anyone) owns it; (kind, revoked)."""
        if token in self.access:
            record, kind = self.access[token], "access_token"
        elif token in self.refresh:
            record, kind = self.refresh[token], "refresh_token"
        else:
            return None, False
        if record["revoked"] or client_id not in (None, record["client_id"]):
            return kind, False
        record["revoked"] = True
        if kind == "refresh_token":  # and every access token of its grant
            for access in self.access.values():
                if access["grant"] == record["grant"]:
                    access["revoked"] = True
        return kind, True


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "oauth-fixture/1"
    timeout = 30  # an idle or stalled connection is dropped

    # --- plumbing ----------------------------------------------------------

    def log_request(self, code="-", size="-"):
        # Only method, path and status: queries may carry codes or state.
        path = urllib.parse.urlsplit(self.path).path
        sys.stderr.write(f"oauth-fixture: {self.command} {path} {code}\n")

    def log_message(self, format, *args):
        pass  # the default message repeats the request line, query included

    def reply(self, status, body=b"", content_type=None, headers=None):
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def reply_json(self, status, obj, headers=None):
        body = json.dumps(obj).encode()
        self.reply(status, body, "application/json", headers)

    def reply_reject(self, reject, headers=None):
        self.reply_json(reject.status, reject.body(), {**(headers or {}), **reject.headers})

    def read_body(self):
        """The request body: Content-Length required, at most MAX_BODY bytes."""
        length = self.headers.get("Content-Length")
        if length is None or not length.strip().isdecimal():  # no chunked bodies here
            self.close_connection = True
            raise Reject(411 if length is None else 400, "invalid_request",
                         "a valid Content-Length is required")
        length = int(length)
        if length > MAX_BODY:
            self.close_connection = True  # the body is left unread
            raise Reject(413, "invalid_request", "request body too large")
        return self.rfile.read(length)

    def read_form(self):
        content_type = self.headers.get("Content-Type", "")
        body = self.read_body()
        if content_type.split(";")[0].strip().lower() != "application/x-www-form-urlencoded":
            raise Reject(400, "invalid_request", "expected application/x-www-form-urlencoded")
        try:
            return single_values(body.decode("utf-8"), "body")
        except UnicodeDecodeError:
            raise Reject(400, "invalid_request", "body is not UTF-8")

    def split_path(self):
        parts = urllib.parse.urlsplit(self.path)
        return parts.path, parts.query

    # --- routes ------------------------------------------------------------

    def do_GET(self):
        path, query = self.split_path()
        fixture = self.server
        if path.startswith(PRM_PREFIX) and path[len(PRM_PREFIX):] in RESOURCE_PATHS:
            self.reply_json(200, fixture.resource_metadata(path[len(PRM_PREFIX):]))
        elif path == "/.well-known/oauth-authorization-server":
            self.reply_json(200, fixture.server_metadata())
        elif path == "/authorize":
            self.authorize(query)
        elif path in RESOURCE_PATHS:
            self.resource(path)
        else:
            self.reply_json(404, {"error": "not_found"})

    def do_POST(self):
        path, _ = self.split_path()
        if path == "/register":
            self.register()
        elif path == "/token":
            self.token()
        elif path == "/revoke" and self.server.revocation:
            self.revoke()
        elif path in RESOURCE_PATHS:
            self.resource(path)
        else:
            self.reply_json(404, {"error": "not_found"})

    def do_DELETE(self):
        path, _ = self.split_path()
        if path in RESOURCE_PATHS:
            self.resource(path)
        else:
            self.reply_json(404, {"error": "not_found"})

    # --- authorization server ----------------------------------------------

    def register(self):
        fixture = self.server
        try:
            try:
                metadata = json.loads(self.read_body())
            except ValueError:
                raise Reject(400, "invalid_client_metadata", "body is not JSON")
            if not isinstance(metadata, dict):
                raise Reject(400, "invalid_client_metadata", "body is not a JSON object")
            uris = metadata.get("redirect_uris")
            if not isinstance(uris, list) or not uris or not all(
                isinstance(u, str) and urllib.parse.urlsplit(u).scheme in ("http", "https")
                and not urllib.parse.urlsplit(u).fragment for u in uris
            ):
                raise Reject(400, "invalid_redirect_uri", "redirect_uris must list http(s) URIs")
            grant_types = metadata.get("grant_types", ["authorization_code", "refresh_token"])
            if not isinstance(grant_types, list) or any(g not in GRANT_TYPES for g in grant_types):
                raise Reject(400, "invalid_client_metadata", "unsupported grant_types")
        except Reject as reject:
            fixture.journal.write("register", client_id=None, ok=False, error=reject.error)
            self.reply_reject(reject)
            return
        client_id = "client-" + secrets.token_hex(8)
        with fixture.lock:
            fixture.clients[client_id] = {"secret": None, "redirect_uris": list(uris)}
        answer = {"client_id": client_id, "client_id_issued_at": int(time.time()),
                  "redirect_uris": uris, "token_endpoint_auth_method": "none",
                  "grant_types": grant_types, "response_types": ["code"]}
        for name in ("client_name", "scope"):
            if isinstance(metadata.get(name), str):
                answer[name] = metadata[name]
        fixture.journal.write("register", client_id=client_id, ok=True, error=None)
        self.reply_json(201, answer, {"Cache-Control": "no-store"})

    def authorize(self, query):
        fixture = self.server
        entry = {"client_id": None, "resource": None, "scope": None, "denied": False}
        try:
            params = single_values(query, "query")
            entry["client_id"] = params.get("client_id")
            entry["resource"] = params.get("resource")
            with fixture.lock:
                client = fixture.clients.get(params.get("client_id") or "")
                registered = client["redirect_uris"] if client else []
            if client is None:
                raise Reject(400, "invalid_client", "unknown client_id")
            redirect_uri = params.get("redirect_uri")
            if redirect_uri is None and len(registered) == 1:
                redirect_uri = registered[0]
            if not redirect_uri or not any(redirect_matches(r, redirect_uri) for r in registered):
                raise Reject(400, "invalid_request", "redirect_uri is not registered")
            if fixture.resource_of(params.get("resource")) is None:
                raise Reject(400, "invalid_target", "resource must name a protected resource")
        except Reject as reject:  # not redirected: the redirect_uri is not trusted
            fixture.journal.write("authorize", **entry, ok=False, error=reject.error)
            self.reply_reject(reject)
            return

        # From here on, answers go back to the client through its redirect_uri.
        answer = {"state": params["state"]} if "state" in params else {}
        answer["iss"] = fixture.base  # RFC 9207
        try:
            if params.get("response_type") != "code":
                raise Reject(400, "unsupported_response_type", "response_type must be code")
            if not params.get("code_challenge"):
                raise Reject(400, "invalid_request", "code_challenge required")
            if params.get("code_challenge_method") != "S256":
                raise Reject(400, "invalid_request", "code_challenge_method must be S256")
            scope = fixture.granted_scope(params.get("scope"))
            entry["scope"] = " ".join(scope)
            if fixture.deny:
                entry["denied"] = True
                raise Reject(400, "access_denied", "the resource owner denied the request")
        except Reject as reject:
            fixture.journal.write("authorize", **entry, ok=False, error=reject.error)
            error = {"error": reject.error, "error_description": reject.description}
            location = with_params(redirect_uri, {**error, **answer})
            self.reply(302, headers={"Location": location, "Cache-Control": "no-store"})
            return
        code = secrets.token_urlsafe(32)
        with fixture.lock:
            fixture.codes[code] = {
                "client_id": params["client_id"], "redirect_uri": redirect_uri,
                "challenge": params["code_challenge"], "resource": params["resource"],
                "scope": scope, "expires": time.monotonic() + CODE_TTL}
        fixture.journal.write("authorize", **entry, ok=True, error=None)
        location = with_params(redirect_uri, {"code": code, **answer})
        self.reply(302, headers={"Location": location, "Cache-Control": "no-store"})

    def client_identity(self, form, required=True):
        """The authenticated client_id of a token or revocation request (Basic or form)."""
        client_id, secret = form.get("client_id"), form.get("client_secret")
        header = self.headers.get("Authorization", "")
        if header[:6].lower() == "basic ":
            try:
                decoded = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
            except ValueError:
                raise Reject(401, "invalid_client", "malformed Basic credentials")
            name, _, password = decoded.partition(":")
            name, password = urllib.parse.unquote_plus(name), urllib.parse.unquote_plus(password)
            if client_id not in (None, name):
                raise Reject(400, "invalid_request", "client_id differs from Basic credentials")
            client_id, secret = name, password
        if not client_id:
            if required:
                raise Reject(401, "invalid_client", "no client identification")
            return None
        with self.server.lock:
            client = self.server.clients.get(client_id)
        if client is None:
            raise Reject(401, "invalid_client", "unknown client")
        expected = client["secret"]  # None: a public client, which has no secret to check
        if expected is not None and not secrets.compare_digest(secret or "", expected):
            raise Reject(401, "invalid_client", "bad client secret")
        return client_id

    def token(self):
        fixture = self.server
        entry = {"grant_type": None, "client_id": None, "resource": None}
        no_store = {"Cache-Control": "no-store", "Pragma": "no-cache"}
        try:
            form = self.read_form()
            entry["grant_type"] = form.get("grant_type")
            entry["resource"] = form.get("resource")
            entry["client_id"] = form.get("client_id")  # kept if authentication fails
            entry["client_id"] = self.client_identity(form)
            grant = {"authorization_code": fixture.authorization_code,
                     "refresh_token": fixture.refresh_token,
                     "client_credentials": fixture.client_credentials}.get(form.get("grant_type"))
            if grant is None:
                raise Reject(400, "unsupported_grant_type", "unsupported grant_type")
            with fixture.lock:
                answer = grant(entry["client_id"], form)
        except Reject as reject:
            if reject.status == 401:
                reject.headers["WWW-Authenticate"] = 'Basic realm="oauth-fixture"'
            fixture.journal.write("token", **entry, ok=False, error=reject.error)
            self.reply_reject(reject, no_store)
            return
        fixture.journal.write("token", **entry, ok=True, error=None, scope=answer["scope"],
                              access_token=fingerprint(answer["access_token"]),
                              refresh_token=fingerprint(answer.get("refresh_token")))
        self.reply_json(200, answer, no_store)

    def revoke(self):
        """RFC 7009: 200 whatever the token, once the request itself is sound."""
        fixture = self.server
        try:
            form = self.read_form()
            client_id = self.client_identity(form, required=False)
            token = form.get("token")
            if not token:
                raise Reject(400, "invalid_request", "token required")
        except Reject as reject:
            fixture.journal.write("revoke", client_id=None, token=None, kind=None,
                                  revoked=False, error=reject.error)
            self.reply_reject(reject)
            return
        with fixture.lock:
            kind, revoked = fixture.revoke(client_id, token)
        fixture.journal.write("revoke", client_id=client_id, token=fingerprint(token),
                              kind=kind, revoked=revoked, error=None)
        self.reply(200, headers={"Cache-Control": "no-store"})

    # --- protected resources -----------------------------------------------

    def bearer_token(self):
        """The bearer token sent, or None when there is no Bearer authorization."""
        scheme, _, value = self.headers.get("Authorization", "").partition(" ")
        return value.strip() if scheme.lower() == "bearer" else None

    def resource(self, path):
        fixture = self.server
        token = self.bearer_token()
        entry = {"path": path, "http_method": self.command, "method": None,
                 "token": fingerprint(token), "token_resource": None}
        status = self.serve_resource(path, token, entry)
        fixture.journal.write("request", **entry, status=status)

    def serve_resource(self, path, token, entry):
        """Answer a request to a protected resource; returns the HTTP status."""
        fixture = self.server
        resource = fixture.resource_url(path)
        metadata = f'resource_metadata="{fixture.prm_url(path)}"'
        with fixture.lock:
            record = fixture.access.get(token) if token else None
            entry["token_resource"] = record["resource"] if record else None
            valid = (record is not None and not record["revoked"]
                     and record["expires"] > time.monotonic() and record["resource"] == resource)
            scope = record["scope"] if valid else ()

        if self.command == "GET":  # no SSE stream here
            self.reply(405, headers={"Allow": "POST, DELETE"})
            return 405
        message = None
        if self.command == "POST":
            try:
                body = self.read_body()
            except Reject as reject:
                self.reply_reject(reject)
                return reject.status
            try:
                message = json.loads(body)
            except ValueError:
                message = None
            if isinstance(message, dict) and isinstance(message.get("method"), str):
                entry["method"] = message["method"]

        if not valid:  # error="invalid_token" only when a token was sent
            error = "invalid_token" if token is not None else None
            challenge = f'Bearer error="{error}", ' + metadata if error else "Bearer " + metadata
            body = {"error": error or "unauthorized"}
            self.reply_json(401, body, {"WWW-Authenticate": challenge})
            return 401
        if self.command == "DELETE":  # the end of a session
            self.reply(200)
            return 200

        if not isinstance(message, dict):  # unparsable, or a batch (not in these revisions)
            batch = isinstance(message, list)
            error = {"code": -32600, "message": "Invalid Request"} if batch else {
                "code": -32700, "message": "Parse error"}
            self.reply_json(400, {"jsonrpc": "2.0", "id": None, "error": error})
            return 400
        method = entry["method"]
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        if method == "tools/call" and params.get("name") == "write" and WRITE_SCOPE not in scope:
            challenge = (f'Bearer error="insufficient_scope", scope="{" ".join(fixture.scopes)}", '
                         + metadata)
            self.reply_json(403, {"error": "insufficient_scope"}, {"WWW-Authenticate": challenge})
            return 403
        if "id" not in message:  # a notification, or a response to the server
            self.reply(202)
            return 202

        headers = {}
        answer = {"jsonrpc": "2.0", "id": message["id"]}
        if method == "initialize":
            asked = params.get("protocolVersion")
            answer["result"] = {
                "protocolVersion": asked if asked in PROTOCOL_VERSIONS else LATEST_PROTOCOL,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "oauth-fixture", "version": "1"}}
            headers["Mcp-Session-Id"] = secrets.token_hex(16)
        elif method == "ping":
            answer["result"] = {}
        elif method == "tools/list":
            answer["result"] = {"tools": TOOLS}
        elif method == "tools/call" and params.get("name") == "whoami":
            answer["result"] = {"content": [{"type": "text", "text": resource}]}
        elif method == "tools/call" and params.get("name") == "write":
            arguments = params.get("arguments") if isinstance(params.get("arguments"), dict) else {}
            text = arguments.get("text", "")
            written = f"wrote {len(text) if isinstance(text, str) else 0} characters to {resource}"
            answer["result"] = {"content": [{"type": "text", "text": written}]}
        elif method == "tools/call":
            answer["error"] = {"code": -32602, "message": f"unknown tool: {params.get('name')}"}
        elif method is None:
            answer["error"] = {"code": -32600, "message": "Invalid Request"}
        else:
            answer["error"] = {"code": -32601, "message": f"Method not found: {method}"}
        self.reply_json(200, answer, headers)
        return 200


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--journal", required=True, help="file to append events to")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: any)")
    parser.add_argument("--token-ttl", type=int, default=3600, help="access token life, seconds")
    parser.add_argument("--deny", action="store_true", help="deny every authorization request")
    parser.add_argument("--rotate", action=argparse.BooleanOptionalAction, default=True,
                        help="issue a new refresh token on each refresh (default: yes)")
    parser.add_argument("--revocation", action=argparse.BooleanOptionalAction, default=True,
                        help="offer the revocation endpoint (default: yes)")
    parser.add_argument("--scopes", default="mcp:read mcp:write", help="the resources' scopes")
    parser.add_argument("--tag", help="ignored; lets a test tag the process")
    options = parser.parse_args()
    if options.token_ttl < 1:
        parser.error("--token-ttl must be at least 1")

    journal = Journal(options.journal)
    fixture = Fixture(options.port, options, journal)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    threading.Thread(target=fixture.serve_forever, daemon=True).start()
    sys.stdout.write(fixture.base + "\n")
    sys.stdout.flush()
    while not stop.wait(1):  # wake up now and then so signals are seen promptly
        pass
    fixture.shutdown()
    fixture.server_close()
    journal.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
