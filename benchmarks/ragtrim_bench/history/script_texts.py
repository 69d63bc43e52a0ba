"""Conversations in Korean, Japanese and Chinese for the history-rule benchmark (``ragtrim-bench history scripts``),
with what the folded state should hold.

* ``dev``: the samples the rules were written from: a 12-turn Korean trip
  conversation and six one-line Japanese and Chinese samples, written with the rules in view. The rules
  were tuned on these.
* ``heldout``: two conversations per language written for this benchmark before the rules were coded, in phrasings
  chosen to differ from the dev ones (numbers in Han numerals, other verbs for liking, deciding and needing), and
  never used to change a rule.

Every conversation lists the facts a state must keep as ``Expect(turn, kinds, phrase)``: an item extracted from turn
``turn`` (1-based) whose text contains ``phrase``, of one of ``kinds``; and the turns that carry nothing (greetings,
thanks, reactions) as ``silent``, from which no item may come. Turns in neither list (mostly the assistant's
questions) are not scored.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Expect:
    turn: int
    kinds: tuple[str, ...]
    phrase: str


@dataclass(frozen=True)
class Conversation:
    name: str
    language: str
    turns: tuple[tuple[str, str], ...]
    expect: tuple[Expect, ...]
    silent: tuple[int, ...]


PREF, CONS, DEC, GOAL, FACT = ("preference",), ("constraint",), ("decision",), ("goal",), ("fact",)

DEV: tuple[Conversation, ...] = (
    Conversation(
        "ko_trip", "ko",
        (("user", "안녕하세요!"),
         ("assistant", "안녕하세요, 무엇을 도와드릴까요?"),
         ("user", "다음 달에 제주도로 가족 여행을 계획하고 있어요."),
         ("assistant", "좋네요. 숙소는 어떤 곳을 원하세요?"),
         ("user", "저는 바다가 보이는 조용한 호텔을 선호해요."),
         ("assistant", "알겠습니다. 예산은 어느 정도인가요?"),
         ("user", "예산은 1인당 50만 원 이하로 잡고 있어요."),
         ("assistant", "항공권은 언제까지 예약하셔야 하나요?"),
         ("user", "항공권은 이번 주 금요일까지 예약해야 해요."),
         ("assistant", "그럼 제주항공과 대한항공 요금을 비교해 드릴게요."),
         ("user", "대한항공으로 하기로 했어요."),
         ("assistant", "감사합니다! 좋은 여행 되세요.")),
        (Expect(3, GOAL, "제주도"), Expect(5, PREF, "조용한 호텔"), Expect(7, CONS, "50만 원"),
         Expect(9, CONS, "금요일까지"), Expect(11, DEC, "대한항공")),
        (1, 12),
    ),
    Conversation(
        "ja_samples", "ja",
        tuple(("user", s) for s in ("窓側の席が好きです。", "予算は3万円以内です。", "締め切りは金曜日です。",
                                    "東京駅で集合することにしました。", "来月京都に行く予定です。", "ありがとうございます！")),
        (Expect(1, PREF, "窓側"), Expect(2, CONS, "3万円"), Expect(3, CONS, "金曜日"), Expect(4, DEC, "東京駅"),
         Expect(5, GOAL, "京都")),
        (6,),
    ),
    Conversation(
        "zh_samples", "zh",
        tuple(("user", s) for s in ("我更喜欢靠窗的座位。", "预算不超过五千元。", "截止日期是下周五。", "我们决定住在西湖附近。",
                                    "我打算下个月去杭州。", "谢谢！")),
        (Expect(1, PREF, "靠窗"), Expect(2, CONS, "五千元"), Expect(3, CONS, "下周五"), Expect(4, DEC, "西湖"),
         Expect(5, GOAL, "杭州")),
        (6,),
    ),
)

HELDOUT: tuple[Conversation, ...] = (
    Conversation(
        "ko_presentation", "ko",
        (("user", "안녕하세요, 팀장님."),
         ("assistant", "네, 안녕하세요. 무슨 일이세요?"),
         ("user", "다음 주 화요일에 부산 지사에서 분기 실적 발표가 있어요."),
         ("assistant", "발표 자료는 누가 준비하나요?"),
         ("user", "자료는 제가 만들기로 했어요."),
         ("user", "슬라이드는 20장 이내로 맞춰야 해요."),
         ("assistant", "디자인은 어떻게 할까요?"),
         ("user", "저는 흰 배경에 파란색 포인트가 들어간 깔끔한 디자인이 좋아요."),
         ("user", "초안은 이번 주 목요일 오후 3시까지 팀장님께 보내 드려야 해요."),
         ("assistant", "인쇄물도 필요한가요?"),
         ("user", "인쇄 비용은 최대 10만 원까지만 쓸 수 있어요."),
         ("user", "고마워요, 수고하세요!")),
        (Expect(3, FACT + GOAL, "부산 지사"), Expect(5, DEC, "만들기로"), Expect(6, CONS, "20장"),
         Expect(8, PREF, "파란색"), Expect(9, CONS, "목요일 오후 3시까지"), Expect(11, CONS, "10만 원")),
        (1, 12),
    ),
    Conversation(
        "ko_moving", "ko",
        (("user", "안녕! 요즘 잘 지냈어?"),
         ("assistant", "응, 잘 지냈어. 너는?"),
         ("user", "나 다음 달 15일에 이사 가."),
         ("user", "새 집은 회사에서 지하철로 20분 거리야."),
         ("assistant", "와, 좋겠다! 이사 업체는 정했어?"),
         ("user", "응, 가격 비교해 보고 한빛이사로 결정했어."),
         ("user", "보증금은 5천만 원을 넘으면 안 돼."),
         ("user", "나는 햇빛이 잘 드는 남향 집을 원했거든."),
         ("assistant", "짐은 많아?"),
         ("user", "피아노가 있어서 사다리차가 꼭 필요해."),
         ("user", "ㅋㅋ 맞아."),
         ("user", "이사 전날까지 냉장고를 비워야 해.")),
        (Expect(3, FACT + GOAL, "15일"), Expect(4, FACT, "20분"), Expect(6, DEC, "한빛이사"),
         Expect(7, CONS, "5천만 원"), Expect(8, PREF, "남향"), Expect(10, CONS, "사다리차"),
         Expect(12, CONS, "냉장고")),
        (1, 11),
    ),
    Conversation(
        "ja_dinner", "ja",
        (("user", "こんばんは。"),
         ("assistant", "こんばんは、ご用件をどうぞ。"),
         ("user", "来週の金曜日に、取引先と会食の予定があります。"),
         ("assistant", "人数は何名ですか？"),
         ("user", "私を含めて六人です。"),
         ("user", "個室のある和食の店が希望です。"),
         ("user", "一人あたりの予算は一万円以内でお願いします。"),
         ("assistant", "お店の場所はどのあたりがよろしいですか？"),
         ("user", "銀座か新橋がいいです。"),
         ("user", "先方にエビのアレルギーがある方がいます。"),
         ("user", "予約は明日の正午までに確定させたいです。"),
         ("user", "よろしくお願いします。")),
        (Expect(3, GOAL + FACT, "来週の金曜日"), Expect(5, FACT, "六人"), Expect(6, PREF, "個室"),
         Expect(7, CONS, "一万円以内"), Expect(9, PREF, "銀座"), Expect(10, CONS, "アレルギー"),
         Expect(11, CONS + GOAL, "明日の正午までに")),
        (1, 12),
    ),
    Conversation(
        "ja_app", "ja",
        (("user", "お疲れさまです。"),
         ("user", "新しい社内アプリの開発について相談させてください。"),
         ("assistant", "はい、どうぞ。"),
         ("user", "フロントエンドはReactで作ることに決めました。"),
         ("user", "リリースは十二月一日を予定しています。"),
         ("assistant", "テストはどうしますか？"),
         ("user", "テストの自動化は必須です。"),
         ("user", "個人的には、コードレビューを丁寧にやる文化が好きです。"),
         ("user", "外注費は三百万円を超えないようにしたいです。"),
         ("assistant", "了解しました。"),
         ("user", "なるほど、ありがとうございます。")),
        (Expect(2, GOAL + FACT, "社内アプリ"), Expect(4, DEC, "React"), Expect(5, GOAL, "十二月一日"),
         Expect(7, CONS, "自動化"), Expect(8, PREF, "コードレビュー"), Expect(9, CONS, "三百万円")),
        (1, 11),
    ),
    Conversation(
        "zh_chengdu", "zh",
        (("user", "你好！"),
         ("assistant", "你好，请问有什么可以帮您？"),
         ("user", "我们一家四口打算国庆节去成都玩。"),
         ("user", "我比较喜欢安静一点的民宿。"),
         ("assistant", "预算大概是多少？"),
         ("user", "住宿每晚不能超过八百元。"),
         ("user", "机票已经订好了，是十月一日早上的航班。"),
         ("assistant", "需要安排景点吗？"),
         ("user", "孩子特别想看大熊猫。"),
         ("user", "行程单请在本周三之前发给我。"),
         ("user", "好的，谢谢！")),
        (Expect(3, GOAL, "成都"), Expect(4, PREF, "民宿"), Expect(6, CONS, "八百元"),
         Expect(7, DEC + FACT, "十月一日"), Expect(9, PREF + GOAL, "大熊猫"), Expect(10, CONS, "本周三之前")),
        (1, 11),
    ),
    Conversation(
        "zh_laptops", "zh",
        (("user", "您好。"),
         ("user", "我想给公司买二十台笔记本电脑。"),
         ("assistant", "有什么配置要求吗？"),
         ("user", "内存至少要十六GB。"),
         ("user", "我们更倾向于选择国产品牌。"),
         ("user", "总预算控制在十五万元以内。"),
         ("assistant", "什么时候需要到货？"),
         ("user", "最晚下个月十号之前必须到货。"),
         ("user", "经过比较，我们最后选了联想的ThinkPad。"),
         ("user", "哈哈，这下老板应该满意了。"),
         ("user", "谢谢你的帮助！")),
        (Expect(2, GOAL + PREF, "二十台"), Expect(4, CONS, "十六GB"), Expect(5, PREF, "国产品牌"),
         Expect(6, CONS, "十五万元"), Expect(8, CONS, "十号之前"), Expect(9, DEC, "ThinkPad")),
        (1, 10, 11),
    ),
)

SPLITS: dict[str, tuple[Conversation, ...]] = {"dev": DEV, "heldout": HELDOUT}
