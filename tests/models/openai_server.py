"""A real OpenAI-compatible HTTP server for the tests over a transformers checkpoint (`/v1/models`, `/v1/completions`).

`python openai_server.py CHECKPOINT [--die-after N] [--delay S] [--no-structured-outputs]` prints its port; it can die
after N answers, or lag. As vLLM does, it lists the model's context (`max_model_len`), refuses a request for more new
tokens than that, and holds answers to `structured_outputs.regex`; with --no-structured-outputs it refuses such a
request (HTTP 400), as a server without structured outputs does.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from drtriton_lsp.models.sampling_job import LoadedModel


class AnswerRegex:
    """A whole-answer regular expression as a sampling constraint (what a server does with `structured_outputs`)."""

    def __init__(self, pattern: str):
        import regex

        self.pattern = regex.compile(pattern)

    def allows(self, text: str, piece: str) -> bool:
        return self.pattern.fullmatch(text + piece, partial=True) is not None

    def finished(self, text: str) -> bool:
        return self.pattern.fullmatch(text) is not None


def serve(checkpoint: Path, die_after: int | None, delay_s: float, structured_outputs: bool) -> None:
    loaded = LoadedModel(checkpoint)
    name = checkpoint.name
    context = json.loads((checkpoint / "config.json").read_text())["max_position_embeddings"]
    answered = 0

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args) -> None:
            pass

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                entry = {"id": name, "object": "model", "max_model_len": context}
                self._answer(200, {"object": "list", "data": [entry]})
            else:
                self._answer(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            nonlocal answered
            if self.path.rstrip("/") != "/v1/completions":
                self._answer(404, {"error": {"message": f"no route {self.path}"}})
                return
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if request.get("model") != name:
                self._answer(404, {"error": {"message": f"the model {request.get('model')!r} does not exist"}})
                return
            if request.get("max_tokens", 16) > context:
                message = f"max_tokens={request['max_tokens']} cannot be greater than max_model_len={context}"
                self._answer(400, {"error": {"message": message, "type": "BadRequestError"}})
                return
            pattern = (request.get("structured_outputs") or {}).get("regex")
            if pattern is not None and not structured_outputs:
                message = "Unrecognized request argument supplied: structured_outputs"
                self._answer(400, {"error": {"message": message, "type": "invalid_request_error"}})
                return
            time.sleep(delay_s)
            prompts = request["prompt"] if isinstance(request["prompt"], list) else [request["prompt"]]
            samples = request.get("n", 1)
            completions = loaded.sample(
                prompts, samples, request.get("temperature", 1.0), request.get("max_tokens", 16), request.get("seed", 0),
                constraints=[AnswerRegex(pattern) if pattern else None] * len(prompts),
            )
            choices = []
            for prompt_number, texts in enumerate(completions):
                for sample, text in enumerate(texts):
                    for stop in request.get("stop") or []:
                        text = text.split(stop)[0]
                    choices.append({"index": prompt_number * samples + sample, "text": text, "finish_reason": "stop"})
            self._answer(200, {"object": "text_completion", "model": name, "choices": choices})
            answered += 1
            if die_after is not None and answered >= die_after:
                self.wfile.flush()
                os._exit(0)  # the server dies, as a crashed or killed one does

        def _answer(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--die-after", type=int)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--no-structured-outputs", action="store_true")
    arguments = parser.parse_args()
    serve(arguments.checkpoint, arguments.die_after, arguments.delay, not arguments.no_structured_outputs)
