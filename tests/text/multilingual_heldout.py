"""A second hand-checked multilingual sentence reference, written after the rules in seg_proto.py were tuned on
multilingual_reference.py and never used to tune them (held out). Same conventions and format."""

from __future__ import annotations

CASES: list[tuple[str, list[str], str]] = [
    ("ko", ["서울은 대한민국의 수도이다.", "인구는 약 940만 명이다.", "한강이 도시를 가로지른다."], " "),
    ("ko", ["그는 \"괜찮아요.\"라고 대답했다.", "하지만 표정은 어두웠다."], " "),
    ("ko", ["버전 2.1.3이 배포되었다!", "누가 먼저 설치했나요?", "제가 했어요."], " "),
    ("ko", ["계약은 3월 31일까지 유효하다.", "Mr. Park이 서명했다."], " "),
    ("ja", ["京都には寺が多い。", "特に清水寺が有名だ。", "行ったことがありますか？"], ""),
    ("ja", ["『源氏物語』は平安時代に書かれた。", "作者は紫式部である。"], ""),
    ("ja", ["予算は300万円です！", "来週までに決めましょう。"], ""),
    ("zh", ["上海是中国最大的城市。", "人口超过两千万。", "你喜欢上海吗？"], ""),
    ("zh", ["会议定于下午两点开始！", "请准时参加。"], ""),
    ("ru", ["Санкт-Петербург основан в 1703 г. Петром Первым.", "Это второй город России."], " "),
    ("uk", ["Київ — столиця України.", "Їхати туди далеко?"], " "),
    ("el", ["Το φαγητό ήταν υπέροχο.", "Θα ξαναπάμε σύντομα."], " "),
    ("ar", ["الرياض عاصمة السعودية.", "تقع في وسط البلاد."], " "),
    ("fa", ["تهران پایتخت ایران است.", "آیا آنجا را دیده‌اید؟", "بله."], " "),
    ("he", ["תל אביב שוכנת על חוף הים.", "היא נוסדה ב-1909."], " "),
    ("hi", ["गंगा भारत की सबसे लंबी नदी है।", "यह हिमालय से निकलती है।"], " "),
    ("bn", ["ঢাকা বাংলাদেশের রাজধানী।", "এটি একটি বড় শহর।"], " "),
    ("th", ["เชียงใหม่อยู่ทางภาคเหนือ", "อากาศเย็นสบายในฤดูหนาว"], " "),
    ("de", ["Wir fahren nach München.", "Österreich liegt daneben.", "Übermorgen geht es los."], " "),
    ("fr", ["Il est arrivé à 8 h.", "Élodie l'attendait.", "Ça va?"], " "),
    ("vi", ["Hà Nội là thủ đô của Việt Nam.", "Đà Nẵng nằm ở miền Trung."], " "),
]


def cases() -> list[tuple[str, str, list[int]]]:
    out = []
    for lang, sentences, joiner in CASES:
        starts, pos = [], 0
        for i, s in enumerate(sentences):
            starts.append(pos)
            pos += len(s) + (len(joiner) if i < len(sentences) - 1 else 0)
        out.append((lang, joiner.join(sentences), starts))
    return out


def n_sentences() -> int:
    return sum(len(s) for _, s, _ in CASES)
