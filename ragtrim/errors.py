"""Every exception ragtrim raises, under one base class.

Catch ``RagtrimError`` to handle them all. The tree::

    RagtrimError
    ├── ConfigError          (also ValueError)  a stage or pipeline parameter is invalid
    ├── InputError           (also ValueError)  a chunk, query, message or file cannot be used as given
    │   ├── EmptyLogError        (audit.reader)      ``ragtrim audit``: the log holds no request to audit
    │   ├── UnsupportedLogFormat (audit.formats)     ``ragtrim audit``: the log is of a format it names and does not read
    │   ├── ArmNotReady          (gate.client)       ``ragtrim gate``: an arm's server did not answer before timing began
    │   ├── Skip                 (audit.segments)    ``ragtrim audit``: one malformed log line (counted, never raised)
    │   └── TooDeep              (html.tree)         markup nested deeper than the parser takes (see below)
    ├── BudgetError                             pinned chunks alone exceed the token budget
    ├── MissingDependencyError (also ImportError) an optional extra is not installed
    ├── StageError                              a stage raised; names the stage, keeps the cause
    ├── ContractError                           a stage broke the pipeline contract (wrong type, untraced loss)
    ├── VectorStoreError                        ``ragtrim index`` could not read or write the vector store (a trim
    │                                           never raises it: it falls back to the model)
    ├── OutputError                             a command's output (a file, a report folder) cannot be written
    │   └── OutputNotWritable    (audit.cli)         ``ragtrim audit``: ``--out`` cannot hold the report
    ├── CatalogError         (_util.catalog)    the generated catalog of lazy names cannot be built
    ├── AttemptFailed        (gate.client)      ``ragtrim gate``: one try at an arm failed (counted, never raised)
    ├── HashSeedMismatch     (audit.state)      partial audits to merge were made by processes that hash text
    │                                           differently (a different PYTHONHASHSEED; the Ray engine sets one)
    └── ServeError                              the gateway (``ragtrim serve``); each is answered as an HTTP error
        ├── GatewayError         (serve.responses)   an error response: status, OpenAI error type and code
        ├── RequestError         (serve.render)      a request the gateway cannot forward as sent
        ├── QueueFull, QueueTimeout (serve.limits)   no concurrency slot: the queue is full, or the wait ran out
        ├── StateUnavailable     (serve.limits)      the shared rate store (Redis) did not answer
        ├── UpstreamError        (serve.upstream)    the model server could not be reached
        ├── ClientGone           (serve.relay)       the client disconnected before its answer was complete
        └── BodyBroken           (serve.relay)       a relayed body's source failed after the response began

Inside the HTML stage, ``ragtrim.html.tree.TooDeep`` (an ``InputError``) marks markup nested deeper than the parser
takes; the stage answers it with a linear-time fallback, so it never reaches a caller.
"""

from __future__ import annotations

from ragtrim._util.redact import redact


class RagtrimError(Exception):
    """Base class of every error raised by ragtrim. Its message passes through the one redaction function
    (``ragtrim._util.redact.redact``), so no error of ragtrim's carries a password or key, whoever formats it."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(redact(a) if isinstance(a, str) else a for a in args))


class ConfigError(RagtrimError, ValueError):
    """A parameter of a stage, a pipeline or a benchmark is invalid."""


class InputError(RagtrimError, ValueError):
    """Input data (chunks, query, messages, files) cannot be used as given."""


class BudgetError(RagtrimError):
    """The caller pinned more tokens than the budget allows."""


class MissingDependencyError(RagtrimError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        self.package = package
        self.extra = extra
        super().__init__(
            f"{purpose} needs the package {package!r}, which is not installed; "
            f"install it with: pip install 'ragtrim[{extra}]'"
        )


class StageError(RagtrimError):
    """A stage raised an exception; ``stage`` names it and ``__cause__`` keeps the original."""

    def __init__(self, stage: str, message: str) -> None:
        self.stage = stage
        super().__init__(f"stage {stage!r} failed: {message}")


class ContractError(RagtrimError):
    """A stage returned something the pipeline cannot accept (wrong type, a chunk lost without a trace)."""

    def __init__(self, stage: str, message: str) -> None:
        self.stage = stage
        super().__init__(f"stage {stage!r} broke the pipeline contract: {message}")


class VectorStoreError(RagtrimError):
    """Filling the passage-vector store ahead of time (``ragtrim index``) failed: no store, or it cannot be read or
    written. Trimming never raises it: a trim that cannot use its store asks the model instead."""


class OutputError(RagtrimError):
    """A command's output (``-o`` file, ``--out`` folder) cannot be written: a directory, a read-only file, a missing
    folder. The CLI exits with code 3 and nothing was lost (it checks before the work where it can)."""


class ServeError(RagtrimError):
    """Base class of the gateway's errors (``ragtrim.serve``); the gateway answers each as an HTTP error."""


def require(package: str, extra: str, purpose: str) -> None:
    """Raise MissingDependencyError unless ``package`` can be imported."""
    import importlib.util

    if importlib.util.find_spec(package) is None:
        raise MissingDependencyError(package, extra, purpose)
