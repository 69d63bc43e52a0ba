"""``ragtrim.html.extract``: main-content extraction on whole pages, its quality on the sample pages, and the same
behaviour in every script."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from ragtrim.html.extract import extract_main_content
from ragtrim.stages.html import HtmlCleaner


def _char_f1(gold: str, pred: str) -> float:
    def shingles(t: str) -> Counter[str]:
        n = " ".join(t.split())
        return Counter(n[i: i + 4] for i in range(max(0, len(n) - 3)))

    g, p = shingles(gold), shingles(pred)
    tp = sum((g & p).values())
    if not tp:
        return 0.0
    prec, rec = tp / sum(p.values()), tp / sum(g.values())
    return 2 * prec * rec / (prec + rec)


@pytest.mark.data
def test_main_content_quality_on_sample_pages(shared_data: Path) -> None:
    folder = shared_data / "html-extraction"
    if not folder.is_dir():
        pytest.skip(f"{folder} not found (set RAGTRIM_DATA)")
    gold = json.loads((folder / "ground-truth.json").read_text(encoding="utf-8"))
    pages = sorted((folder / "html").glob("*.html.gz"))[:12]
    scores = []
    for path in pages:
        html = gzip.decompress(path.read_bytes()).decode("utf-8", errors="replace")
        pid = path.name.removesuffix(".html.gz")
        scores.append(_char_f1(gold[pid]["articleBody"], HtmlCleaner().clean(html).text))
    assert sum(scores) / len(scores) >= 0.85


# The same page in several scripts (hand-written sentences, Arabic added).
LONG_PARAGRAPH = {
    "en": "The festival draws visitors from across the region, and the organisers expect record numbers this year, "
          "with new stages, food stalls, and a late-night lantern parade along the river.",
    "ko": "축제는 지역 곳곳에서 방문객을 끌어모으며, 주최 측은 올해 새로운 무대와 먹거리 장터, 강변을 따라 이어지는 심야 등불 "
          "행렬로 역대 최다 인원을 기대하고 있다.",
    "ja": "祭りには地域の各地から観光客が訪れ、主催者は今年、新しいステージや屋台、川沿いの夜の灯籠行列によって、過去最多の来場者を"
          "見込んでいる。",
    "zh": "这个节日吸引了来自全区各地的游客，主办方预计今年将迎来创纪录的人数，新增舞台、美食摊位，以及沿河的深夜灯笼游行。",
    "hi": "यह उत्सव पूरे क्षेत्र से आगंतुकों को आकर्षित करता है, और आयोजकों को इस वर्ष नए मंचों, खाने के स्टॉलों और नदी किनारे "
          "रात की लालटेन परेड के साथ रिकॉर्ड संख्या की उम्मीद है।",
    "ar": "يجذب المهرجان الزوار من جميع أنحاء المنطقة، ويتوقع المنظمون أعدادًا قياسية هذا العام مع مسارح جديدة وأكشاك "
          "طعام وموكب فوانيس ليلي على طول النهر.",
}
SHORT_PARAGRAPH = {
    "en": "Tickets go on sale on Friday.",
    "ko": "입장권은 금요일부터 판매된다.",
    "ja": "チケットは金曜日に発売される。",
    "zh": "门票将于周五开售。",
    "hi": "टिकट शुक्रवार से बिकेंगे।",
    "ar": "هل تبدأ مبيعات التذاكر يوم الجمعة؟",
}


def script_page(lang: str, extra: str) -> str:
    paras = "".join(f"<p>{LONG_PARAGRAPH[lang]}</p>" for _ in range(4))
    return (f"<html><body><nav><a href='/'>Home</a> <a href='/n'>News</a></nav><div id='main'>"
            f"<div class='story'>{paras}</div><p>{extra}</p></div>"
            "<footer><a href='/t'>Terms</a></footer></body></html>")


class TestEveryScript:
    @pytest.mark.parametrize("lang", list(SHORT_PARAGRAPH))
    def test_short_paragraph_beside_the_story_is_kept(self, lang: str) -> None:
        text = extract_main_content(script_page(lang, SHORT_PARAGRAPH[lang])).text
        assert LONG_PARAGRAPH[lang] in text and SHORT_PARAGRAPH[lang] in text
        assert "Terms" not in text and "Home" not in text

    @pytest.mark.parametrize(("lang", "label"), [("en", "Related links"), ("ja", "関連リンク"), ("zh", "相关链接")])
    def test_short_label_without_a_stop_is_still_dropped(self, lang: str, label: str) -> None:
        assert label not in extract_main_content(script_page(lang, label)).text

    def test_a_long_paragraph_without_a_stop_is_kept_in_japanese_as_in_english(self) -> None:
        # 107 English characters; the Japanese is 42 characters, which count as 126 (a Han/Kana character counts 3).
        en = ("The head of the committee said they hoped to enlarge the venue next year and welcome visitors from "
              "abroad too")
        ja = "実行委員長は「来年は会場を広げ、海外からの観光客にも楽しんでもらいたい」と話した"
        assert en in extract_main_content(script_page("en", en)).text
        assert ja in extract_main_content(script_page("ja", ja)).text

    def test_lengths_and_commas_of_every_script(self) -> None:
        from lxml import etree

        from ragtrim.html.tree import measure

        root = etree.fromstring("<div><p>東京タワー、高い</p><p>서울 타워</p><p>Tokyo, tall</p></div>")
        stats = measure(root)
        ja, ko, en = (stats[p] for p in root)
        assert (ja.text_chars, ja.commas) == (7 * 3 + 1, 1)  # the ideographic comma counts as a comma, 1 character
        assert (ko.text_chars, ko.commas) == (4 * 2 + 1, 0)
        assert (en.text_chars, en.commas) == (11, 1)
        assert stats[root].text_chars == 22 + 9 + 11
