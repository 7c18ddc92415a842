"""Offline golden-set generator on a tiny invented corpus: question forms, the well-formedness check and what it
drops, multi-hop and comparison items from real links only, near-misses checked absent, Russian questions for
Russian chunks, and the CLI contract."""
from __future__ import annotations

import json
import re

from core.cli import main
from core.eval.datasets import load_jsonl_file
from core.eval.golden import CorpusIndex, Passage, content_words, generate, generate_set, overlap, passages_from
from core.eval.golden_check import problem
from core.eval.golden_forms import code_drafts, english_drafts, russian_drafts
from core.store import Store
from core.types import Chunk, Document

DOCS = {
    "rig.md": ("Pelican Rig", "en", [
        "The Pelican Rig is a 1998 documentary film directed by Henrik Aas. It was shot in Tromsø.",
        "The coolant pump was replaced in 2022 because of a cracked housing. The rig has 14 pressure sensors.",
    ]),
    "aas.md": ("Henrik Aas", "en", [
        "Henrik Aas (born 3 March 1961) is a Norwegian film director and engineer. He was born in Bergen.",
    ]),
    "quist.md": ("Marta Quist", "en", [
        "Marta Quist (12 May 1950 – 9 June 2011) was a Danish painter. She was the daughter of Niels Quist.",
    ]),
    "heron.md": ("Heron Lab", "en", [
        "Heron Lab is a 2004 documentary film directed by Marta Quist. The calibration interval is 90 days by default.",
    ]),
    "ru.md": ("Стенд Кречет", "ru", [
        "В 2019 году инженер Ольга Сомова построила испытательный стенд для насосов. "
        "Стенд «Кречет» — это испытательный стенд для насосов высокого давления.",
    ]),
}


def _passages() -> list[Passage]:
    out = []
    for name, (title, lang, chunks) in DOCS.items():
        for i, text in enumerate(chunks):
            out.append(Passage(Chunk(f"{name}-{i}", name, i, text, 0, len(text), (), len(text.split()), lang),
                               name, title))
    return out


def test_question_forms_name_their_subject_and_ask_for_the_fact() -> None:
    got = {d.query: d for d in english_drafts("Henrik Aas (born 3 March 1961) is a Norwegian film director and "
                                              "engineer.", "Henrik Aas")}
    assert got["When was Henrik Aas born?"].answer == "3 March 1961"
    assert got["What nationality is Henrik Aas?"].answer == "Norwegian"
    assert "What does Henrik Aas do for a living?" in got
    film = {d.query: d for d in english_drafts("The Pelican Rig is a 1998 documentary film directed by Henrik Aas.",
                                               "Pelican Rig")}
    who = film["Who directed The Pelican Rig?"]
    assert who.answer == "Henrik Aas" and who.role == "the director of {S}"
    assert film["When was The Pelican Rig released?"].answer == "1998"
    # a pronoun subject becomes the document's title: the question stands alone
    assert [d.query for d in english_drafts("He was born in Bergen.", "Henrik Aas")] == ["Where was Henrik Aas born?"]
    assert english_drafts("It was shot there.", "") == []  # no title to name it by: no question
    why = english_drafts("The coolant pump was replaced in 2022 because of a cracked housing.", "Pelican Rig")
    assert [d.query for d in why] == ["When was the coolant pump replaced?", "Why was the coolant pump replaced in 2022?"]
    assert [d.query for d in english_drafts("The rig has 14 pressure sensors.", "x")] == \
        ["How many pressure sensors does the rig have?"]
    assert [(d.query, d.answer) for d in english_drafts("The calibration interval is 90 days by default.", "x")] \
        == [("What is the calibration interval by default?", "90 days")]
    ru = {d.query for d in russian_drafts("В 2019 году инженер Ольга Сомова построила испытательный стенд.", "")}
    assert "Когда инженер Ольга Сомова построила стенд?" in ru  # the fact, not the sentence copied
    code = code_drafts("/// Parses the pressure log into samples.\npub fn parse_log(s: &str) -> Vec<Sample> {\n")
    assert [(d.query, d.answer) for d in code] == [("Which function parses the pressure log into samples?",
                                                    "parse_log")]


def test_the_well_formedness_check_names_what_it_drops() -> None:
    ok = dict(content=content_words)
    assert problem("Who directed The Pelican Rig?", answer="Henrik Aas", **ok) is None
    assert problem("uses the specific port how much by default?", **ok) == "does not open with a question word"
    assert problem("What was 1555-7 May 1633)?", **ok) == "unbalanced brackets or quotes"
    assert problem("Later also wrote which son in 1988?", **ok) == "does not open with a question word"
    assert problem("Which came first for the palme: … or …?", **ok) == "a slot or fragment left in it"
    assert problem("When was he born?", **ok) == "leans on text the reader cannot see (a pronoun subject)"
    assert problem("What does this method return?", **ok) == \
        "leans on text the reader cannot see (a pronoun subject)"
    assert problem("Who directed the film Henrik Aas made?", answer="Henrik Aas", **ok) == "gives its answer away"
    assert problem("Когда построили стенд?", **ok) == "not in its passage's language"
    assert problem("Когда построили стенд «Кречет»?", lang="ru", **ok) is None
    s = "The rig operator is Henrik Aas and Aas runs the bench."
    assert problem("Is the rig operator Henrik Aas and does Aas run the bench?", answer="x", evidence=s,
                   content=content_words) == "copies its evidence sentence"


def test_generated_set_is_well_formed_varied_and_reports_what_it_dropped() -> None:
    ps = _passages()
    got = generate_set(ps, 14, seed=1)
    assert got.items == generate(ps, 14, seed=1)  # seeded: the same set twice
    texts = {p.chunk.chunk_id: p.chunk.text for p in ps}
    for it in got.items:
        assert it.generator == "offline-v2"
        assert problem(it.query, lang=it.meta.get("lang", "en")) is None, it.query
        for g in it.gold:  # every gold span is a sentence of the chunk it names
            assert g.span in " ".join(texts[g.chunk].split())
        if it.answerable:
            assert it.gold and it.meta["overlap"] <= 0.75
    forms = {it.meta.get("fact") for it in got.items if it.qtype == "factoid"}
    assert {"who", "when"} <= forms and len(forms) >= 5  # varied forms, not one template
    queries = {it.query for it in got.items}
    # a multi-hop item only from a real link: the film's director is a document of the corpus
    hops = [it for it in got.items if it.qtype == "multi-hop"]
    assert hops and all(len({g.doc for g in it.gold}) == 2 for it in hops)
    assert any(q.startswith(("When was the director of", "What nationality is the director of", "Where was the "
                             "director of", "What does the director of")) for q in queries)
    # comparisons only of two items with the same attribute
    cmps = [it for it in got.items if it.qtype == "comparison"]
    assert all(it.meta["fact"].split(":")[1] in ("born", "died", "year", "nationality", "country", "directed")
               for it in cmps)
    ru = [it for it in got.items if it.meta.get("lang") == "ru"]
    assert ru and all(re.search("[а-яё]", it.query, re.I) for it in ru)  # Russian documents, Russian questions
    assert isinstance(got.dropped, dict)


def test_near_misses_change_one_constraint_and_are_absent() -> None:
    ps = _passages()
    index = CorpusIndex(ps)
    misses = [it for it in generate(ps, 30, seed=3) if not it.answerable]
    assert misses
    for it in misses:
        assert not it.gold and it.meta["swap"] and problem(it.query, lang=it.meta.get("lang", "en")) is None
        kind, _, change = it.meta["swap"].partition(" ")
        old, new = change.split(" -> ")
        if kind == "subject":
            assert not index.contains(new.casefold()) and new in it.query
        elif kind == "year":
            assert not index.contains(new)
        elif kind == "attribute":  # asks for a death date of someone the corpus gives only a birth for
            assert it.query.endswith("die?") and not index.together([it.meta["subject"], "died"])


def test_overlap_measure() -> None:
    s = "The rig operator is Henrik Aas."
    assert overlap("Who runs the Pelican test bench?", s) == 0.0
    assert overlap("The rig operator is Henrik Aas?", s) == 1.0


def test_cli_generate_list_export_round_trip(tmp_path, capsys) -> None:
    db = tmp_path / "w.duckdb"
    store = Store(db)
    for name, (title, lang, chunks) in DOCS.items():
        text = "\n\n".join(chunks)
        store.corpus.put_document(Document(name, name, "md", len(text), "h" + name, lang, text, "t", "default", title),
                                  [Chunk(f"{name}-{i}", name, i, c, 0, len(c), (), len(c.split()), lang)
                                   for i, c in enumerate(chunks)], None, "m")
    assert len(passages_from(store.corpus, "default")) == 6
    store.close()
    assert main(["golden", "generate", "--db", str(db), "--n", "10", "--name", "g1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["name"] == "g1" and report["items"] == sum(report["by_type"].values()) > 0
    assert isinstance(report["dropped"], dict)
    out = tmp_path / "g1.jsonl"
    assert main(["golden", "export", "g1", "--db", str(db), "--out", str(out)]) == 0
    back = load_jsonl_file(out)
    assert not back.problems and len(back.queries) == report["items"]
    line = json.loads(out.read_text().splitlines()[0])
    assert {"id", "query", "gold", "answer", "answerable", "type"} <= set(line)
    # the stored set carries its generator and what it dropped: the validity report reads them
    from core.eval.datasets import load_dataset
    s = Store(db, read_only=True)
    gs = load_dataset("golden:default/g1", store=s)
    s.close()
    assert gs.generator == "offline-v2" and "dropped" in gs.generation
    assert main(["golden", "export", "nope", "--db", str(db), "--out", str(out)]) == 2
    assert main(["golden", "generate", "--db", str(db), "--workspace", "empty", "--n", "5"]) == 2


def _one(text: str, title: str = "", lang: str = "en") -> dict[str, str]:
    from core.eval.golden import drafts_of

    p = Passage(Chunk("c0", "d0", 0, text, 0, len(text), (), len(text.split()), lang), "d0", title)
    return {d.query: d.answer for d in drafts_of(p)}


def test_reference_prose_asks_what_a_reader_looks_up() -> None:
    got = _one("The cache keeps replies for a while.\n\n"
               "- `max_age` (default: 600): how long a reply stays in the cache.\n"
               "- `retries`: Limits the number of attempts per request.\n\n"
               "`parse()` accepts a bytes object and returns a dictionary of settings.\n")
    assert got["What is the default value of `max_age`?"] == "600"
    assert got["Which option limits the number of attempts per request?"] == "`retries`"
    assert got["What does `parse()` accept?"] == "a bytes object"
    # a 'Defaults to' line belongs to the parameter named above it
    assert _one("timeout (float): seconds to wait for a reply.\n    Defaults to 30.\n")[
        "What is the default value of `timeout`?"] == "30"
    # a package's header fields: its licence and the Python it needs
    head = _one("Metadata-Version: 2.4\nName: tinypkg\nVersion: 1.0\nLicense: MIT\nRequires-Python: >=3.9\n")
    assert head["Under which licence is tinypkg released?"] == "MIT"
    assert head["Which Python versions does tinypkg require?"] == ">=3.9"


def test_reference_prose_in_russian_gets_russian_questions() -> None:
    got = _one("`timeout` (по умолчанию 30) задаёт время ожидания ответа.\n"
               "`load()` возвращает словарь с настройками проекта.", lang="ru")
    assert got["Какое значение по умолчанию у `timeout`?"] == "30"
    assert got["Что возвращает `load()`?"] == "словарь с настройками проекта"
    for q in got:
        assert problem(q, lang="ru") is None, q


def test_readme_examples_and_markup_never_become_questions() -> None:
    text = ("Tinypkg reads settings files quickly. See the [docs](https://example.org/docs) for more.\n\n"
            "```python\ndef helper_fn(x):\n    return x + 1\n\nclass Thing:\n    pass\n```\n"
            "Parse Python docstrings in reST.\n")
    got = _one(text)
    assert not any("helper_fn" in q or "Thing" in q or "http" in q or "Parse" in q for q in got), got


def test_wikipedia_style_sentences_give_standalone_questions() -> None:
    got = {d.query: d.answer for d in english_drafts("In 1830, France took control of Algeria.", "Imperialism",
                                                       names=frozenset({"France"}))}
    assert got["When did France take control of Algeria?"] == "1830"
    assert got["Who took control of Algeria in 1830?"] == "France"
    named = {d.query: d.answer for d in english_drafts(
        "The entire international conflict is known as the Seven Years' War.", "")}
    assert named["What is the entire international conflict known as?"] == "the Seven Years' War"
    # 'He' in an article titled 'Force' is no person the reader can name: no question rather than a wrong one
    assert english_drafts("He distinguished between the innate tendency of objects and forced motion.", "Force") == []
    # a long object is cut at its first preposition, not copied whole
    obj = {d.query: d.answer for d in english_drafts(
        "Turabi built a powerful economic base with money from foreign banking systems.", "",
        names=frozenset({"Turabi"}))}
    assert obj["What did Turabi build?"] == "a powerful economic base"


def test_russian_subject_verb_sentences_give_kto_and_chto_questions() -> None:
    from core.eval.golden_ru import russian_svo_drafts

    got = {d.query: d.answer for d in russian_svo_drafts("Ольга Сомова построила новый стенд в 2019 году.")}
    assert got["Кто построил новый стенд?"] == "Ольга Сомова"  # the verb agrees with Кто
    assert got["Когда Ольга Сомова построила новый стенд?"] == "2019"
    got = {d.query: d.answer for d in russian_svo_drafts("Глобальный ледяной покров повысил уровень воды в океане.")}
    assert got["Что повысило уровень воды?"] == "Глобальный ледяной покров"  # Что takes the neuter
    # a noun that looks like a past verb ('чисел') and an object-first order give nothing
    assert russian_svo_drafts("Концепция простых чисел настолько важна для математики.") == []
    assert russian_svo_drafts("Первых методистских священников рукоположил в сан Джон Уэсли.") == []


def test_near_miss_swaps_a_whole_name_of_the_same_kind_and_checks_it_absent() -> None:
    from core.eval.golden import CorpusIndex, Drafted, near_miss

    texts = ["In 1830 the engineer Isaac Newton unified the gravity tables for the survey.",
             "The surveyor Fred Anderson measured the northern coast with Hanna Berg."]
    ps = [Passage(Chunk(f"c{i}", f"d{i}", 0, t, 0, len(t), (), len(t.split()), "en"), f"d{i}", "") for i, t in
          enumerate(texts)]
    d = english_drafts("Isaac Newton unified the gravity tables for the survey.", "", names=frozenset())[0]
    import random
    got = near_miss(Drafted(ps[0], d), CorpusIndex(ps), [], set(), random.Random(0),
                    names=["Fred Anderson", "Hanna Berg", "Isaac Newton"])
    assert got is not None and got[1].startswith("name Isaac Newton -> ")
    q = got[0]
    assert "Isaac Newton" not in q and ("Fred Anderson" in q or "Hanna Berg" in q)


def test_a_question_that_names_nothing_is_dropped_with_its_reason() -> None:
    cw = content_words
    assert problem("What is the fallback?", content=cw) == \
        "names nothing a reader could look up (no name, code, number or specific term)"
    assert problem("What is the version derived from?", content=cw) is not None
    assert problem("What does `max_age` default to?", content=cw) is None  # code names it
    assert problem("What does insulin resistance increase?", content=cw, specific=lambda w: w == "insulin") is None
    assert problem("What does the simplest form use?", content=cw, specific=lambda w: False) is not None


def test_subclauses_adverbs_passives_and_known_as_give_questions() -> None:
    def qs(text: str, names: frozenset[str] = frozenset()) -> dict[str, str]:
        return {d.query: d.answer for d in english_drafts(text, "", names=names)}

    assert qs("A simple but slow method of checking primality is known as trial division.")[
        "What is a simple but slow method of checking primality known as?"] == "trial division"
    assert qs("While studying law in England, Iqbal became a member of the London branch of the League.",
              frozenset({"Iqbal"}))["What did Iqbal become?"] == "a member of the London branch"
    assert qs("The first Methodist clergy were ordained by John Wesley.")[
        "Who ordained the first Methodist clergy?"] == "John Wesley"
    assert qs("The Rhine Gorge was created by erosion over millions of years.")[
        "What created the Rhine Gorge?"].startswith("erosion")
    # a vague subject names nothing a reader can find: no question
    assert qs("The conformational change is elicited by cooperative rearrangements.") == {}
