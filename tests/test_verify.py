"""The constraint check (core/answer/verify.py): what a question pins down, whether a quoted sentence with its context
states it, the verify stage in the pipeline (refusal with the reason and the nearest fact) and on Claude's answers
through the loopback stub (flagged, never passed in silence)."""
from __future__ import annotations

import json

from core.answer.stage import verify_answer
from core.answer.verify import (
    ChunkText,
    Evidence,
    check,
    question_constraints,
    quoted_claims,
    verify_model_answer,
    verify_quotes,
)
from core.config import PipelineConfig
from core.deps import Deps
from core.ingest.pipeline import ingest_files
from core.models.llm import AnthropicLLM
from core.pipeline import run_query
from core.store import Store
from core.types import Answer
from tests.anthropic_stub import Stub, anthropic_stub  # noqa: F401 - fixture
from tests.fakes import HashEmbedder

REFUSAL = "The corpus does not say."


def _kinds(q: str) -> dict[str, str]:
    return {c.kind: c.text for c in question_constraints(q)}


def test_constraints_of_english_and_russian_questions() -> None:
    assert _kinds("Who was the youngest record holder in 1998?") == {"year": "1998", "superlative": "youngest",
                                                                     "asks": "a person"}
    k = _kinds("How many employees did Acme have in May 2021?")
    assert k["entity"] == "Acme" and k["year"] == "2021" and k["month"] == "May" and k["asks"] == "a number"
    assert _kinds("What was the second largest city in Poland?") == {"entity": "Poland", "ordinal": "second",
                                                                     "superlative": "largest"}
    assert _kinds("Who is the CTO of Acme?")["role"] == "chief technology officer"
    assert _kinds("What is the default value of max_age?") == {"entity": "max_age", "asks": "a default value"}
    assert _kinds("Which plans are not refundable?") == {"negation": "not"}
    assert _kinds("Did revenue fall last quarter?")["period"] == "last quarter"
    ru = _kinds("Кто был президентом Франции в 1995 году?")
    assert ru["entity"] == "Франции" and ru["role"] == "президент" and ru["year"] == "1995" and ru["asks"] == "a person"
    assert _kinds("Когда открылся офис в Алматы?") == {"entity": "Алматы", "event": "открыл", "asks": "a date or year"}
    assert question_constraints("What is a prime number?") == ()


def _unmet(q: str, sentence: str, chunk: str = "", heading: str = "", title: str = "") -> list[tuple[str, tuple]]:
    return [(v.constraint.kind, v.instead) for v in check(q, Evidence(sentence, chunk or sentence, heading, title)).unmet]


def test_the_neighbouring_fact_is_caught_with_its_sibling() -> None:
    # another office in the same chunk: the sentence states the sibling in the asked name's slot
    chunk = "The Almaty office opened in 2019. The Austin office is being planned."
    # (the year it states is then another office's: the asked kind of value is unmet too)
    assert _unmet("When did the Austin office open?", "The Almaty office opened in 2019.", chunk) == \
        [("entity", ("Almaty",)), ("asks", ())]
    assert _unmet("When did the Almaty office open?", "The Almaty office opened in 2019.", chunk) == []
    assert _unmet("Who is the CTO of Acme?", "Jane Roe is the CFO of Acme.") == [("role", ("chief financial officer",))]
    assert _unmet("Who is the CFO of Acme?", "Jane Roe is the CFO of Acme.") == []
    assert _unmet("Who was the youngest record holder?", "Ann Lee was the oldest record holder.") == \
        [("superlative", ("oldest",))]
    assert _unmet("What happened in 1987?", "In 1980 the dam was finished.") == [("year", ("1980",))]
    assert _unmet("What happened in March?", "In April the dam was finished.") == [("month", ("April",))]
    assert _unmet("Which team won the third title?", "The Lions won the second title in 1990.") == \
        [("ordinal", ("second",))]
    assert _unmet("How many people live in Zorvath?", "About 40,000 people live in Kraków.") == \
        [("entity", ("Kraków",)), ("asks", ())]  # (the number it states is then Kraków's, not the asked one)
    # said by the context: the name in the document title, the year in the chunk, a pronoun in the sentence
    assert _unmet("When was Tesla born?", "He was born on 10 July 1856.", title="Nikola Tesla") == []
    assert _unmet("Где родился Тесла?", "Он родился в Смилянах в 1856 году.", "Никола Тесла родился в Смилянах.") == []
    assert _unmet("How old must a candidate be to become an MSP?",
                  "Candidates must be over the age of 18.", "Members of the Scottish Parliament (MSPs) ...") == []


def test_a_lower_case_package_name_before_a_software_noun_is_checked() -> None:
    # 'all jsonpickle errors' answered with another package's sentence; 'the oldest pandas version' with numpy's
    chunk = "- The oldest numpy version supported is 1.21.3.\n- Some examples require pandas."
    assert ("entity", ("numpy",)) in _unmet("What is the oldest pandas version foo supports?",
                                            "The oldest numpy version supported is 1.21.3.", chunk)
    v = verify_quotes("What is the oldest pandas version foo supports?", "The oldest numpy version is 1.21.3. [c1]",
                      ["c1"], {"c1": ChunkText(chunk, "", "foo")}, refusal=REFUSAL)
    assert v.refused and "numpy, not pandas" in v.text
    assert _unmet("What is the oldest numpy version foo supports?", "The oldest numpy version supported is 1.21.3.",
                  chunk) == []
    assert _unmet("From which base class do all quuxlib errors derive?",
                  "All errors raised during conversion derive from the `idna.IDNAError` base class.",
                  title="idna") == [("entity", ())]
    # a word that only qualifies the noun is no name
    assert [c.kind for c in question_constraints("What is the oldest supported version?")
            if c.kind == "entity"] == []


def test_a_russian_preposition_opening_a_sentence_is_no_sibling_name() -> None:
    # 'К периоду …' opens the sentence with a capitalised preposition: no name stands in the asked name's slot
    chunk = "Последняя Ледниковая эпоха закончилась. К периоду 9 000 лет назад Европа была покрыта лесом."
    sentence = "К периоду 9 000 лет назад Европа была покрыта лесом."
    assert _unmet("Когда Европа покрылась лесом после Ледникового периода?", sentence, chunk) == []
    assert _unmet("Когда Азия покрылась лесом после Ледникового периода?", sentence, chunk) == [("entity", ()),
                                                                                                ("asks", ())]


def test_a_question_with_no_constraints_and_cross_lingual_names() -> None:
    assert check("What is a prime number?", Evidence("A prime is a natural number.")).verdicts == ()
    # a Russian name over English text: transliterated when it can be; an exonym it cannot match is unchecked, not
    # refused (the year still is checked)
    v = check("Когда Ньютон опубликовал Начала?", Evidence("Newton published the Principia in 1687."))
    assert all(x.verdict != "unmet" for x in v.verdicts)
    assert [x.constraint.kind for x in check("Что случилось во Франции в 1901 году?",
                                              Evidence("France annexed Algeria in 1830.")).unmet] == ["year"]


def test_quoted_claims_and_the_refusal_names_the_constraint_and_the_nearest_fact() -> None:
    text = "[draft] The Almaty office opened in 2019. [c1] It has 40 staff. [c1]"
    assert quoted_claims(text, ["c1"]) == [("The Almaty office opened in 2019.", "c1"), ("It has 40 staff.", "c1")]
    chunks = {"c1": ChunkText("The Almaty office opened in 2019. It has 40 staff. Austin is next.", "Offices",
                              "Company facts")}
    v = verify_quotes("When did the Austin office open?", text, ["c1"], chunks, refusal=REFUSAL)
    assert v.refused and v.citations == ()
    assert v.text.startswith(REFUSAL) and "Almaty, not Austin" in v.text
    assert 'Nearest fact (not the answer): "The Almaty office opened in 2019." [c1]' in v.text
    d = v.info.to_dict()
    assert d["action"] == "refused" and d["nearest"]["chunk_id"] == "c1"
    assert {"kind": "entity", "constraint": "Austin", "verdict": "unmet", "instead": ["Almaty"]} in d["constraints"]
    ok = verify_quotes("When did the Almaty office open?", text, ["c1"], chunks, refusal=REFUSAL)
    assert not ok.refused and ok.text == text and ok.info.action == "passed"
    assert any(c["verdict"] == "met" and c["kind"] == "entity" for c in ok.info.to_dict()["constraints"])


def test_a_header_field_of_another_record_meets_nothing_of_the_asked_thing() -> None:
    # the asked name in one quoted sentence and an author in another package's header: no sentence says who wrote it
    text = "See [quuxly](https://example.org/quuxly) for a CLI that uses foolib. [c1] Author: Ann Roe <ann@x.org> [c2]"
    chunks = {"c1": ChunkText("See [quuxly](https://example.org/quuxly) for a CLI that uses foolib.", "", "foolib"),
              "c2": ChunkText("Name: barlib\nVersion: 1.0\nAuthor: Ann Roe <ann@x.org>", "", "barlib")}
    v = verify_quotes("Who is the author of quuxly?", text, ["c1", "c2"], chunks, refusal=REFUSAL)
    assert v.refused and "author" in v.text
    # the record's own header answers
    own = {"c2": ChunkText("Name: quuxly\nVersion: 1.0\nAuthor: Ann Roe <ann@x.org>", "", "quuxly")}
    ok = verify_quotes("Who is the author of quuxly?", "Author: Ann Roe <ann@x.org> [c2]", ["c2"], own,
                       refusal=REFUSAL)
    assert not ok.refused


def test_a_quoted_sentence_stating_a_sibling_is_dropped_when_another_answers() -> None:
    text = "Revenue was 4 million in 2023. [c1] Revenue was 5 million in 2024. [c2]"
    chunks = {"c1": ChunkText("Revenue was 4 million in 2023."), "c2": ChunkText("Revenue was 5 million in 2024.")}
    v = verify_quotes("What was the revenue in 2024?", text, ["c1", "c2"], chunks, refusal=REFUSAL)
    assert not v.refused and v.text == "Revenue was 5 million in 2024. [c2]" and v.citations == ("c2",)
    assert v.info.action == "narrowed"


def test_a_model_answer_is_flagged_when_its_passages_miss_a_constraint() -> None:
    chunks = {"c1": ChunkText("The Almaty office opened in 2019.", "", "Offices")}
    v = verify_model_answer("When did the Austin office open?", "It opened in 2019 [c1].", ["c1"], chunks)
    assert not v.refused and v.text.startswith("⚠") and "'Austin'" in v.text and v.info.action == "flagged"
    ok = verify_model_answer("When did the Almaty office open?", "It opened in 2019 [c1].", ["c1"], chunks)
    assert ok.text == "It opened in 2019 [c1]." and ok.info.action == "passed"
    assert verify_answer("When did the Austin office open?", Answer("x", ("c1",), False, "llm"), chunks).answer.text \
        .startswith("⚠")


def _corpus(store: Store, llm: AnthropicLLM | None = None) -> Deps:
    emb = HashEmbedder()
    files = [("offices.md", b"# Offices\n\nThe Almaty office opened in 2019 with twelve engineers. An office in Austin is "
                            b"being planned.\n\n"
                            b"The Lisbon office hosts the support team.\n"),
             ("travel.md", b"# Travel\n\nThe daily meal allowance for international trips is 65 euros.\n")]
    ingest_files(files, store=store, embedder=emb, config=PipelineConfig())
    return Deps(store=store, embedder=emb, **({"llm": llm} if llm is not None else {}))


def test_verify_stage_in_the_trace_refuses_a_near_miss(store: Store) -> None:
    deps = _corpus(store)
    cfg = PipelineConfig().with_overrides({"answer.mode": "extractive"})
    t = run_query("When did the Almaty office open?", cfg, deps)
    assert t.stages[-1].stage == "verify" and t.stages[-2].stage == "answer"
    assert t.answer is not None and not t.answer.refused and "2019" in t.answer.text
    info = t.to_dict()["stages"][-1]["info"]
    assert info["action"] in ("passed", "narrowed") and {c["kind"] for c in info["constraints"]} >= {"entity", "asks"}
    assert "Lisbon" not in t.answer.text  # another office's sentence is never quoted beside it
    near = run_query("When did the Austin office open?", cfg, deps)
    assert near.answer is not None and near.answer.refused
    assert "Austin" in near.answer.text and "not the answer" in near.answer.text
    vinfo = near.to_dict()["stages"][-1]["info"]
    assert any(c["constraint"] == "Austin" and c["verdict"] == "unmet" for c in vinfo["constraints"])
    off = run_query("When did the Austin office open?", cfg.with_overrides({"answer.verify": False}), deps)
    assert off.stage("verify").skipped == "answer.verify = false"


def test_verify_flags_claude_answer_through_the_stub(store: Store, anthropic_stub: Stub) -> None:  # noqa: F811
    llm = AnthropicLLM(anthropic_stub.key, base_url=anthropic_stub.base_url, sleep=lambda s: None)
    deps = _corpus(store, llm)

    def reply(body: dict) -> str:
        ids = [b for b in json.dumps(body).split('passage id=\\"')[1:]]
        first = ids[0].split('\\"')[0] if ids else ""
        return json.dumps({"answer": "It opened in 2019.", "citations": [first], "refused": False})

    anthropic_stub.state.responder = reply
    cfg = PipelineConfig().with_overrides({"answer.mode": "llm", "router.enabled": False})
    t = run_query("When did the Austin office open?", cfg, deps)
    assert t.answer is not None and t.answer.mode == "llm" and not t.answer.refused
    assert t.answer.text.startswith("⚠") and "'Austin'" in t.answer.text
    assert t.stage("verify").info["action"] == "flagged"
    ok = run_query("When did the Almaty office open?", cfg, deps)
    assert ok.answer is not None and ok.answer.text == "It opened in 2019."


def test_the_sentence_that_states_the_default_is_quoted_and_another_settings_dropped() -> None:
    from core.answer.stage import extractive_answer
    from core.types import Candidate

    text = ("## Settings\n\n### max_age\n\nThe maximum age of a cached response, in seconds, used by the cache "
            "middleware for every route. Defaults to 600.\n\n### timeout\n\nHow long to wait. Defaults to 30.")
    res = extractive_answer("What is the default value of max_age?", [Candidate("c1", "d1", text, 1.0, 1)],
                            titles={"d1": "Middleware docs"})
    assert res.answer.text.startswith("Defaults to 600. [c1]")
    v = verify_quotes("What is the default value of max_age?", res.answer.text, res.answer.citations,
                      {"c1": ChunkText(text, "Settings", "Middleware docs")}, refusal=REFUSAL)
    assert "600" in v.text and "30" not in v.text and v.info.action == "narrowed" and "timeout" in v.info.reason


def test_the_attribute_asked_must_be_stated_and_its_sibling_is_named() -> None:
    q = "What is the warranty of the FB-340?"
    assert _kinds(q) == {"entity": "FB-340", "attribute": "warranty"}
    bad = check(q, Evidence("The FB-340 costs EUR 400.")).unmet
    assert [(v.constraint.kind, v.instead) for v in bad] == [("attribute", ("price",))]
    assert bad[0].reason() == "the question asks for the warranty; the closest sentence states the price instead"
    assert check(q, Evidence("The FB-340 comes with a five-year warranty.")).ok
    assert check("How tall is the tower?", Evidence("The tower is 330 metres tall.")).ok
    assert _kinds("Какова площадь Варшавы?")["attribute"] == "area"
    assert check("Какова площадь Варшавы?", Evidence("Площадь Варшавы составляет 517 км².")).ok


def test_the_opposite_event_is_not_the_answer() -> None:
    q = "When did the Almaty office open?"
    unmet = check(q, Evidence("The Almaty office closed in 2019.")).unmet
    assert [(v.constraint.kind, v.instead) for v in unmet] == [("event", ("clos",))]
    assert check(q, Evidence("The Almaty office opened in 2019.")).ok
    assert check(q, Evidence("The Almaty office was set up in 2019.")).ok  # said otherwise, no opposite: met


def test_when_asks_a_time_only_when_it_opens_the_question() -> None:
    assert "asks" not in _kinds("What happens to the norm when a number is multiplied by p?")
    assert "asks" not in _kinds("When a state changes another's norms, what is it called?")
    assert _kinds("When was the act passed?")["asks"] == "a date or year"
    assert _kinds("In which year was the act passed?")["asks"] == "a year"
    # a conjunction or a lone 'age' states no time; a when-clause, an amount of time or an anchor does
    assert not check("When was the act passed?", Evidence("Members must be over the age of eighteen.")).ok
    assert check("When did they back the empire?", Evidence("They only backed it when Germany started to build one.")).ok
    assert check("When did the warming begin?", Evidence("Rapid warming began about 13,000 BP.")).ok
    assert check("When was it built?", Evidence("It was built during the reign of Peter the Great.")).ok
    assert not check("In which year was it built?", Evidence("It was built during the reign of Peter the Great.")).ok


def test_a_possessive_ends_a_name_a_verb_last_is_no_superlative_and_a_named_thing_is_the_same_thing() -> None:
    # 'Quorvex's Plant Division': the owner and what it owns are two names, each checked on its own
    assert [c.text for c in question_constraints("What did Quorvex's Plant Division earn?") if c.kind == "entity"] \
        == ["Quorvex", "Plant Division"]
    # 'How long did the outage last?': a verb, not the superlative
    assert not any(c.kind == "superlative" for c in question_constraints("How long did the outage last?"))
    assert any(c.kind == "superlative" for c in question_constraints("Who came last in the race?"))
    # 'the minimum password length' is stated by 'a minimum length' in a sentence about the password
    assert _unmet("What is the minimum password length?",
                  "The login now requires a password change and enforces a minimum length of 14 characters.") == []
    assert _unmet("Who was the oldest child of Ann?", "Bob was the oldest grandson of Ann.") == \
        [("superlative", ("oldest grandson",))]


def test_a_name_the_lead_sentence_lacks_is_not_supplied_by_a_later_quote_of_another_passage() -> None:
    # 'How long did the fighting last in X?': a verb after its subject, not the superlative
    assert not any(c.kind == "superlative" for c in question_constraints("How long did the fighting last in Tarvo?"))
    chunks = {"a": ChunkText("For many years, Ostria had a military regime under the leadership of Dan Pell."),
              "b": ChunkText("Keld Varn built a fort in 1754. The historian Ann Lee wrote about the river trade.")}
    text = ("For many years, Ostria had a military regime under the leadership of Dan Pell. [a] "
            "The historian Ann Lee wrote about the river trade. [b]")
    # the asked name sits only in the second quote's passage, and that quote shares no word with the question
    v = verify_quotes("What type of regime ruled over Keld Varn for many years?", text, ["a", "b"], chunks,
                      refusal=REFUSAL)
    assert v.refused and "Keld Varn" in v.info.reason
    # a later quote that states the name and is about the question still completes a two-part answer
    text2 = ("For many years, Ostria had a military regime under the leadership of Dan Pell. [a] "
             "Keld Varn built a fort in 1754. [b]")
    ok = verify_quotes("Which regime ruled Ostria, and when did Keld Varn build a fort?", text2, ["a", "b"], chunks,
                       refusal=REFUSAL)
    assert not ok.refused
    # winning and losing, joining and leaving are opposite events ('won' and 'lost' read as 'win' and 'lose')
    assert _unmet("When did the team win the cup?", "The team lost the cup final in 1990.") == [("event", ("los",))]
    assert _unmet("When did the team win the cup?", "The team won the cup in 1990 after it lost in 1989.") == []
    # a superlative that ranks another noun is the neighbouring fact though the sentence names the asked noun elsewhere
    assert _unmet("What is the last study?", "The aim of this study was to explore care in the last phase of life.") \
        == [("superlative", ("last phase",))]


def test_a_number_stated_of_another_thing_is_not_the_asked_ones_and_all_or_most_count_nothing() -> None:
    chunks = {"a": ChunkText("Velmora Labs is based in Oslo and employs roughly 310 people across three sites."),
              "b": ChunkText("Most new hires joined the Tarvik site."),
              "c": ChunkText("The Tarvik site opened in 2015. It has 40 staff.")}
    text = "Velmora Labs is based in Oslo and employs roughly 310 people across three sites. [a] " \
           "Most new hires joined the Tarvik site. [b]"
    # the company's head count is not the Tarvik site's, and 'most' states no number of it
    v = verify_quotes("How many people does the Tarvik site employ?", text, ["a", "b"], chunks, refusal=REFUSAL)
    assert v.refused
    # a sentence whose passage names the asked site still gives its number ('It has 40 staff.')
    ok = verify_quotes("How many staff does the Tarvik site have?", "It has 40 staff. [c]", ["c"], chunks,
                       refusal=REFUSAL)
    assert not ok.refused


def test_a_number_after_a_label_noun_is_that_label_not_a_count() -> None:
    cons = question_constraints("Which gateway does each station of Project Kestrel get in phase 3?")
    assert [(c.kind, c.text) for c in cons if c.kind == "number"] == [("number", "phase 3")]
    # 'three regions' counts regions, 'one gateway' counts gateways: neither states phase 3
    assert _unmet("Which gateway does each station get in phase 3?",
                  "Each station receives one FB-340 gateway in three regions.") == [("number", ())]
    # the label with its number, in words, in Roman numerals or as an ordinal before the noun
    for said in ("In phase three each station receives one FB-340 gateway.",
                 "In Phase III each station receives one FB-340 gateway.",
                 "In the third phase each station receives one FB-340 gateway."):
        assert _unmet("Which gateway does each station get in phase 3?", said) == []
    # the same label with another number is its sibling
    assert _unmet("Which gateway does each station get in phase 3?",
                  "In phase 1 each station receives one FB-340 gateway.") == [("number", ("phase 1",))]
    # a number after any other noun stays a plain number
    assert [(c.kind, c.text) for c in question_constraints("How many of the 40 pumps failed?")
            if c.kind == "number"] == [("number", "40")]


def test_how_many_things_is_not_answered_by_a_share_or_a_calendar_year() -> None:
    q = "How many containers are in the reduced pilot of Project Wren?"
    assert _unmet(q, "Her allocation was reduced from 70% to 40% because the pilot of Project Wren was postponed.") \
        == [("asks", ())]
    assert _unmet(q, "Ostmar signed for Project Wren in January 2024.") == [("asks", ())]
    assert _unmet(q, "Project Wren starts a reduced pilot in November 2024 on 40 containers.") == []
    # a share asked, a time asked: the percentage and the years still answer
    assert _unmet("How many percent of the pilot of Project Wren failed?", "In Project Wren 12% failed.") == []
    assert _unmet("How many years did Project Wren run?", "Project Wren ran from 2019 to 2024.") == []


def test_added_and_removed_are_opposite_events() -> None:
    assert _unmet("In which version was the foo flag removed?", "The foo flag was added in version 2.1.") == \
        [("event", ("add",))]
    assert _unmet("In which version was the foo flag added?", "The foo flag was added in version 2.1.") == []


def test_c_suite_title_is_one_role_and_its_initials_are_the_same_title() -> None:
    # the area of a 'chief ... officer' is what tells two titles apart; 'CFO' is the chief financial officer
    def roles(q: str, s: str) -> list[tuple[str, str]]:
        c = check(q, Evidence(sentence=s, chunk=s, title="Acme"))
        return [(v.constraint.text, v.verdict) for v in c.verdicts if v.constraint.kind == "role"]

    cfo = "Marcus Oyelaran is the chief financial officer of Acme."
    assert roles("Who is the chief operating officer of Acme?", cfo) == [("chief operating officer", "unmet")]
    assert roles("Who is the CFO of Acme?", cfo) == [("chief financial officer", "met")]
    assert roles("Who is the chief financial officer of Acme?", "Marcus Oyelaran is the CFO of Acme.") == [
        ("chief financial officer", "met")]
    assert roles("Who is the chief executive officer?", "Ann Lee has been chief executive since 2019.") == [
        ("chief executive officer", "met")]
    assert roles("Who is the CTO?", "Ann Lee is the chief executive officer.") == [("chief technology officer", "unmet")]
    assert roles("Who was the chief of staff?", "Ann Lee was the chief of staff.") == [("chief", "met")]


def test_compound_attribute_asks_its_first_noun() -> None:
    # 'the warranty period for X' asks a warranty: a period of something else is not it
    q = "What is the warranty period for the Zephyr router?"
    other = "The Zephyr router became available after a four-month early-access period."
    mine = "The Zephyr router comes with a two-year warranty."
    verdict = {s: [v.verdict for v in check(q, Evidence(sentence=s, chunk=s)).verdicts
                   if v.constraint.kind == "attribute"] for s in (other, mine)}
    assert verdict == {other: ["unmet"], mine: ["met"]}


def test_a_label_number_counts_nothing() -> None:
    # 'How many people ...' is not answered by 'section 3'
    q = "How many people work in the Austin office?"
    chunk = "The Austin office is a sales hub. Field engineers are exempt from the attendance rules in section 3."
    label = "Field engineers are exempt from the attendance rules in section 3."
    count = "The Austin office employs 12 people."
    asks = {s: [v.verdict for v in check(q, Evidence(sentence=s, chunk=chunk + " " + count)).verdicts
                if v.constraint.kind == "asks"] for s in (label, count)}
    assert asks == {label: ["unmet"], count: ["met"]}


def test_a_name_met_only_after_a_preposition_is_not_the_subject_of_the_fact() -> None:
    # 'When did Tidewater become available?' is not answered by Meridian becoming available 'as successor to Tidewater'
    s = "Meridian is the cloud-native successor to Tidewater and became generally available in May 2024."
    got = {q: [(v.constraint.kind, v.verdict, v.instead) for v in check(q, Evidence(sentence=s, chunk=s)).verdicts]
           for q in ("When did Tidewater become generally available?", "When did Meridian become generally available?")}
    assert got["When did Tidewater become generally available?"] == [("entity", "unmet", ("Meridian",)),
                                                                       ("asks", "unmet", ())]
    assert got["When did Meridian become generally available?"] == [("entity", "met", ()), ("asks", "met", ())]
    # an opening phrase is no subject, and the asked name as the subject stays met
    t = "In 1884, Tesla moved to New York."
    assert all(v.verdict == "met" for v in check("When did Tesla move to New York?", Evidence(sentence=t)).verdicts)
    # a passive's subject is what the act is done to: 'the capture of Montreal' states it; 'These' is no name
    m = "These dates ran from the war in 1754 to the capture of Montreal in 1760."
    assert all(v.verdict == "met" for v in check("When was Montreal captured?", Evidence(sentence=m)).verdicts)
    assert all(v.verdict == "met" for v in check("When did Montreal fall?", Evidence(sentence=m)).verdicts)


def test_an_attribute_stated_of_a_thing_the_passage_never_names_is_not_the_asked_ones() -> None:
    # another product's warranty, in a passage that never names the asked product, is not its warranty
    q = "What is the warranty period for the Zephyr router?"
    other = "Every Talon gateway comes with a five-year hardware warranty."
    got = [(v.constraint.kind, v.verdict) for v in check(q, Evidence(sentence=other, chunk=other)).verdicts]
    assert got == [("entity", "unmet"), ("attribute", "unmet")]


def test_a_sibling_name_two_words_before_the_same_phrase_is_caught() -> None:
    # 'Tidewater become generally available' asked; 'Meridian 1.0 became generally available' read in a chunk that
    # names Tidewater elsewhere: Meridian stands in the asked name's slot
    chunk = "Meridian 1.0 became generally available on 14 May 2024. Fourteen Tidewater customers moved."
    s = "Meridian 1.0 became generally available on 14 May 2024."
    assert _unmet("When did Tidewater become generally available?", s, chunk) == [("entity", ("Meridian",)),
                                                                                   ("asks", ())]


def test_more_siblings_of_the_asked() -> None:
    # a name inside a relative clause is not the sentence's subject ('The FB-200, which preceded the FB-210, ...')
    s = "The ZX-200, which preceded the ZX-210, will stop receiving firmware updates at the end of 2030."
    assert _unmet("When will the ZX-210 stop receiving firmware updates?", s) == [("entity", ("ZX-200",)),
                                                                                  ("asks", ())]
    assert _unmet("When will the ZX-200 stop receiving firmware updates?", s) == []
    # 'updates' is no change upwards
    assert "direction" not in {c.kind for c in question_constraints("When will the ZX-200 stop receiving updates?")}
    # 'the first cutover wave': a sentence that never speaks of a wave states no first one
    t = "The read-only server was shut down on 5 August 2024 after the 30-day retention window."
    assert _unmet("How long does the server stay read-only after the first cutover wave?", t) == [("ordinal", ())]
    # 'the operating temperature range of': the attribute is the temperature
    assert _unmet("What is the operating temperature range of the ZX-91?", "The ZX-91 monitors pressure.") == [
        ("attribute", ("pressure",))]
    # a lone capital ('°C') is no sibling name
    assert _unmet("How much power does the ZX-340 draw?", "The ZX-210 is rated for 0 to +55 °C.") == [
        ("entity", ("ZX-210",)), ("attribute", ("temperature",)), ("asks", ())]


def test_a_code_of_the_same_series_is_a_sibling_and_a_count_after_first_is_no_noun() -> None:
    # the IP rating asked of the ZX-210; the ZX-340's sentence states an IP rating: it is the sibling's
    chunk = "The ZX-340 Rugged is housed in a sealed IP67 enclosure. The ZX-210 draws at most 6 W."
    assert _unmet("What is the IP rating of the ZX-210 enclosure?", "The ZX-340 Rugged is housed in a sealed IP67 "
                  "enclosure.", chunk)[0] == ("entity", ("ZX-340 Rugged",))
    # 'the first three quarters' counts quarters: a sentence about the quarter is not refused for 'first'
    assert "ordinal" not in {k for k, _ in _unmet("How did headcount develop over the first three quarters of 2024?",
                                                   "Headcount grew by nine during the quarter.")}


def test_a_russian_c_suite_title_is_the_english_one() -> None:
    # 'финансовый директор' is the chief financial officer, in English evidence and in Russian
    cfo = "Marcus Oyelaran is the chief financial officer of Acme."
    got = [(v.constraint.text, v.verdict) for v in check("Кто финансовый директор Acme?",
                                                         Evidence(sentence=cfo, chunk=cfo)).verdicts
           if v.constraint.kind == "role"]
    assert got == [("chief financial officer", "met")]
    got = [(v.constraint.text, v.verdict) for v in check("Кто технический директор Acme?",
                                                         Evidence(sentence=cfo, chunk=cfo)).verdicts
           if v.constraint.kind == "role"]
    assert got == [("chief technology officer", "unmet")]
    ru = "Финансовый директор компании Acme — Марк Ойеларан."
    assert [v.verdict for v in check("Кто финансовый директор Acme?", Evidence(sentence=ru, chunk=ru)).verdicts
            if v.constraint.kind == "role"] == ["met"]


def test_asked_which_company_makes_a_part_a_sentence_must_name_a_company_other_than_the_product() -> None:
    q = "Which company makes the radio in the KX-30?"
    assert ("asks", "a company") in [(c.kind, c.text) for c in question_constraints(q)]
    for q2 in ("Who manufactures the radio in the KX-30?", "Какая компания производит радиомодуль для KX-30?",
               "Кто производит радиомодуль для KX-30?", "Which supplier delivers the KX-30 batteries?"):
        assert ("asks", "a company") in [(c.kind, c.text) for c in question_constraints(q2)], q2
    assert not any(c.text == "a company" for c in question_constraints("Who founded the Tarvik choir?"))
    assert not any(c.text == "a company" for c in question_constraints("Which organizations may not sit in it?"))
    title = "Norvane Systems - quarterly report"  # the publisher's name is no maker of the radio
    off = ("Assembly in Lindholm slowed in May because radios for the KX-30 ran short, while Pellwick uses only the "
           "KX-20.")
    v = verify_quotes(q, f"{off} [c1]", ["c1"], {"c1": ChunkText(off, title=title)}, refusal=REFUSAL)
    assert v.refused and "company" in v.text, v.text
    for good in ("The radio in the KX-30 is the Brevik BR-7 module.", "The KX-30 radio is made by Brevik.",
                 "Radios for the KX-30 come from Brevik Instruments Ltd."):
        v = verify_quotes(q, f"{good} [c1]", ["c1"], {"c1": ChunkText(good, title=title)}, refusal=REFUSAL)
        assert not v.refused, (good, v.text)


def test_an_acronym_that_modifies_the_noun_asked_is_part_of_the_attribute_not_a_name() -> None:
    q = "What is the IP rating of the KX-30?"
    cons = [(c.kind, c.text) for c in question_constraints(q)]
    assert ("entity", "IP") not in cons and ("attribute", "IP rating") in cons and ("entity", "KX-30") in cons
    assert ("attribute", "API key") in [(c.kind, c.text) for c in question_constraints("Where is the API key for "
                                                                                          "Tarvik kept?")]
    assert ("entity", "NASA") in [(c.kind, c.text) for c in question_constraints("When did NASA launch the KX-30?")]
    off = "Orlen Freight was rated amber because of the KX-30 delivery delays, and Brisk Labs was rated green."
    v = verify_quotes(q, f"{off} [c1]", ["c1"], {"c1": ChunkText(off)}, refusal=REFUSAL)
    assert v.refused and "IP rating" in v.text and "Orlen" not in v.text.split("Nearest fact")[0], v.text
    good = "The KX-30 sits in a sealed IP67 enclosure for outdoor use."
    assert not verify_quotes(q, f"{good} [c1]", ["c1"], {"c1": ChunkText(good)}, refusal=REFUSAL).refused
