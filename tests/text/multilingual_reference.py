"""Hand-checked multilingual sentence reference, written and checked by hand.

Each case is (language, sentences, joiner): the text is ``joiner.join(sentences)`` and its reference sentence
starts are where each sentence begins. Conventions, the same as ragtrim's English rules: a quoted span (``"..."``,
``“...”``, ``「...」``) is not split; an ellipsis inside a sentence is not a boundary; abbreviations, decimals and
lower-case continuations are not boundaries. Thai writes no full stop: its units are the space-separated
sentences/clauses (a space next to a digit or Latin word is not a unit boundary).
"""

from __future__ import annotations

CASES: list[tuple[str, list[str], str]] = [
    # Korean
    ("ko", ["알렉산더 헤이그는 1924년 12월 2일에 태어났다.", "그는 미국의 국무장관을 지냈다.",
            "GDP 성장률은 3.5%였다.", "정말 그랬을까?", "그렇다!"], " "),
    ("ko", ['김 교수는 "내일 다시 오겠다. 꼭 기다려라."라고 말했다.', "회의는 오후 3시에 끝났다."], " "),
    ("ko", ["Dr. 김민수는 서울대학교에서 박사 학위를 받았다.", "이후 그는 U.S. Army에서 근무했다."], " "),
    ("ko", ["요금제의 월 한도는 5만 원입니다.", "초과하면 추가 요금이 붙습니다.", "자세한 내용은 고객센터에 문의하세요."], " "),
    ("ko", ["글쎄... 잘 모르겠다.", "내일 다시 생각해 보자."], " "),
    ("ko", ["1부 리그는 2013년에 출범했다.", "K리그1의 우승팀은 AFC 챔피언스리그에 나간다."], "\n"),
    # Japanese
    ("ja", ["東京は日本の首都である。", "人口は約1400万人だ。", "本当にそうだろうか？", "そうだ！"], ""),
    ("ja", ["彼は「明日また来ます。必ず待っていてください。」と言った。", "会議は午後3時に終わった。"], ""),
    ("ja", ["価格は1.5万円です。", "詳細はwww.example.comをご覧ください。"], ""),
    ("ja", ["えっ…本当？", "はい、本当です。"], ""),
    ("ja", ["締め切りは金曜日です。", "Python 3.12を使います。"], " "),
    # Chinese
    ("zh", ["北京是中国的首都。", "它有三千多年的历史。", "你去过北京吗？", "去过！"], ""),
    ("zh", ["他说：“我明天再来。请等我。”", "然后他走了。"], ""),
    ("zh", ["价格为3.5元。", "第二版于2020年发布；第三版于2023年发布。"], ""),
    ("zh", ["預算是五萬元。", "截止日期是下週五。"], ""),
    # Russian, Greek, Arabic, Hebrew, Hindi, Thai
    ("ru", ["Москва — столица России.", "Население составляет около 13 млн человек.",
            "В 1147 г. город впервые упоминается в летописи.", "Это, т. е. столица, крупнейший город страны."], " "),
    ("ru", ["Правда?", "Да!"], " "),
    ("el", ["Η Αθήνα είναι η πρωτεύουσα της Ελλάδας.", "Έχει πληθυσμό περίπου 3,7 εκατομμύρια.",
            "Την έχετε επισκεφθεί\u037e", "Ναι."], " "),
    ("ar", ["القاهرة هي عاصمة مصر.", "يبلغ عدد سكانها نحو 10 ملايين نسمة.", "هل زرتها من قبل؟", "نعم!"], " "),
    ("he", ["ירושלים היא עיר עתיקה.", "היא נוסדה לפני אלפי שנים.", "האם ביקרת בה?", "כן."], " "),
    ("hi", ["भारत एक विशाल देश है।", "इसकी राजधानी नई दिल्ली है।", "क्या आप वहाँ गए हैं?", "हाँ।"], " "),
    ("th", ["กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย", "มีประชากรประมาณ 10 ล้านคน"], " "),
    ("th", ["ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ", "แต่เว้นวรรคระหว่างประโยค"], " "),
    # Latin and other cased scripts after a full stop
    ("pl", ["Pojechałem do Krakowa.", "Łódź jest dużym miastem."], " "),
    ("tr", ["Ankara başkenttir.", "İstanbul en büyük şehirdir."], " "),
    ("cs", ["Byli jsme v Praze.", "Řím byl další."], " "),
    ("es", ["Hola.", "¿Cómo estás?", "¡Muy bien!"], " "),
]


def cases() -> list[tuple[str, str, list[int]]]:
    """(language, text, reference sentence starts) for every case."""
    out = []
    for lang, sentences, joiner in CASES:
        starts = []
        pos = 0
        for i, s in enumerate(sentences):
            starts.append(pos)
            pos += len(s) + (len(joiner) if i < len(sentences) - 1 else 0)
        out.append((lang, joiner.join(sentences), starts))
    return out


def n_sentences() -> int:
    return sum(len(s) for _, s, _ in CASES)
