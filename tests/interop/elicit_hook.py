"""A webhook tool endpoint for the failover drills: round 1 asks the MCP client for a name (an
elicitation input request, with opaque state); round 2 greets whoever answered. Serves on a free
loopback port and prints `port=<n>` first. Stdlib only; signatures are not checked (the webhook
tests do that)."""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Hook(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        if body.get("round") == 1:
            answer = {"input_request": {"type": "elicitation", "message": "What is your name?",
                                        "requested_schema": {"type": "object", "properties": {
                                            "name": {"type": "string"}}, "required": ["name"]}},
                      "state": {"asked": "name", "webhook_id": self.headers.get("webhook-id")}}
        else:
            name = (body.get("input") or {}).get("content", {}).get("name", "?")
            state = body.get("state") or {}
            answer = {"content": [{"type": "text",
                                   "text": f"hello {name} (round {body.get('round')}, asked {state.get('asked')})"}]}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
print(f"port={server.server_address[1]}", flush=True)
sys.stdout.close()
server.serve_forever()
