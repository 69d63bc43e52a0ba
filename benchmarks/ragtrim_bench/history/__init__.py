"""Conversation-history compression on LoCoMo: tokens, answer and evidence recall, time (``locomo``)."""
