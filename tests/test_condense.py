"""Conversation follow-ups condensed into standalone questions (core/route/condense.py), in English and Russian, the
`condense` stage in the trace, the answer cache keyed on the condensed question, and the CLI's --history/--session."""
from __future__ import annotations

import json

from core.app.conversation import ConversationError, parse_turns, session_path, turn_of
from core.config import PipelineConfig
from core.deps import Deps
from core.ingest.pipeline import ingest_files
from core.pipeline import run_query
from core.route.condense import condense, condense_offline
from core.types import Turn
from tests.graph_fakes import ScriptedLLM


def test_english_follow_ups_carry_the_previous_subject() -> None:
    prev = [Turn("What was the revenue of the Software division in Q2 2024?")]
    assert condense_offline("and in Q3?", prev).text == "What was the revenue of the Software division in Q3?"
    c = condense_offline("Who leads it?", [Turn("When did Project Kite start?")])
    assert (c.text, c.method, c.carried) == ("Who leads Project Kite?", "pronoun", ("Project Kite",))
    assert condense_offline("What about the AB-200?", [Turn("What is the lead time of the AB-100?")]).text == \
        "What is the lead time of the AB-200?"
    # the phrase of the same frame swapped; a pronoun resolved beside a name of the follow-up's own
    assert condense_offline("And for domestic trips?", [Turn("What is the meal allowance for international trips?")]
                            ).text == "What is the meal allowance for domestic trips?"
    assert condense_offline("What must it be set to by 2025?", [Turn("What does TLS_MIN control?")]).text == \
        "What must TLS_MIN be set to by 2025?"
    # a question with its own subject stands alone
    own = condense_offline("What does MAX_POOL_SIZE do?", [Turn("What is TLS_MIN?")])
    assert own.text == "What does MAX_POOL_SIZE do?" and not own.changed
    assert condense_offline("Who leads it?", []).method == "unchanged"


def test_russian_follow_ups_carry_the_previous_subject() -> None:
    c = condense_offline("Кто им руководит?", [Turn("Когда начался проект Kite?")])
    assert c.text == "Кто им (Kite) руководит?" and c.carried == ("Kite",)
    r = condense_offline("А в Q3?", [Turn("Какая выручка была в Q2 2024?")])
    assert r.text == "Какая выручка была в Q3?" and r.method == "replaced"
    a = condense_offline("А сроки?", [Turn("Когда выйдет AB-100?")])
    assert a.text == "Сроки (AB-100)?" and a.method == "appended"


def test_german_questions_stand_alone_and_german_follow_ups_carry_the_previous_subject() -> None:
    # a short German question after a turn asks a question of its own (it was read as a fragment and rewritten into
    # the previous question: 'Welche Python-Version benötigt attrs?' after 'Wer ist der Autor von uvicorn?')
    prev = [Turn("Wer ist der Autor von uvicorn?")]
    for q in ("Welche Python-Version benötigt attrs?", "Wer betreut pypdf?", "Unter welcher Lizenz steht rich?",
              "Gibt es eine Lizenz?"):
        c = condense_offline(q, prev)
        assert c.text == q and not c.changed, (q, c.text)
    c = condense_offline("Wer hat ihn unterstützt?", [Turn("Wann wurde Louis-Joseph de Montcalm geboren?")])
    assert c.changed and "Montcalm" in c.text
    assert condense_offline("Und Tunesien?", [Turn("Wann übernahm Frankreich die Kontrolle über Algerien?")]).text == \
        "Wann übernahm Frankreich die Kontrolle über Tunesien?"
    # the subject carried is the package the lower-case word names, not the capitalised noun 'Autor'
    assert condense_offline("Und wer betreut es?", prev).text == "Und wer betreut es (uvicorn)?"


def test_slots_of_their_own_kind_quoted_names_and_the_person_a_who_question_named() -> None:
    # a setting's key swaps for a setting's key, not for the product named beside it
    k = condense_offline("А MAX_RETRIES?", [Turn("Какое значение AUTH_TTL_SEC рекомендуется для Tidewater?")])
    assert k.text == "Какое значение MAX_RETRIES рекомендуется для Tidewater?" and k.method == "replaced"
    # a month swaps for a month (with its year), not for a name
    m = condense_offline("And in March?", [Turn("What was the uptime of Project Kite in June 2024?")])
    assert m.text == "What was the uptime of Project Kite in March?"
    # a quoted name is carried whole
    assert condense_offline("Кто им руководит?", [Turn("Что такое проект «Белый ветер»?")]).text == \
        "Кто им (Белый ветер) руководит?"
    # 'he' / 'она' after a 'who' question: the person its answer named, not the question's subject
    who = [Turn("Who is the finance director of Acme?", "Jane Roe is the finance director of Acme. [c1]")]
    p = condense_offline("What is she responsible for?", who)
    assert (p.text, p.carried) == ("What is Jane Roe responsible for?", ("Jane Roe",))
    ru = [Turn("Кто руководит офисом в Алматы?", "Офисом руководит Айгерим Садыкова. [c2]")]
    assert condense_offline("Какой проект она ведёт?", ru).text == "Какой проект она (Айгерим Садыкова) ведёт?"
    # no 'who' asked, or a refusal: the previous question's subject as before
    assert condense_offline("What is he doing?", [Turn("Who is the CFO?", "The corpus does not say.")]).text == \
        "What is CFO doing?"
    assert condense_offline("Who leads it?", [Turn("When did Project Kite start?", "Jane Roe said May. [c]")]
                            ).text == "Who leads Project Kite?"


def test_claude_rewrites_with_a_key_and_the_offline_rule_stands_in_when_it_fails() -> None:
    llm = ScriptedLLM(lambda req: {"question": "Who leads Project Kite?"})
    c = condense("who runs it", [Turn("When did Project Kite start?", "In May.")], llm, use_llm=True)
    assert c.text == "Who leads Project Kite?" and c.method == "llm" and c.usage.calls == 1
    assert "When did Project Kite start?" in llm.requests[0].user[0].text and llm.requests[0].purpose == "condense"
    empty = condense("who runs it", [Turn("When did Project Kite start?")], ScriptedLLM(lambda r: {"question": ""}),
                     use_llm=True)
    assert empty.text == "who runs Project Kite" and "offline rule instead" in empty.notes[-1]


DOCS = [("kite.md", b"# Project Kite\n\nProject Kite started in May 2024 at the northern depot.\n\n"
                    b"Ana Varga leads Project Kite for the regional water utility.\n"),
        ("other.md", b"# Travel\n\nThe daily meal allowance for trips abroad is 65 euros.\n")]


def test_the_condense_stage_runs_first_and_the_cache_keys_on_the_condensed_question(deps: Deps) -> None:
    cfg = PipelineConfig().with_overrides({"router.enabled": False, "rerank.enabled": False})
    ingest_files(DOCS, store=deps.store, embedder=deps.embedder, config=cfg)
    first = run_query("Who leads Project Kite?", cfg, deps)
    follow = run_query("Who leads it?", cfg, deps, history=[Turn("When did Project Kite start?", "In May 2024.")])
    assert [s.stage for s in follow.stages][:2] == ["condense", "answer_cache"]
    assert follow.query == "Who leads Project Kite?" and follow.stages[0].info["original"] == "Who leads it?"
    cache = follow.stage("answer_cache")
    assert cache is not None and cache.info["verdict"] == "hit"  # the standalone question's stored answer
    assert follow.answer == first.answer
    assert turn_of("Who leads it?", follow) == Turn("Who leads it?", follow.answer.text, "Who leads Project Kite?")
    assert "condense" not in [s.stage for s in first.stages]  # no history: no stage


def test_history_files_and_session_ids(tmp_path) -> None:
    assert parse_turns("When did Kite start?\n\nWho leads it?\n") == [Turn("When did Kite start?"),
                                                                       Turn("Who leads it?")]
    assert parse_turns(json.dumps([{"question": "q1", "answer": "a1"}, "q2"])) == [Turn("q1", "a1"), Turn("q2")]
    assert parse_turns('{"question": "q", "condensed": "qq"}') == [Turn("q", "", "qq")]
    for bad in ('[{"answer": 1}]', "[oops"):
        try:
            parse_turns(bad)
        except ConversationError:
            continue
        raise AssertionError(bad)
    assert session_path(tmp_path / "w.duckdb", "s-1", "default") == \
        tmp_path / "workspaces" / "default" / "sessions" / "s-1.json"
    # issue #46 item 4: the same session id in two workspaces is two conversations
    assert session_path(tmp_path / "w.duckdb", "s-1", "a") != session_path(tmp_path / "w.duckdb", "s-1", "b")
    try:
        session_path(tmp_path / "w.duckdb", "../x", "default")
    except ConversationError:
        pass
    else:
        raise AssertionError("a session id is a plain name")


def test_a_history_file_that_is_not_utf8_gets_a_clear_error(tmp_path) -> None:
    from core.app.conversation import load_turns

    bad = tmp_path / "h.json"
    bad.write_bytes(b"\xff\xfe\x00q\x00")
    try:
        load_turns(bad)
    except ConversationError as exc:
        assert "not UTF-8" in str(exc)
    else:
        raise AssertionError("no error")


def test_an_independent_question_is_never_rewritten_and_a_follow_up_is_detected() -> None:
    from core.route.condense import condense_offline, follows_up

    h = [Turn("Where was Friedrich Ratzel born?", "Ratzel was born in Karlsruhe.")]
    for q in ("When imperialism impacts social norms of a state, what is it called?",
              "What is the taskforce that was organized to identify with the pro-life position?",
              "What is CORSMiddleware and which bigger tool does it suggest?",
              "Какая роль, к которой стремится исламизм, превращает его в спорную идею?"):
        assert not follows_up(q, h)[0], q
        assert condense_offline(q, h).text == q
    for q in ("When did he die?", "And in 1901?", "What about his students?", "What does this mean?",
              "Give an example of them.", "Кто их основал?", "А что он изучал?", "In Leipzig?"):
        assert follows_up(q, h)[0], q
    assert not follows_up("When did he die?", [])[0]


def test_a_pronoun_stands_for_the_subject_of_an_inverted_question_and_a_first_preposition_names_nothing() -> None:
    # 'it' after 'What does the UMC oppose as ... of Scripture?' is the UMC (the name after 'does'), not both names
    c = condense_offline("What does it support?", [Turn("What does the ZMC oppose as contrary to the Charter?")])
    assert c.text == "What does ZMC support?"
    # a capitalised preposition opening a Russian question is no name
    c = condense_offline("А что она поддерживает?", [Turn("Против чего выступает ЗМЦ?")])
    assert c.carried == ("ЗМЦ",)
