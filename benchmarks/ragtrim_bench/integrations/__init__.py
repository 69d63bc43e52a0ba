"""Framework integrations against their peers: the LangChain compressor beside LangChain's own filters
(``langchain_peer``)."""
