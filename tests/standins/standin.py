"""What the provider stand-ins share: a threaded loopback HTTP server whose handler answers
JSON with CORS open (the waiting page's SDK calls the stand-in from sluice's origin)."""

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JsonHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body, content_type="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Access-Control-Allow-Headers", "Content-Type")
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        """The request's JSON body ({} when empty), or None when it is not JSON."""
        n = int(self.headers.get("Content-Length") or 0)
        try:
            return json.loads(self.rfile.read(n) if n else b"{}")
        except ValueError:
            return None

    def do_OPTIONS(self):
        self.answer(204, b"")


def serve(port, handler):
    ThreadingHTTPServer(("127.0.0.1", port), handler).serve_forever()
