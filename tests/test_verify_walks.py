"""The answer check on package descriptions (issue #42, the METADATA walks): a version asked, a name met only in a
web address, a minimum stated as a bound, the thing a software noun's 'of' names, a value literal beside the asked
name, a setting under its document's title. Invented packages, known answers, no model."""
from __future__ import annotations

from core.answer.attributes import asked_attribute, subject_names
from core.answer.verify import Evidence, check, question_constraints
from core.config import PipelineConfig


def _unmet(q: str, ev: Evidence) -> list[tuple[str, str]]:
    return [(v.constraint.kind, v.constraint.text) for v in check(q, ev).unmet]


def test_a_version_asked_needs_a_sentence_that_states_one() -> None:
    q = "In which version was the alpha package import name removed?"
    attr = asked_attribute(q)
    assert attr is not None and attr.value == "version" and attr.keys == ()  # no field line is preferred for it
    assert ("asks", "a version") in [(c.kind, c.text) for c in question_constraints(q)]
    stays = "The classic APIs and the `alpha` package import name will remain **indefinitely**."
    assert ("asks", "a version") in _unmet(q, Evidence(stays, stays, "", "alphalib"))
    added = "In which version was the alpha package import name added?"
    assert check(added, Evidence("The `alpha` package import name has been added in version 21.3.0.")).ok
    assert asked_attribute("Which version of HTTP does betatool implement?") is not None
    assert asked_attribute("В какой версии появился betatool?") is not None


def test_a_name_inside_a_web_address_is_no_mention_of_it() -> None:
    q = "Which version of Acmeweb does Betatool require?"
    chunk = ("Project-URL: Homepage, https://github.com/acmeweb/betatool\n\nSince version 0.26.0, Betatool has "
             "vendored Click.")
    assert ("entity", "Acmeweb") in _unmet(q, Evidence("Project-URL: Homepage, https://github.com/acmeweb/betatool",
                                                       chunk, "", "betatool"))
    later = _unmet(q, Evidence("Since version 0.26.0, Betatool has vendored Click.", chunk, "", "betatool"))
    assert ("entity", "Acmeweb") in later and ("asks", "a version") in later  # the version is another thing's
    assert ("entity", "Acmeweb") not in _unmet(q, Evidence("It runs on Acmeweb. Since version 0.26.0, Betatool has "
                                                           "vendored Click.", chunk, "", "betatool"))


def test_a_lower_bound_states_the_minimum_and_an_upper_bound_does_not() -> None:
    q = "Which minimum Python version does alphalib require?"
    assert check(q, Evidence("Requires-Python: >=3.10", "Name: alphalib\nRequires-Python: >=3.10", "", "alphalib")).ok
    q2 = "Which minimum version of gammalib does alphalib require?"
    assert check(q2, Evidence("Requires-Dist: gammalib>=22.2.0", "Name: alphalib\nRequires-Dist: gammalib>=22.2.0",
                              "", "alphalib")).ok
    assert check(q2, Evidence("It needs gammalib 2.1 or later.", "", "", "alphalib")).ok
    assert ("superlative", "minimum") in _unmet(q2, Evidence("Requires-Dist: gammalib<5", "Name: alphalib\n"
                                                             "Requires-Dist: gammalib<5", "", "alphalib"))


def test_a_lower_case_name_after_a_software_noun_and_of_is_the_thing_asked_about() -> None:
    assert subject_names("Which tool derives the version of alphalib from the git tag?") == ["alphalib"]
    q = "Which tool derives the version of alphalib from the git tag?"
    other = "The version is derived from the git tag by ``setuptools_scm``."
    assert ("entity", "alphalib") in _unmet(q, Evidence(other, other, "", "betatool"))


def test_a_value_literal_is_no_sibling_of_the_asked_name() -> None:
    q = "What does is_interesting return for literals?"
    chunk = ("In general `is_interesting` returns False for the following values:\n- Literals (e.g. `123`)\n"
             "- Builtins referred to by their usual name.")
    assert check(q, Evidence("In general `is_interesting` returns False for the following values:", chunk, "",
                             "alphalib")).ok


def test_a_setting_under_its_documents_own_title_is_that_documents() -> None:
    q = "What is the default value of allow_nan in alphalib's from_text?"
    chunk = "The API is minimal:\n\n```python\ndef from_text(\n    data: bytes,\n    allow_nan: bool = True,\n)\n```"
    ck = check(q, Evidence("allow_nan: bool = True,", chunk, "alphalib", "alphalib"))
    assert ("entity", "from_text") not in [(v.constraint.kind, v.constraint.text) for v in ck.unmet]
    # under another setting's heading, it is still that setting's sentence
    ck2 = check(q, Evidence("allow_nan: bool = True,", chunk, "from_bytes", "alphalib"))
    assert ("entity", "from_text") in [(v.constraint.kind, v.constraint.text) for v in ck2.unmet]


def test_a_default_given_as_a_signature_parameter_is_stated() -> None:
    from core.answer.attributes import assigned_default, states_value
    q = "What is the default float_mode of alphalib's from_text?"
    line = "float_mode: Literal['float', 'decimal', 'lossless-float'] = 'float',"
    assert assigned_default(line, q) and not assigned_default("def from_text(", q)
    assert not assigned_default("cache_mode: Literal[True, False] = 'all',", q)  # another parameter's default
    assert not assigned_default("You need to pass `float_mode=0` if the data is large.", q)  # a call's argument
    assert assigned_default("def from_text(data, float_mode='float'):", q)
    attr = asked_attribute(q)
    assert attr is not None and states_value(line, attr, question=q)
    assert check(q, Evidence(line, "def from_text(\n    " + line + "\n)", "alphalib", "alphalib")).ok


def _metadata(classifiers: int) -> bytes:
    head = ["Metadata-Version: 2.4", "Name: alphalib", "Version: 1.2.0", "Summary: Tables for terminals",
            "License-Expression: MIT"]
    head += [f"Classifier: Topic :: Subject {i} :: Item {i}" for i in range(classifiers)]
    head += ["Requires-Python: >=3.11", "Requires-Dist: betalib>=2", "Description-Content-Type: text/markdown", "",
             "# alphalib", "", "Alphalib draws tables in terminals and needs betalib."]
    return "\n".join(head).encode()


def test_a_header_cut_into_chunks_hands_on_the_chunk_with_the_asked_field(store) -> None:  # noqa: ANN001
    from types import SimpleNamespace

    from core.answer.attributes import header_gap
    from core.deps import Deps
    from core.ingest.pipeline import ingest_files
    from core.pipeline import _header_fields
    from core.types import DEFAULT_WORKSPACE, Candidate
    from tests.fakes import HashEmbedder

    q = "Which Python version does alphalib require?"
    assert header_gap(q, ["Name: alphalib\nClassifier: A :: B\nClassifier: C :: D"]) is not None
    assert header_gap(q, ["Name: alphalib\nClassifier: A :: B\nRequires-Python: >=3.9"]) is None  # the line is there
    assert header_gap(q, ["Alphalib draws tables."]) is None  # no header handed on
    assert header_gap("What does alphalib draw?", ["Name: alphalib\nClassifier: A :: B\nClassifier: C"]) is None
    emb = HashEmbedder()
    cfg = PipelineConfig()
    ingest_files([("alphalib.md", _metadata(30))], store=store, embedder=emb, config=cfg)
    chunks = store.corpus.chunks()
    first = chunks[0]
    assert "Requires-Python" not in first.text and any("Requires-Python" in c.text for c in chunks[1:3])
    query = SimpleNamespace(text=q, workspace=DEFAULT_WORKSPACE, rows=SimpleNamespace(chunks={}, no_chunk=set()))
    got = _header_fields(query, [Candidate(first.chunk_id, first.doc_id, first.text, 1.0, 1)], cfg,
                         Deps(store=store, embedder=emb))
    assert [c.chunk_id for c in got][0] == first.chunk_id and "Requires-Python: >=3.11" in got[1].text
    # another package's header handed on beside it states its own Requires-Python: alphalib's gap stays a gap
    ingest_files([("betalib.md", b"Metadata-Version: 2.4\nName: betalib\nVersion: 2.0\nRequires-Python: >=3.8\n\n"
                                 b"# betalib\n\nBetalib helps.\n")], store=store, embedder=emb, config=cfg)
    beta = next(c for c in store.corpus.chunks() if c.doc_id != first.doc_id)
    query2 = SimpleNamespace(text=q, workspace=DEFAULT_WORKSPACE, rows=SimpleNamespace(chunks={}, no_chunk=set()))
    both = _header_fields(query2, [Candidate(beta.chunk_id, beta.doc_id, beta.text, 1.0, 1),
                                   Candidate(first.chunk_id, first.doc_id, first.text, 0.9, 2)], cfg,
                          Deps(store=store, embedder=emb))
    assert [c.doc_id for c in both] == [beta.doc_id, first.doc_id, first.doc_id]
    assert "Requires-Python: >=3.11" in both[2].text
    # the chunk with the line ranked below the answerer's cut (answer.max_chunks) is moved up beside its neighbour
    query3 = SimpleNamespace(text=q, workspace=DEFAULT_WORKSPACE, rows=SimpleNamespace(chunks={}, no_chunk=set()))
    line = next(c for c in chunks if "Requires-Python" in c.text)
    filler = [Candidate(f"x{i}", "dx", "Filler text.", 0.5, i + 2) for i in range(cfg.answer.max_chunks)]
    moved = _header_fields(query3, [Candidate(first.chunk_id, first.doc_id, first.text, 1.0, 1), *filler,
                                    Candidate(line.chunk_id, line.doc_id, line.text, 0.1, 99)], cfg,
                           Deps(store=store, embedder=emb))
    assert [c.chunk_id for c in moved[:2]] == [first.chunk_id, line.chunk_id]
    assert [c.chunk_id for c in moved].count(line.chunk_id) == 1
    other = SimpleNamespace(text="What does alphalib draw?", workspace=DEFAULT_WORKSPACE,
                            rows=SimpleNamespace(chunks={}, no_chunk=set()))
    assert len(_header_fields(other, [Candidate(first.chunk_id, first.doc_id, first.text, 1.0, 1)], cfg,
                              Deps(store=store, embedder=emb))) == 1


def test_the_parameter_line_with_the_asked_settings_default_leads_the_answer() -> None:
    from core.answer.stage import with_value_first
    from core.answer.support import SentenceRow

    texts = ["Defaults to True. cache_mode: cache strings to improve performance",
             "allow_nan: Whether to allow NaN values.", "float_mode: Literal['float', 'decimal'] = 'float',"]
    rows = [SentenceRow("c1", "d", 1, t, (0, len(t)), ()) for t in texts]
    q = "What is the default float_mode of alphalib's from_text?"
    assert with_value_first(q, rows, [3.0, 2.0, 0.5], [0, 1], max_sentences=3) == [2, 0, 1]
    assert with_value_first("What is the default mode of alphalib?", rows, [3.0, 2.0, 0.5], [0, 1],
                            max_sentences=3) == [0, 1]  # no setting named as code: the lead stating a default stays


def test_a_changelog_item_states_the_version_of_its_release_heading() -> None:
    q = "In which version did alphalib decrease its import time?"
    item = "* Decrease import time by delaying imports (#1416)."
    assert check(q, Evidence(item, "v4.26.0\n=======\n\n" + item, "alphalib / Release Information / v4.26.0",
                             "alphalib")).ok
    assert ("asks", "a version") in _unmet(q, Evidence(item, item, "alphalib / Release Information", "alphalib"))


def test_a_later_quote_naming_the_asked_thing_must_share_a_whole_word_with_the_question() -> None:
    from core.answer.verify import ChunkText, verify_quotes
    q = "Which tool derives the version of alphalib from the git tag?"
    lead = "The version is derived from the git tag by ``setuptools_scm``."
    later = "``alphalib`` is on `GitHub <https://github.com/example/alphalib>`_."
    text = f"{lead} [c1] {later} [c2]"
    got = verify_quotes(q, text, ["c1", "c2"], {"c1": ChunkText(lead, "", "betatool"),
                                                "c2": ChunkText(later, "", "alphalib")}, refusal="No.")
    assert got.refused  # 'GitHub' is no 'git': the later quote says nothing of the question


def test_a_dependency_line_is_about_the_package_it_names() -> None:
    q = "Which minimum version of gammalib does alphalib require?"
    chunk = "Name: alphalib\nRequires-Dist: gamma-specs>=2023.03.6\nRequires-Dist: gammalib>=22.2.0"
    other = check(q, Evidence("Requires-Dist: gamma-specs>=2023.03.6", chunk, "", "alphalib"))
    assert [(v.constraint.text, v.instead) for v in other.unmet if v.constraint.kind == "entity"] == [
        ("gammalib", ("gamma-specs",))]
    assert check(q, Evidence("Requires-Dist: gammalib>=22.2.0", chunk, "", "alphalib")).ok
    py = "Which Python version does alphalib require?"
    assert ("entity", "Python") in _unmet(py, Evidence("Requires-Dist: typing-extensions>=4.10.0; python_version < "
                                                       "'3.13'", chunk, "", "alphalib"))


def test_a_cross_lingual_answer_leads_with_the_line_that_states_the_asked_field() -> None:
    from core.answer.crosslingual import cross_answer
    from core.types import Candidate

    class Reader:  # the multilingual encoder's ranking: the line that repeats 'license' first
        def score(self, question: str, texts: list[str]) -> list[float]:
            return [0.9 if "License-File" in t else 0.85 if "License-Expression" in t else 0.5 for t in texts]

    head = "Name: alphalib\nVersion: 1.0\nLicense-Expression: Apache-2.0\nLicense-File: COPYING\n"
    got, _, _ = cross_answer("Под какой лицензией распространяется alphalib?",
                             [Candidate("c1", "alphalib", head, 1.0, 1)], Reader(), titles={"alphalib": "alphalib"},
                             refusal="No.")
    assert got.text.startswith("License-Expression: Apache-2.0")


def test_a_name_that_opens_in_lower_case_and_goes_on_in_capitals_is_checked() -> None:
    q = "Which alphalib function lists the services on macOS?"
    assert ("entity", "macOS") in [(c.kind, c.text) for c in question_constraints(q)]
    assert ("entity", "macOS") in _unmet(q, Evidence("alphalib.win_service_iter() lists Windows services."))
    assert check(q, Evidence("On macOS, alphalib.services() lists them.")).ok
    assert ("entity", "iPhone") in [(c.kind, c.text) for c in question_constraints("When was the iPhone released?")]


def test_the_named_records_header_field_joins_when_no_chunk_of_it_states_the_asked_field(store) -> None:  # noqa: ANN001
    from types import SimpleNamespace

    from core.deps import Deps
    from core.ingest.pipeline import ingest_files
    from core.pipeline import _header_fields
    from core.types import DEFAULT_WORKSPACE, Candidate
    from tests.fakes import HashEmbedder

    head = ["Metadata-Version: 2.4", "Name: alphalib", "Version: 1.2.0", "Author: Ada Quill",
            "License-Expression: MIT"] + [f"Classifier: Topic :: Subject {i} :: Item {i}" for i in range(12)]
    body = ["", "# alphalib", ""] + [f"Alphalib draws table number {i} in a terminal, with borders of every kind and "
                                     f"colours chosen by the user's theme; section {i} explains the options." for i in
                                     range(40)]
    emb, cfg = HashEmbedder(), PipelineConfig()
    ingest_files([("alphalib.md", "\n".join(head + body).encode())], store=store, embedder=emb, config=cfg)
    chunks = store.corpus.chunks()
    header = next(c for c in chunks if "Author: Ada Quill" in c.text)
    late = [c for c in chunks if c.ordinal > header.ordinal + 2]
    assert late, "the fixture needs body chunks far from the header"
    cands = [Candidate(c.chunk_id, c.doc_id, c.text, 1.0 - i / 10, i + 1) for i, c in enumerate(late[:3])]

    def query(text: str) -> SimpleNamespace:
        return SimpleNamespace(text=text, workspace=DEFAULT_WORKSPACE,
                               rows=SimpleNamespace(chunks={}, no_chunk=set(), heads={}, no_doc=set()))

    got = _header_fields(query("Who is the author of alphalib?"), cands, cfg, Deps(store=store, embedder=emb))
    assert [c.chunk_id for c in got][:2] == [late[0].chunk_id, header.chunk_id]
    # another record asked about, or no field attribute asked: the candidates stay as they were
    for q in ("Who is the author of betalib?", "What does alphalib draw?"):
        assert [c.chunk_id for c in _header_fields(query(q), cands, cfg, Deps(store=store, embedder=emb))] == \
            [c.chunk_id for c in cands]


def test_a_setting_asked_is_not_met_by_a_sentence_about_another_setting() -> None:
    chunk = "Options: `max_array_len`, `max_map_len`.\n\n`max_buffer_size` (default: `100*1024*1024`) limits the buffer."
    ev = Evidence("`max_buffer_size` (default: `100*1024*1024`) limits the buffer.", chunk, "msgpack", "msgpack")
    ck = check("What is the default value of max_array_len in msgpack?", ev)
    bad = [v for v in ck.unmet if v.constraint.text == "max_array_len"]
    assert bad and bad[0].instead == ("max_buffer_size",)
    assert check("What is the default value of max_buffer_size in msgpack?", ev).ok


def test_german_questions_ask_the_same_attributes_as_english_ones() -> None:
    cases = {"Welche Python-Version benötigt cloudpickle?": "the required Python version",
             "Unter welcher Lizenz wird msgpack veröffentlicht?": "a license",
             "Wer ist der Autor von msgpack?": "an author", "Wer betreut pypdf?": "a maintainer",
             "Was ist der Standardwert von max_buffer_size?": "a default value",
             "In welcher Version wurden die modernen APIs von attrs eingeführt?": "a version",
             "Welches ist die älteste pandas-Version, die joblib unterstützt?": "a version",
             "What is the oldest pandas version joblib supports?": "a version"}
    for q, name in cases.items():
        attr = asked_attribute(q)
        assert attr is not None and attr.name == name, q
    assert asked_attribute("Wer hat Vega-Altair ursprünglich entwickelt?") is None  # as 'Who originally developed'


def test_a_setting_and_its_function_asked_leave_the_functions_other_parameters_alone() -> None:
    from core.answer.verify import ChunkText, verify_quotes
    q = "What is the default float_mode of alphalib's from_text?"
    sig = "def from_text(\n    data: bytes,\n    float_mode: Literal['float', 'decimal'] = 'float',\n)"
    doc = "Defaults to True. cache_mode: cache strings to improve performance at the cost of memory"
    line = "float_mode: Literal['float', 'decimal'] = 'float',"
    got = verify_quotes(q, f"{line} [c1] {doc} [c2]", ["c1", "c2"],
                        {"c1": ChunkText(sig, "", "alphalib"), "c2": ChunkText(doc + "\nfrom_text reads bytes.", "",
                                                                                  "alphalib")}, refusal="No.")
    assert not got.refused and "float_mode" in got.text
