"""Issue #28 item 5: a question asking what does not hold is answered by the thing the property is negated for, or
stated otherwise for while it holds for another, or refused; an answer quoting two versions of a document says which
sentence is which version's."""
from __future__ import annotations

from core.answer.negation import negated_answer, negated_ask, read, values
from core.answer.stage import extractive_answer
from core.answer.versions import DocHead, sibling_labels, version_of
from core.types import Candidate

DRAFT = DocHead("remote_policy_draft.md", "Home Working Rules",
                "# Home Working Rules\n\nStatus: DRAFT v0.4, circulated 3 June 2024.\n")
FINAL = DocHead("remote_policy_final.md", "Home Working Rules",
                "# Home Working Rules\n\nStatus: FINAL v1.0, approved 19 September 2024.\n")
DOCS = {"dr": DRAFT, "fi": FINAL}


def _c(cid: str, doc: str, text: str, rank: int) -> Candidate:
    return Candidate(cid, doc, text, 1.0 / rank, rank)


def test_question_parts_and_numbers_in_words_and_digits() -> None:
    ask = negated_ask("Which policy does not allow three remote days?")
    assert ask is not None and ask.values == {3.0} and {"allow", "remot", "day"} <= ask.prop
    assert "polici" in ask.subject and "allow" not in ask.subject
    assert negated_ask("Which policy allows three days?") is None and negated_ask("Why is it not green?") is None
    ru = negated_ask("Какая версия не даёт 28 дней отпуска?")
    assert ru is not None and ru.values == {28.0}
    assert values("up to two days, €30 and 28 дней, две недели") == {2.0, 30.0, 28.0}


def test_a_negation_answers_only_when_it_reaches_the_asked_property() -> None:
    ask = negated_ask("Какой склад не принимает грузы ночью?")
    assert ask is not None
    # 'без' negates the days off, not the accepting of goods after 'и'
    assert not read(ask, "Склад в Самаре работает без выходных и принимает грузы круглосуточно.").negated
    ask2 = negated_ask("Which router does not support IPv6?")
    assert ask2 is not None and read(ask2, "The X100 router does not support IPv6.").negated
    assert not read(ask2, "The X200 supports IPv6 and does not need a licence.").negated


def test_the_version_stating_another_number_answers_and_is_named() -> None:
    cands = [_c("fi-1", "fi", "Employees may work remotely for up to three days per week.", 1),
             _c("dr-1", "dr", "Employees may work remotely for up to two days per week.", 2),
             _c("dr-2", "dr", "Longer stays abroad are not allowed under this policy.", 3)]
    q = "Which policy does not allow three remote days?"
    got = extractive_answer(q, cands, threshold=0.0, documents=DOCS, titles={"dr": "Home Working Rules",
                                                                              "fi": "Home Working Rules"}).answer
    assert not got.refused and got.citations[0] == "dr-1" and "fi-1" in got.citations
    assert "Draft v0.4" in got.text and "two days" in got.text and "not three" in got.text
    assert got.text.index("Draft") < got.text.index("Final")  # the answer first, the version it differs from after
    assert "Longer stays" not in got.text  # a negative sentence about something else answers nothing
    # only the version where it holds: refused, pointing at what was found
    alone = extractive_answer(q, cands[:1] + cands[2:], threshold=0.0, documents=DOCS).answer
    assert alone.refused and "says only where it holds" not in alone.text and "only where it holds" in alone.text


def test_a_sentence_negating_the_property_answers_directly() -> None:
    cands = [_c("r-1", "r", "The X200 router supports IPv6 and ships with two antennas.", 1),
             _c("r-2", "r", "The X100 router does not support IPv6; it is meant for small offices.", 2)]
    got = extractive_answer("Which router does not support IPv6?", cands, threshold=0.0).answer
    assert not got.refused and got.citations == ("r-2",) and "X100" in got.text
    none = extractive_answer("Which router does not support Wi-Fi 7?", cands, threshold=0.0).answer
    assert none.refused


def test_a_version_without_the_asked_clause_answers_a_question_without_numbers() -> None:
    cands = [_c("fi-7", "fi", "Connections must go through the company VPN, and signing in to the VPN requires a "
                              "hardware security key.", 1),
             _c("dr-7", "dr", "Connections must go through the company VPN.", 2)]
    got = extractive_answer("Which version does not require a hardware security key for the VPN?", cands,
                            threshold=0.0, documents=DOCS).answer
    assert not got.refused and got.citations[0] == "dr-7" and "Draft" in got.text


def test_negated_answer_prefers_direct_negations_over_contrasts() -> None:
    ask = negated_ask("Which policy does not cover agency workers?")
    assert ask is not None
    texts = ["Agency workers are covered from their first day.", "The policy does not cover agency workers."]
    got = negated_answer(ask, texts, [0, 1])
    assert got.direct == (1,) and got.holds == (0,)


def test_version_labels_from_status_lines_titles_and_file_names() -> None:
    assert version_of(DRAFT).label == "Draft v0.4, 3 June 2024" and version_of(DRAFT).family == "home working rules"
    assert version_of(DocHead("leave_rev_2022-03.md", "Leave", "Revision of 14 March 2022.")).label == "14 March 2022"
    assert version_of(DocHead("leave_v2.md", "", "Nothing dated here.")).label == "v2"
    assert version_of(DocHead("x.md", "Положение", "Версия 1 (черновик), май 2023 года.")).label == \
        "Версия 1 черновик, май 2023"
    # two quarters' reports are not versions of one document; two undated copies are told apart by file name
    q = {"a": DocHead("report_q1_2024.md", "", ""), "b": DocHead("report_q2_2024.md", "", "")}
    assert sibling_labels(["a", "b"], q) == {}
    same = {"a": DocHead("notes_old.md", "Notes", ""), "b": DocHead("notes_new.md", "Notes", "")}
    assert sibling_labels(["a", "b"], same) == {"a": "notes_old.md", "b": "notes_new.md"}
    assert sibling_labels(["dr"], DOCS) == {}  # one version retrieved: nothing to tell apart


def test_an_answer_from_two_versions_says_which_is_which() -> None:
    cands = [_c("fi-3", "fi", "Employees may work remotely for up to three days per week.", 1),
             _c("dr-3", "dr", "Employees may work remotely for up to two days per week.", 2),
             _c("fi-9", "fi", "Questions go to the HR mailbox.", 3),
             _c("dr-9", "dr", "Questions go to the HR mailbox.", 4)]
    got = extractive_answer("How many days per week may employees work remotely?", cands, threshold=0.0,
                            documents=DOCS).answer
    assert not got.refused
    assert "[Final v1.0, 19 September 2024] Employees may work remotely for up to three days" in got.text
    assert "[Draft v0.4, 3 June 2024] Employees may work remotely for up to two days" in got.text
    plain = extractive_answer("How many days per week may employees work remotely?", cands[:1], threshold=0.0,
                              documents=DOCS).answer
    assert "Final" not in plain.text  # no other version retrieved: no label
    same = extractive_answer("Where do questions go?", cands[2:], threshold=0.0, documents=DOCS).answer
    assert "[Final v1.0, 19 September 2024 & Draft v0.4, 3 June 2024] Questions go" in same.text


def test_only_a_negation_of_the_main_clause_makes_a_negated_question() -> None:
    assert negated_ask("What spare stock is kept so installations are not held up?") is None
    assert negated_ask("What must customers do whose gateways cannot be upgraded?") is None
    assert negated_ask("What is No Greater Glory?") is None  # a name, not a negation
    assert negated_ask("Which policy does NOT allow three remote days?") is not None
    assert negated_ask("Что делать, если шлюз не отвечает?") is None


def test_the_document_title_counts_toward_what_a_negative_sentence_is_about() -> None:
    ask = negated_ask("Which gateways cannot use TLS 1.3 according to the error code reference?")
    assert ask is not None
    sent = "Gateways older than FieldOS 3.9.0 cannot use TLS 1.3."
    assert read(ask, sent).covered < 0.5 <= read(ask, sent, "Error Code Reference").covered
    got = negated_answer(ask, [sent], [0], contexts=["Error Code Reference"])
    assert got.direct == (0,)


def test_versioned_answers_keep_to_the_sentence_limit_and_put_each_version_on_its_line() -> None:
    from core.answer.stage import with_other_versions

    texts = ["Staff may work remotely two days a week.", "Staff may work remotely three days a week.",
             "The stipend for remote staff is 400 euros.", "The stipend for remote staff is 550 euros."]
    docs = ["dr", "fi", "dr", "fi"]
    labels = {"dr": "Draft", "fi": "Final"}
    assert with_other_versions([0, 2], texts, docs, labels, limit=3) == [0, 1, 2, 3]  # a pair is never cut in two
    assert with_other_versions([0, 2], texts, docs, labels, limit=2) == [0, 1]
    assert with_other_versions([0, 2], texts, docs, labels, limit=4) == [0, 1, 2, 3]
    cands = [_c("fi-3", "fi", texts[1], 1), _c("dr-3", "dr", texts[0], 2)]
    got = extractive_answer("How many days a week may staff work remotely?", cands, threshold=0.0,
                            documents=DOCS).answer
    assert got.text.count("\n") == 1 and got.text.splitlines()[1].startswith("[Draft v0.4")


def test_the_stop_chip_does_not_claim_a_refusal_above_the_cut_was_below_it() -> None:
    from core.types import Answer, AnswerInfo, StageResult, Trace
    from pages._answer_box import stop_text

    a = Answer("The corpus does not say. The question asks what does not hold ...", (), True, "extractive")
    info = AnswerInfo.of(a, None, support=0.95, threshold=0.36)
    t = Trace("q", "h", 1, (StageResult("answer", info=info),), answer=a)
    chip = stop_text(t)
    assert "support 0.95 ≥ cut 0.36" in chip and "refused for the reason the answer gives" in chip


def test_the_store_gives_each_documents_name_title_and_opening(store) -> None:  # noqa: ANN001
    from core.config import PipelineConfig
    from core.ingest.pipeline import ingest_files
    from tests.fakes import HashEmbedder

    body = b"# Leave Rules\n\nStatus: DRAFT v0.2, May 2023.\n\nStaff get 20 days of leave a year.\n"
    assert not ingest_files([("leave_draft.md", body)], store=store, embedder=HashEmbedder(),
                            config=PipelineConfig()).errors
    [doc] = store.corpus.documents()
    heads = store.corpus.document_heads([doc.doc_id, "nope"], chars=40)
    name, title, head = heads[doc.doc_id]
    assert name == "leave_draft.md" and title == "Leave Rules" and len(head) == 40 and "nope" not in heads
    assert version_of(DocHead(*store.corpus.document_heads([doc.doc_id])[doc.doc_id])).label == "Draft v0.2, May 2023"
    assert store.corpus.document_heads([]) == {}
