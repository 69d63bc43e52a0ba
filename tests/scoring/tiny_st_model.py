"""A tiny multilingual sentence-transformers model built locally, with no model hub: a WordPiece tokenizer trained by
``tokenizers`` on a few sentences in ten scripts, a seeded random 2-layer BertModel, mean pooling and normalisation,
saved as a sentence-transformers folder (about 170 KB). Tests name it by path to check the plumbing (loading by path,
scoring Korean text, the script gate leaving it alone); its scores mean nothing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

SENTENCES = [
    "The budget is five thousand dollars.", "We decided to ship on Friday.",
    "요금제의 월 한도는 5만 원입니다.", "마감은 금요일까지입니다.", "저는 창가 자리를 선호해요.",
    "締め切りは金曜日です。", "予算は300万円です。", "北京是中国的首都。", "截止日期是下周五。",
    "Москва — столица России.", "Η Αθήνα είναι η πρωτεύουσα.", "القاهرة هي عاصمة مصر.", "ירושלים היא עיר עתיקה.",
    "भारत एक विशाल देश है।", "กรุงเทพมหานครเป็นเมืองหลวง",
]


def build(out: Path, *, seed: int = 0, hidden: int = 32, layers: int = 2, vocab_size: int = 600) -> Path:
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as models
    from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece
    from tokenizers.trainers import WordPieceTrainer
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    # A BERT-style WordPiece tokenizer: NFC (not NFD + accent stripping, which turns Hangul into jamo), lower case,
    # CJK characters split one by one (as BERT's BasicTokenizer does), punctuation split.
    tok = Tokenizer(WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=False,
                                                lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok.train_from_iterator(SENTENCES, WordPieceTrainer(vocab_size=vocab_size, special_tokens=special))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    tok.decoder = decoders.WordPiece()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", model_max_length=128)
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=2, intermediate_size=2 * hidden, max_position_embeddings=128)
    bert = BertModel(config)
    bert_dir = out / "_bert"
    bert.save_pretrained(bert_dir)
    fast.save_pretrained(bert_dir)
    word = models.Transformer(str(bert_dir), max_seq_length=128)
    pool = models.Pooling(word.get_embedding_dimension(), pooling_mode="mean")
    model = SentenceTransformer(modules=[word, pool, models.Normalize()], device="cpu")
    model.save(str(out))
    shutil.rmtree(bert_dir)
    (out / "BUILT_BY.json").write_text(json.dumps({"script": "tests/scoring/tiny_st_model.py", "seed": seed, "hidden": hidden,
                                                   "layers": layers, "vocab": tok.get_vocab_size()}))
    return out
