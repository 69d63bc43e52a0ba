"""The gateway (``ragtrim serve``): what it adds per request (``overhead``), behaviour under 10x overload
(``overload``), the upstream HTTP client choice (``upstream_client``), hostile requests against a real gateway
(``hostile_requests``), and the load-generation helpers they share (``load``)."""
