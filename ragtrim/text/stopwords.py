"""English stopwords, one list: what BM25 and the history extractor leave out as carrying no content.

``STOPWORDS``: function and question words ("the", "what", "when"); in a 20-passage BM25 pool their IDF is noise.
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
