"""Korean, Japanese and Chinese rules for ``RuleBasedSummarizer``: sentences, clause kinds, named facts, small talk.

The English rules find words and capitals; these find the endings, particles and characters that say the same
things: preferences (좋아해, 선호, 好き, 喜欢), constraints with budgets and deadlines (예산, 이하, 까지, 予算, 以内,
締め切り, 预算, 不超过, 截止), decisions (하기로 했다, 결정, 決定, ことにした, 决定, 选了), goals (계획, 예정, 予定,
つもり, 打算), and named facts (numbers with their units in digits or Han numerals, weekdays, relative dates, Latin
names, quoted titles). A clause is kept when it has a kind or a named fact: text without spaces has no words to count.
Written from the dev samples (``benchmarks/ragtrim_bench/history/script_texts.py``).
"""

from __future__ import annotations

import re

from ragtrim.text.scripts import HANGUL_CLASS, SPACELESS_CLASS

_KO_PREFERENCE = (r"좋아(?:해|합니|한다|하는|하고|했)|(?:이|가) 좋(?:아|습니|다|겠)|선호|싫어|싫습니다|별로(?:예요|야|에요)|"
                  r"싶어|싶습니다|싶다|싶은|원해|원합니|원하|원했|마음에 들|즐겨|바라|희망")
_JA_PREFERENCE = r"好き|好み|好む|嫌い|苦手|たいです|たい[。！]|がいい|が良い|のがいい|希望|欲しい|ほしい"
_ZH_PREFERENCE = r"喜欢|喜歡|偏好|倾向|傾向|更愿意|更願意|爱吃|愛吃|讨厌|討厭|想要|希望"

_KO_CONSTRAINT = (r"예산|이하|이내|넘지 않|넘으면 안|넘기면 안|초과|최대|최소|적어도|마감|기한|까지|알레르기|못 먹|안 돼|안 됩니|"
                  r"불가|반드시|꼭|필수|필요|해야 (?:해|합니|한다|돼|됩니)|야 해|야 합니|하면 안")
_JA_CONSTRAINT = (r"予算|以内|以下|上限|超えない|超えては|締め切り|締切|期限|までに|まで|アレルギー|食べられない|しなければ|"
                  r"なければならない|なければいけない|必須|必ず|ダメ|できません|厳守")
_ZH_CONSTRAINT = (r"预算|預算|不超过|不超過|不能超过|不能超過|以内|以下|最多|至少|截止|期限|之前|以前|过敏|過敏|不能|必须|必須|"
                  r"一定要|务必|務必")

_KO_DECISION = r"기로 (?:했|하였|결정)|(?:으로|로) (?:결정|정했|정하였)|결정했|결정하였|정했어|예약했|계약했|확정|선택했|골랐"
_JA_DECISION = r"決定|決めました|決めた|ことにしました|ことにした|ことに決め|にします|予約しました|確定|選びました|選んだ"
_ZH_DECISION = r"决定|決定|定了|选择了|選擇了|选了|選了|就选|就選|确定|確定|订好了|訂好了|订了|訂了"

_KO_GOAL = r"계획|예정|하려고|려고 해|려고 합니|할 거예요|할 겁니다|갈 거|목표|준비 중|생각 중|알아보고 있"
_JA_GOAL = r"予定|つもり|計画|目標|準備中|考えています|たいと思"
_ZH_GOAL = r"计划|計劃|打算|准备|準備|目标|目標|想去|要去|(?<=[我们們也还還都就很别別])想(?![法起到象像])"

KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("preference", re.compile(f"{_KO_PREFERENCE}|{_JA_PREFERENCE}|{_ZH_PREFERENCE}")),
    ("constraint", re.compile(f"{_KO_CONSTRAINT}|{_JA_CONSTRAINT}|{_ZH_CONSTRAINT}")),
    ("decision", re.compile(f"{_KO_DECISION}|{_JA_DECISION}|{_ZH_DECISION}")),
    ("goal", re.compile(f"{_KO_GOAL}|{_JA_GOAL}|{_ZH_GOAL}")),
)
"""Clause kinds, tried in this order (the English rules' order): the first that matches names the clause."""

_UNIT = (r"(?:\s?(?:만|억|천|백|원|달러|유로|엔|명|개|대|장|권|일|월|년|시|분|초|주|살|인분|박|층|퍼센트|"
         r"万|億|千|百|円|元|块|塊|美元|人|名|个|個|台|枚|本|冊|件|家|天|日|月|年|時|时|点|點|分|秒|週|周|号|號|歳|岁|泊|晚|"
         r"位|回|次|倍|キロ|公里|米|%|GB|MB|TB|km|kg|cm))")
_HAN_NUMBER = r"[〇零一二三四五六七八九十百千万億亿两兩]+"
_KO_TIME = r"[월화수목금토일]요일|이번 ?주|다음 ?주|지난 ?주|다음 ?달|이번 ?달|지난 ?달|내일|모레|오늘|어제|올해|내년|작년|주말|오전|오후"
_JA_TIME = r"[月火水木金土日]曜日?|来週|今週|先週|来月|今月|先月|明日|明後日|今日|昨日|今年|来年|去年|週末|正午|午前|午後"
_ZH_TIME = (r"(?:[下本上这這])?(?:星期|礼拜|禮拜|周|週)[一二三四五六日天]|下周|下週|本周|本週|上周|上週|下个月|下個月|这个月|這個月|明天|后天|後天|"
            r"今天|昨天|明年|去年|周末|週末|国庆节|國慶節|春节|春節|上午|下午|中午")
NAMED_FACT = re.compile(
    rf"(?:(?:\d[\d,.]*|{_HAN_NUMBER}){_UNIT}+)+|\d[\d,.]*|{_KO_TIME}|{_JA_TIME}|{_ZH_TIME}"
    r"|[A-Z][A-Za-z0-9]+(?:[ -][A-Z][A-Za-z0-9]+)*|「[^」]{1,40}」|『[^』]{1,40}』|《[^》]{1,40}》|“[^”]{1,40}”"
)
"""Numbers with their units (digits or Han numerals: 50만 원, 3万円, 五千元, 十二月一日), weekdays and relative dates,
Latin names (React, ThinkPad), and titles in 「」『』《》“”."""

# Greetings and thanks as whole phrases, so that what follows them is judged on its own ("お疲れさまです" holds
# "まで", a deadline marker, inside the greeting).
_GREETING = re.compile(
    r"^(?:안녕(?:하세요|하십니까|히 계세요)?|감사(?:합니다|해요|드립니다)?|고맙(?:습니다|다)?|고마워요?|반가워요?|"
    r"반갑습니다|수고(?:하세요|하셨습니다|했어요)?|좋은 (?:하루|여행|주말)(?: 되세요| 보내세요)?|잘 부탁(?:드립니다|해요)?|"
    r"こんにちは|こんばんは|おはよう(?:ございます)?|ありがとう(?:ございます|ございました)?|よろしく(?:お願い(?:します|いたします))?|"
    r"お疲れ(?:さま|様)?(?:です|でした)?|お世話になって(?:います|おります)|おかげさまで|"
    r"你好|您好|谢谢|謝謝|再见|再見|早上好|晚上好|多谢|多謝)[\s,，、。.!！~]*"
)
_REACTION = re.compile(r"^(?:좋네요|좋아요|알겠습니다|알겠어요|네[.,!]|그렇군요|멋져요|대박|맞아|ㅋ{2,}|ㅎ{2,}|なるほど|いいですね|"
                       r"了解|分かりました|わかりました|すごい|好的|太好了|明白了|哈{2,}|呵{2,})")
_INTERJECTION = re.compile(r"^(?:응|네|예|아|와|음|그래|はい|うん|ええ|ああ|嗯|啊|哦|噢|喔)[,，、!！.。\s]+")
_QUESTION_END = re.compile(r"[?？]\s*$|(?:까요|나요|가요|니까|ㄹ까|세요|는지)[.\s]*$|か[。.]?\s*$|[吗嗎呢][。.]?\s*$")
# Clauses: at ;/；, and at a comma before a contrast (but, however): one sentence may hold a preference and a limit.
_CLAUSE = re.compile(r"\s*[;；]\s*|(?<=[고며지만])\s*,\s*|[，,]\s*(?=但|可是|不过|不過)|、(?=でも|しかし|ただ)")
# A run of anything but a stop (a full stop counts only before a space or the end, so 1.5 stays whole), then its stops
# and closing quotes.
_SENTENCE = re.compile(r"(?:[^。！？!?.\n]|\.(?!\s|$))+(?:[。！？!?.]+[」』”)）]*)?|[。！？!?.]+")
_FIRST_PERSON = re.compile(r"저는|제가|저희|나는|내가|우리|私|僕|俺|我")
_CJK_LETTER = re.compile(f"[{SPACELESS_CLASS}{HANGUL_CLASS}]")
_LETTER = re.compile(r"[^\W\d_]")


def is_cjk_sentence(sentence: str) -> bool:
    """True when at least half the letters of ``sentence`` are Han, Kana or Hangul: the rules of this module apply."""
    if sentence.isascii():
        return False
    cjk = len(_CJK_LETTER.findall(sentence))
    return cjk > 0 and 2 * cjk >= len(_LETTER.findall(sentence))


def sentences(text: str) -> list[str]:
    """Sentences of CJK text: after 。！？!? (and closing quotes), and after a full stop followed by a space, as
    Korean writes it. (A local splitter until the text layer's script-aware one replaces it.)"""
    return [s.strip() for s in _SENTENCE.findall(text) if s.strip()]


def classify(clause: str) -> str:
    """The clause's kind: the first of preference, constraint, decision, goal whose pattern matches, else fact."""
    for kind, pattern in KINDS:
        if pattern.search(clause):
            return kind
    return "fact"


def named_facts(clause: str) -> list[str]:
    """Numbers with units, dates and times, Latin names and quoted titles in ``clause``."""
    return [m.group(0).strip() for m in NAMED_FACT.finditer(clause)]


def is_small_talk(sentence: str) -> bool:
    """Greetings and thanks followed by nothing with a fact or a kind; short reactions ("좋네요", "なるほど", "哈哈")
    without a fact."""
    s = sentence.strip()
    greeting = _GREETING.match(s)
    if greeting:
        rest = s[greeting.end() :]
        if not named_facts(rest) and classify(rest) == "fact":
            return True
    return bool(_REACTION.match(s)) and not named_facts(s) and (classify(s) == "fact" or len(s) <= 12)


def strip_interjection(sentence: str) -> str:
    """Without a leading "응,", "はい、", "嗯，"."""
    return _INTERJECTION.sub("", sentence).strip()


def is_question(sentence: str) -> bool:
    return bool(_QUESTION_END.search(sentence))


def clauses(sentence: str) -> list[str]:
    return [c.strip(" ,，、") for c in _CLAUSE.split(sentence) if c.strip(" ,，、")]


def has_first_person(clause: str) -> bool:
    return bool(_FIRST_PERSON.search(clause))
