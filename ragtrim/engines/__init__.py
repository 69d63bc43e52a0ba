"""Where ``ragtrim audit`` and ``ragtrim index`` run: ``local`` (this process, the default) or ``ray`` (the workers
of a Ray cluster, through Ray Data: ``ragtrim.engines.ray_audit``, ``ragtrim.engines.ray_index``).

Importing this package imports no Ray: only the Ray engine's modules do, and they raise MissingDependencyError
naming the ``ray`` extra (``pip install 'ragtrim[ray]'``) when it is not installed. ``ragtrim.engines.options`` holds the
options both commands share.
"""
