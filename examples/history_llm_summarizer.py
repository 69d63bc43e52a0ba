"""Compress a chat history with an LLM extractor served behind an OpenAI-compatible endpoint (e.g. vLLM).

Start a server first, for example:  vllm serve Qwen/Qwen2.5-7B-Instruct --port 8000
then run:  python examples/history_llm_summarizer.py --base-url http://localhost:8000/v1 --model Qwen/Qwen2.5-7B-Instruct
Without --base-url the offline rule-based extractor is used, so the example always runs.
"""

from __future__ import annotations

import argparse

from ragtrim.history.fold import compress_history
from ragtrim.history.state import HistoryResult
from ragtrim.history.summarizers import OpenAICompatibleSummarizer, RuleBasedSummarizer, Summarizer

CONVERSATION = [
    {"role": "user", "content": "Hi! Hope you're doing well."},
    {"role": "assistant", "content": "Hello! Doing great, thanks. How can I help?"},
    {"role": "user", "content": "I'm planning a week in Lisbon in May with my sister Ana."},
    {"role": "assistant", "content": "Great choice. Do you have a budget or hotel style in mind?"},
    {"role": "user", "content": "I prefer small boutique hotels, and we can't spend more than 900 euros in total."},
    {"role": "assistant", "content": "Noted. I'll look for places in Alfama or Chiado."},
    {"role": "user", "content": "Haha perfect. We decided to arrive by train from Porto on May 3."},
    {"role": "assistant", "content": "Then a hotel near Santa Apolonia station would be handy."},
    {"role": "user", "content": "Also I love seafood but I hate crowded places."},
    {"role": "assistant", "content": "Got it: seafood, quiet spots."},
    {"role": "user", "content": "Which neighbourhood would you pick for the first night?"},
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1")
    parser.add_argument("--model", default="default", help="served model name")
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--max-tokens", type=int, default=120, help="token budget for state + recent turns")
    args = parser.parse_args()

    summarizer: Summarizer
    if args.base_url:
        summarizer = OpenAICompatibleSummarizer(base_url=args.base_url, model=args.model, api_key=args.api_key)
    else:
        summarizer = RuleBasedSummarizer()

    # Turn by turn, as a chat app would: the state from the last call plus the conversation so far.
    result: HistoryResult | None = None
    for end in range(1, len(CONVERSATION) + 1):
        result = compress_history(CONVERSATION[:end], state=result.state if result else None, keep_last_turns=2,
                                  max_tokens=args.max_tokens, summarizer=summarizer)
    assert result is not None
    print(f"history tokens: {result.tokens_before} -> {result.tokens_after} (ratio {result.ratio:.1f})")
    print("\n--- prompt block ---")
    print(result.text)
    print("\n--- structured state ---")
    for item in result.state.items:
        print(f"{item.kind:11} {item.turn_ids} {item.role}: {item.text}")


if __name__ == "__main__":
    main()
