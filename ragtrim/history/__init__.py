"""Conversation history into a compact state: ``fold`` (which turns to fold, merging, the budget), ``state`` (state
items, the folded state, the result, how they render) and ``summarizers`` (the rule-based and LLM extractors)."""
