"""ragtrim_bench.gate.gpu_finetune: the chat format the reader learns (and vLLM applies), and how examples are
batched."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ragtrim.gate.golden import GoldenItem
from ragtrim_bench.gate.gpu_finetune import batches, encode_examples, render_chat


def test_the_chat_format() -> None:
    pytest.importorskip("jinja2")
    text = render_chat([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q?"},
                        {"role": "assistant", "content": "A"}, {"role": "user", "content": "Again?"}])
    assert text == ("<bos><start_of_turn>user\nBe brief.\n\nQ?<end_of_turn>\n<start_of_turn>model\nA<end_of_turn>\n"
                    "<start_of_turn>user\nAgain?<end_of_turn>\n<start_of_turn>model\n")
    assert render_chat([{"role": "user", "content": "Q?"}], add_generation_prompt=False) == (
        "<bos><start_of_turn>user\nQ?<end_of_turn>\n")


@dataclass
class _Ids:
    ids: list[int]


class _WordTokenizer:
    def encode(self, text: str, add_special_tokens: bool = False) -> _Ids:
        return _Ids([len(w) for w in text.split()])


def test_examples_and_batches() -> None:
    pytest.importorskip("jinja2")
    items = [GoldenItem(id=str(i), question="word " * i, documents=("doc",), answers=("x",)) for i in range(1, 6)]
    examples, too_long = encode_examples(items, _WordTokenizer(), ['{"answer": "x"}'] * 5, max_len=41)  # 38..42 words
    assert too_long == 1 and len(examples) == 4 and all(len(t) == 2 for _, t in examples)
    groups = batches(examples, batch_tokens=80, seed=0)
    assert sorted(i for g in groups for i in g) == [0, 1, 2, 3]
    for g in groups:
        assert max(len(examples[i][0]) + len(examples[i][1]) for i in g) * len(g) <= 80
    assert batches(examples, batch_tokens=80, seed=0) == groups
