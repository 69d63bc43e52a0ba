"""Adapters that plug ragtrim into other frameworks; each submodule imports its framework only when imported itself.

``ragtrim.integrations.langchain``: ``RagtrimRetriever`` and ``RagtrimCompressor`` (extra ``ragtrim[langchain]``).
``ragtrim.integrations.llamaindex``: ``RagtrimPostprocessor``, a node postprocessor (extra ``ragtrim[llamaindex]``).
``ragtrim.integrations.haystack``: ``RagtrimTrimmer``, a pipeline component (extra ``ragtrim[haystack]``).
"""
