"""Model backends: an OpenAI-compatible server over HTTP (standard library only), or a local transformers checkpoint
sampled in a worker process; one that is down, slow or broken raises ModelUnavailable, saying why.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Protocol

from drtriton_lsp.models.formats import END_LINE
from drtriton_lsp.models.script_grammar import ScriptConstraint, answer_pattern
from drtriton_lsp.models.settings import ModelSettings

# Checkpoint files up to this size are hashed whole; larger ones (weights) by name, size, first and last block.
WHOLE_FILE_HASH_BYTES = 64 << 20
EDGE_HASH_BYTES = 1 << 20
CANCEL_POLL_S = 0.1
RETRY_PAUSE_S = 0.5
CHECK_TIMEOUT_S = 5.0


class ModelUnavailable(Exception):
    """The backend gave no answer (down, slow, refused the request, failed to load); `message` says which."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class RequestRefused(ModelUnavailable):
    """The server answered that the request is wrong (HTTP 4xx): asking again gives the same answer."""


class SamplingCancelled(Exception):
    """The job was cancelled while the model was sampling."""


@dataclass(frozen=True)
class Sampling:
    """How each request samples: answers per prompt, temperature (0: greedy), tokens per answer and seed."""

    samples: int
    temperature: float = 0.8
    max_tokens: int = 2048
    seed: int = 0


class ModelBackend(Protocol):
    """Answers prompts: `complete` returns, per prompt, `sampling.samples` completions (text after the prompt).

    constraints: per prompt, the `ScriptConstraint` its answers are held to while they are sampled, or None (free);
    `unconstrained` says why a backend could not hold answers to it ("")."""

    name: str  # "openai" | "transformers"
    model: str  # the model's name or checkpoint directory, as the report shows it
    checkpoint: str  # a content hash of the checkpoint, where the backend can compute one
    unconstrained: str

    def complete(
        self, prompts: list[str], sampling: Sampling, cancel: threading.Event | None = None,
        constraints: list[ScriptConstraint | None] | None = None,
    ) -> list[list[str]]: ...

    def problem(self) -> str:
        """Why the backend would not answer now ("" when it answers); cheap, for printDebugInformation."""
        ...


class OpenAIBackend:
    """Any OpenAI-compatible server's `/v1/completions` (vLLM, SGLang, TGI): `n` samples, seed, stop at the end line."""

    name = "openai"

    def __init__(self, endpoint: str, model: str = "", *, api_key_env: str = "", timeout_s: float = 120.0,
                 retries: int = 2):
        base = endpoint.rstrip("/")
        self.base_url = base if base.endswith("/v1") else base + "/v1"
        self.requested_model = model
        self.api_key_env, self.timeout_s, self.retries = api_key_env, timeout_s, retries
        self.checkpoint = ""
        self.unconstrained = ""  # the server's answer when it refused structured outputs (then it is not asked again)
        self._model = model
        # the served model's context in tokens, where the server lists it (vLLM's `max_model_len`): a request for
        # more new tokens than that is refused (HTTP 400), so max_tokens is capped at it
        self._context: int | None = None
        self._listed = False

    @property
    def model(self) -> str:
        return self._model or self.requested_model

    def problem(self) -> str:
        try:
            self._served_model(timeout_s=min(CHECK_TIMEOUT_S, self.timeout_s))
        except ModelUnavailable as unavailable:
            return unavailable.message
        return ""

    def complete(
        self, prompts: list[str], sampling: Sampling, cancel: threading.Event | None = None,
        constraints: list[ScriptConstraint | None] | None = None,
    ) -> list[list[str]]:
        """One request per distinct constraint (a request's structured outputs hold all its prompts)."""
        per_prompt = constraints or [None] * len(prompts)
        answers: dict[int, list[str]] = {}
        for constraint in dict.fromkeys(per_prompt):
            numbers = [number for number, own in enumerate(per_prompt) if own == constraint]
            texts = self._complete([prompts[number] for number in numbers], sampling, cancel, constraint)
            answers.update(zip(numbers, texts))
        return [answers[number] for number in range(len(prompts))]

    def _complete(
        self, prompts: list[str], sampling: Sampling, cancel: threading.Event | None,
        constraint: ScriptConstraint | None,
    ) -> list[list[str]]:
        model = self._model if self._listed else self._served_model(timeout_s=self.timeout_s)
        max_tokens = min(sampling.max_tokens, self._context) if self._context else sampling.max_tokens
        body = {
            "model": model, "prompt": prompts, "n": sampling.samples, "temperature": sampling.temperature,
            "max_tokens": max_tokens, "seed": sampling.seed, "stop": [END_LINE],
        }

        def ask(payload: dict[str, Any]) -> Any:
            return _unless_cancelled(lambda: self._request("completions", payload, self.timeout_s), cancel)

        if constraint is None or self.unconstrained:
            answer = ask(body)
        else:
            try:
                answer = ask({**body, "structured_outputs": {"regex": answer_pattern(constraint.line)}})
            except RequestRefused as refused:  # without vLLM's structured outputs? ask again without them
                answer = ask(body)  # refused again: the request is wrong for another reason, and that is the error
                self.unconstrained = f"the server refused structured outputs ({refused.message})"
        choices = answer.get("choices") if isinstance(answer, dict) else None
        if not isinstance(choices, list) or len(choices) != len(prompts) * sampling.samples:
            raise ModelUnavailable(
                f"the server at {self.base_url} answered {len(choices) if isinstance(choices, list) else 'no'} "
                f"choices for {len(prompts)} prompts x {sampling.samples} samples"
            )
        # choice `index` is prompt * n + sample (OpenAI's and vLLM's numbering)
        ordered = sorted(choices, key=lambda choice: choice.get("index", 0))
        texts = [str(choice.get("text") or "") for choice in ordered]
        return [texts[number * sampling.samples:(number + 1) * sampling.samples] for number in range(len(prompts))]

    def _served_model(self, timeout_s: float) -> str:
        """The configured model name, else the first model the server lists (remembered, with its context)."""
        listed = self._request("models", None, timeout_s)
        entries = [entry for entry in listed.get("data", []) if isinstance(entry, dict)]
        names = [entry.get("id") for entry in entries]
        if self.requested_model:
            if self.requested_model not in names:
                raise ModelUnavailable(
                    f"the server at {self.base_url} serves {', '.join(map(str, names)) or 'no model'}, "
                    f"not {self.requested_model!r}"
                )
        elif not names:
            raise ModelUnavailable(f"the server at {self.base_url} lists no model")
        self._model = self.requested_model or str(names[0])
        context = entries[names.index(self._model)].get("max_model_len")
        self._context = context if isinstance(context, int) and not isinstance(context, bool) and context > 0 else None
        self._listed = True
        return self._model

    def _request(self, route: str, body: dict[str, Any] | None, timeout_s: float) -> Any:
        """GET (no body) or POST JSON to the server, retried on connection errors, timeouts and 5xx answers."""
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        data = json.dumps(body).encode() if body is not None else None
        url = f"{self.base_url}/{route}"
        failure = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(RETRY_PAUSE_S * attempt)
            request = urllib.request.Request(url, data=data, headers=headers, method="POST" if data else "GET")
            try:
                with urllib.request.urlopen(request, timeout=timeout_s) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as error:
                detail = error.read().decode(errors="replace")[:300]
                failure = f"HTTP {error.code}: {detail}"
                if error.code < 500:  # the request itself is wrong: asking again gives the same answer
                    raise RequestRefused(
                        f"the model server at {url} refused the request ({failure})"
                    ) from None
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as error:
                reason = getattr(error, "reason", error)
                failure = f"timed out after {timeout_s:g} s" if isinstance(reason, TimeoutError) else str(reason)
            except ValueError as error:
                failure = f"the answer is not JSON ({error})"
        tries = f"{self.retries + 1} tries" if self.retries else "1 try"
        raise ModelUnavailable(f"the model server at {url} did not answer ({failure}; {tries})")


class CheckpointBackend:
    """A local checkpoint directory, loaded and sampled in a worker process per request (never in the language server):
    by transformers (`engine` "transformers": batched, GPU when present) or by vLLM's offline engine ("vllm": the
    worker's interpreter must have vLLM; drtriton is put on its path)."""

    def __init__(self, path: str, *, runner, engine: str = "transformers", timeout_s: float = 120.0):
        self.path = Path(path).expanduser().resolve()
        self.name = engine
        self.model = str(self.path)
        self.runner, self.timeout_s = runner, timeout_s
        self.checkpoint = checkpoint_hash(self.path) if not self.problem() else ""
        self.unconstrained = ""  # the worker holds every answer with a constraint to it

    def problem(self) -> str:
        if not (self.path / "config.json").is_file():
            return f"{self.path} is not a checkpoint directory (no config.json); save one with save_pretrained"
        return ""

    def complete(
        self, prompts: list[str], sampling: Sampling, cancel: threading.Event | None = None,
        constraints: list[ScriptConstraint | None] | None = None,
    ) -> list[list[str]]:
        from drtriton_lsp.errors import DrtritonError
        from drtriton_lsp.runners.local import JobFailure, JobLimits

        problem = self.problem()
        if problem:
            raise ModelUnavailable(problem)
        params = {
            "engine": self.name, "path": str(self.path), "prompts": prompts, "samples": sampling.samples,
            "temperature": sampling.temperature, "max_tokens": sampling.max_tokens, "seed": sampling.seed,
            "constraints": [constraint.to_json() if constraint else None for constraint in constraints or []] or None,
        }
        # vLLM's interpreter (its own venv) on this machine does not have drtriton installed: it gets this copy's
        local_vllm = self.name == "vllm" and self.runner.host is None
        package_root = [str(Path(__file__).resolve().parents[2])] if local_vllm else None
        try:
            answer = self.runner.call("sample_model", params, limits=JobLimits(timeout_s=self.timeout_s), cancel=cancel,
                                      python_path=package_root)
        except JobFailure as failure:
            if failure.reason == "cancelled":
                raise SamplingCancelled() from failure
            detail = f"{failure.detail}\n{failure.stderr_tail}".strip()
            raise ModelUnavailable(f"the model worker failed: {detail}") from failure
        except DrtritonError as error:
            raise ModelUnavailable(f"the model worker refused: {error.message}") from error
        return answer["completions"]


def open_backend(settings: ModelSettings, runner) -> ModelBackend:
    """The backend the settings name; a setting that cannot work raises ModelUnavailable saying what to set."""
    if settings.backend == "openai":
        if not settings.endpoint:
            raise ModelUnavailable("the openai backend needs drtriton.model.endpoint (e.g. http://localhost:8000/v1)")
        return OpenAIBackend(settings.endpoint, settings.name, api_key_env=settings.apiKeyEnv,
                             timeout_s=settings.timeoutSeconds)
    if settings.backend in ("transformers", "vllm"):
        if not settings.path:
            raise ModelUnavailable(f"the {settings.backend} backend needs drtriton.model.path (a checkpoint directory)")
        if settings.backend == "vllm" and settings.python and runner is not None:
            runner = replace(runner, python=settings.python)  # on a remote host, the interpreter there
        return CheckpointBackend(settings.path, runner=runner, engine=settings.backend,
                                 timeout_s=settings.timeoutSeconds)
    raise ModelUnavailable(f"no model backend {settings.backend!r}")


def backend_status(settings: ModelSettings) -> dict[str, Any]:
    """For printDebugInformation: the backend, its model, and whether it answers now (the server lists its models;
    a checkpoint directory has a config) or why not. Loads no model and imports no torch."""
    if not settings.enabled:
        return {"backend": "none", "answers": False, "problem": "no model: drtriton.model.backend is none"}
    try:
        backend = open_backend(settings, runner=None)  # the transformers backend needs a runner only to sample
    except ModelUnavailable as unavailable:
        return {"backend": settings.backend, "answers": False, "problem": unavailable.message}
    problem = backend.problem()
    return {"backend": backend.name, "model": backend.model, "answers": not problem, "problem": problem}


def checkpoint_hash(directory: Path) -> str:
    """A content hash of a checkpoint directory: small files whole; large ones (weights) by name, size, and their
    first and last MiB, so that a 15 GB checkpoint is hashed in milliseconds and a retrained one still differs."""
    digest = hashlib.sha256()
    for path in sorted(item for item in directory.rglob("*") if item.is_file()):
        size = path.stat().st_size
        digest.update(f"{path.relative_to(directory)}\0{size}\0".encode())
        with path.open("rb") as handle:
            if size <= WHOLE_FILE_HASH_BYTES:
                digest.update(handle.read())
            else:
                digest.update(handle.read(EDGE_HASH_BYTES))
                handle.seek(size - EDGE_HASH_BYTES)
                digest.update(handle.read(EDGE_HASH_BYTES))
    return "sha256:" + digest.hexdigest()[:16]


def _unless_cancelled(request: Callable[[], Any], cancel: threading.Event | None) -> Any:
    """Run a blocking request in a thread, raising SamplingCancelled as soon as `cancel` is set (the abandoned
    request ends by its own timeout)."""
    if cancel is None:
        return request()
    pool = ThreadPoolExecutor(max_workers=1)
    future: Future = pool.submit(request)
    pool.shutdown(wait=False)
    while not wait([future], timeout=CANCEL_POLL_S).done:
        if cancel.is_set():
            raise SamplingCancelled()
    return future.result()
