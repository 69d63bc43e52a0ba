"""Stopwords: what BM25 and the history extractor leave out as carrying no content.

``STOPWORDS``: English function and question words ("the", "what", "when"); in a 20-passage BM25 pool their IDF is
noise. ``QUESTION_WORDS``: the question words of Korean, Japanese and Chinese, whose character bigrams BM25 drops
(``ragtrim.scoring.bm25``); particles and endings need no list: bigrams and IDF absorb them.
``CONVERSATION_STOPWORDS`` adds what chat turns are full of (fillers, intensifiers, contractions written without the
apostrophe), for telling a turn's content words from small talk.
"""

from __future__ import annotations

STOPWORDS = frozenset({
    "a", "an", "the", "of", "in", "on", "at", "to", "for", "from", "by", "with", "and", "or", "but", "nor",
    "is", "are", "was", "were", "be", "been", "being", "am", "who", "whom", "whose", "what", "when", "where",
    "which", "why", "how", "that", "this", "these", "those", "it", "its", "as", "did", "do", "does", "done",
    "has", "have", "had", "having", "i", "you", "he", "she", "we", "they", "me", "him", "her", "us", "them",
    "my", "your", "his", "our", "their", "there", "here", "than", "then", "so", "if", "into", "onto", "about",
    "over", "under", "not", "no", "can", "could", "will", "would", "shall", "should", "may", "might", "must",
    "also", "just", "only", "very", "s", "t",
})

CONVERSATION_STOPWORDS = STOPWORDS | frozenset({
    "above", "after", "again", "against", "all", "any", "because", "before", "below", "between", "both",
    "doing", "down", "during", "each", "few", "further", "hers", "herself", "himself", "itself", "more", "most",
    "myself", "now", "off", "once", "other", "ours", "ourselves", "out", "own", "same", "some", "such",
    "theirs", "themselves", "through", "too", "until", "up", "while", "yours", "yourself", "yourselves", "im",
    "ive", "id", "ill", "thats", "dont", "doesnt", "didnt", "cant", "wont", "isnt", "arent", "wasnt", "youre",
    "youve", "really", "got", "get", "getting", "like", "lot", "lots", "much", "many", "thing", "things",
    "stuff", "yeah", "yes", "oh", "wow", "well", "gonna", "wanna", "kinda", "sorta", "pretty", "super",
    "totally", "definitely",
})

QUESTION_WORDS: dict[str, frozenset[str]] = {
    "ko": frozenset({"무엇", "누구", "누가", "언제", "어디", "어느", "얼마", "얼마나", "무슨", "어떤", "어떻게", "왜", "몇"}),
    "ja": frozenset({"いつ", "どこ", "だれ", "なぜ", "どう", "どの", "どれ", "何", "誰", "いくつ", "いくら", "どんな",
                     "どちら"}),
    "zh": frozenset({"什么", "什麼", "为什么", "為什麼", "哪里", "哪裡", "哪个", "哪個", "怎么", "怎麼", "怎样", "怎樣", "多少",
                     "谁", "誰", "哪", "几", "幾", "何时", "何時", "如何", "为何", "為何", "多久"}),
}
"""Question words per language: short lists on purpose (a long list such as stopwords-iso's 679 Korean words
changed nothing measurable on KorQuAD dev questions and dropped content words). BM25 cuts them out of a query's
runs before it forms bigrams (``ragtrim.scoring.bm25``), so "他司职什么位置" asks for 他司, 司职 and 位置, not for the
junk pairs 职什 and 么位 that straddle 什么."""
