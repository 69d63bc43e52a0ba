"""Korean, Japanese and Chinese rules of the rule-based summarizer: ``ragtrim.history.cjk``."""

from __future__ import annotations

import pytest

from ragtrim.history import cjk


class TestSentencesAndScript:
    def test_is_cjk_sentence(self) -> None:
        assert cjk.is_cjk_sentence("예산은 50만 원 이하예요.") and cjk.is_cjk_sentence("予算は3万円以内です。")
        assert cjk.is_cjk_sentence("我更喜欢靠窗的座位。")
        assert not cjk.is_cjk_sentence("I love sushi from 銀座.")  # mostly English: the English rules read it
        assert not cjk.is_cjk_sentence("Plain ASCII.") and not cjk.is_cjk_sentence("2024!")

    def test_sentences(self) -> None:
        assert cjk.sentences("좋네요. 숙소는 어떤 곳을 원하세요?") == ["좋네요.", "숙소는 어떤 곳을 원하세요?"]
        assert cjk.sentences("예산은 1.5만 원. 다음!") == ["예산은 1.5만 원.", "다음!"]
        assert cjk.sentences("東京です。大阪は？") == ["東京です。", "大阪は？"]
        assert cjk.sentences("我更喜欢靠窗的座位。预算不超过五千元") == ["我更喜欢靠窗的座位。", "预算不超过五千元"]


class TestKinds:
    @pytest.mark.parametrize(("clause", "kind"), [
        ("저는 바다가 보이는 조용한 호텔을 선호해요", "preference"),
        ("窓側の席が好きです", "preference"),
        ("我更喜欢靠窗的座位", "preference"),
        ("예산은 1인당 50만 원 이하로 잡고 있어요", "constraint"),
        ("항공권은 이번 주 금요일까지 예약해야 해요", "constraint"),
        ("締め切りは金曜日です", "constraint"),
        ("预算不超过五千元", "constraint"),
        ("截止日期是下周五", "constraint"),
        ("대한항공으로 하기로 했어요", "decision"),
        ("東京駅で集合することにしました", "decision"),
        ("我们决定住在西湖附近", "decision"),
        ("다음 달에 제주도로 가족 여행을 계획하고 있어요", "goal"),
        ("来月京都に行く予定です", "goal"),
        ("我打算下个月去杭州", "goal"),
        ("新しい予想が出た", "fact"),  # 予想 (a forecast) holds 想 but is no wish
    ])
    def test_classify(self, clause: str, kind: str) -> None:
        assert cjk.classify(clause) == kind

    def test_named_facts(self) -> None:
        assert cjk.named_facts("예산은 1인당 50만 원 이하, 이번 주 금요일까지") == ["1", "50만 원", "이번 주", "금요일"]
        assert cjk.named_facts("一人あたり一万円以内、十二月一日にReactで") == ["一人", "一万円", "十二月一日", "React"]
        assert cjk.named_facts("下周五前买二十台ThinkPad和《三体》") == ["下周五", "二十台", "ThinkPad", "《三体》"]
        assert cjk.named_facts("一緒に行きましょう") == []  # a Han numeral needs a unit to be a number

    @pytest.mark.parametrize(("sentence", "small"), [
        ("안녕하세요!", True), ("감사합니다! 좋은 여행 되세요.", True), ("お疲れさまです。", True), ("谢谢！", True),
        ("좋네요.", True), ("なるほど。", True), ("哈哈哈", True), ("ㅋㅋ 맞아.", True),
        ("감사합니다, 예산은 50만 원이에요.", False), ("谢谢，我决定去杭州。", False),
    ])
    def test_small_talk(self, sentence: str, small: bool) -> None:
        assert cjk.is_small_talk(sentence) is small

    def test_questions_interjections_clauses(self) -> None:
        assert cjk.is_question("예산은 어느 정도인가요?") and cjk.is_question("人数は何名ですか")
        assert cjk.is_question("需要安排景点吗") and not cjk.is_question("预算不超过五千元")
        assert cjk.strip_interjection("응, 한빛이사로 결정했어.") == "한빛이사로 결정했어."
        assert cjk.clauses("바다가 좋지만, 예산은 50만 원이에요") == ["바다가 좋지만", "예산은 50만 원이에요"]
