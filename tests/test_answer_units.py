"""Answer units on reference documents (issue #42 items 1-2): line structure, the asked attribute, the thing asked
about. Tiny fixtures written here (invented packages), no model."""
from __future__ import annotations

from core.answer.attributes import asked_attribute, field_first, field_states, states_value, subject_names
from core.answer.support import claim_spans
from core.answer.units import units
from core.answer.verify import ChunkText, question_constraints, verify_quotes

HEADER = ("Metadata-Version: 2.4\nName: alphalib\nVersion: 2.0.1\nSummary: Tables for terminals\n"
          "Author: Jane Q. Public\nAuthor-email: Jane Q. Public <jane@example.org>\nLicense-Expression: MIT\n"
          "Classifier: License :: OSI Approved :: MIT License\nClassifier: Topic :: Text Processing\n"
          "Requires-Python: >=3.9\nLicense-File: LICENSE\n\n# alphalib\n\nThe package requires no compiler.\n")
PYDOC = ("Documentation\n\n```\n    set_precision(self, width)\n        Set the desired precision for float formats\n\n"
         "        - width must be an integer >= 0\n\n        - default value is set to 3\n\n"
         "    >>> table.set_precision(2)\n    >>> print(table.draw())\n```\n")
EXAMPLE = ("Use the writer like this:\n\n```python\nimport alphalib\nw = alphalib.Writer(precision=3)\n"
           "w.write(rows)  # the default precision is used\n```\n\nThe writer keeps rows in memory.\n")


def _claims(text: str) -> list[str]:
    return [" ".join(text[s:e].split()) for s, e in claim_spans(text)]


def test_a_run_of_fields_is_read_line_by_line() -> None:
    claims = _claims(HEADER)
    assert "License-Expression: MIT" in claims and "Requires-Python: >=3.9" in claims
    assert "Author: Jane Q. Public" in claims  # never cut at the initial's full stop
    assert not any("Classifier" in c and "Requires-Python" in c for c in claims)  # no flattened run
    assert "The package requires no compiler." in claims


def test_code_lines_are_never_quoted_but_docstring_lines_are() -> None:
    claims = _claims(PYDOC)
    assert "- default value is set to 3" in claims and "Set the desired precision for float formats" in claims
    assert not any(">>>" in c or "set_precision(self" in c for c in claims)
    ex = _claims(EXAMPLE)
    assert ex == ["Use the writer like this:", "The writer keeps rows in memory."]
    assert {u.kind for u in units(EXAMPLE) if "alphalib" in EXAMPLE[u.start:u.end]} == {"code"}


def test_the_asked_attribute_and_the_thing_asked_about() -> None:
    lic = asked_attribute("Under which license is alphalib released?")
    assert lic is not None and lic.value == "license"
    assert field_states("License-Expression: MIT", lic) and field_states("License: BSD", lic)
    assert not field_states("License-File: LICENSE", lic) and not field_states(
        "Classifier: License :: OSI Approved :: MIT License", lic)
    py = asked_attribute("Which Python version does alphalib require?")
    assert py is not None and field_states("Requires-Python: >=3.9", py)
    assert not states_value("The package requires no compiler.", py)
    # a classifier lists a supported version, it requires none; a license classifier does name the license
    assert not states_value("Classifier: Programming Language :: Python :: 3.7", py)
    assert states_value("Classifier: License :: OSI Approved :: MIT License", lic)
    ru = asked_attribute("Под какой лицензией распространяется alphalib?")
    assert ru is not None and ru.value == "license"
    assert asked_attribute("Кто автор пакета betatool?") is not None
    assert subject_names("Who is the author of alphalib?") == ["alphalib"]
    assert subject_names("What is the default precision of alphalib's float formats?") == ["alphalib"]
    assert subject_names("Кто автор пакета betatool?") == ["betatool"]
    assert subject_names("Who founded Acme?") == []  # a capitalised name is the constraint check's own
    dflt = asked_attribute("What is the default precision of alphalib?")
    assert dflt is not None and dflt.value == "default"
    assert states_value("- default value is set to 3", dflt, question="What is the default precision of alphalib?")
    assert not states_value("The precision can be changed at any time; see the default settings.", dflt,
                            question="What is the default precision of alphalib?")


def test_the_field_line_of_the_package_asked_about_leads() -> None:
    other = HEADER.replace("alphalib", "betatool").replace("License-Expression: MIT", "License-Expression: GPL-3.0")
    texts = ["The package requires no compiler.", "License-Expression: GPL-3.0", "License-Expression: MIT",
             "Classifier: License :: OSI Approved :: MIT License"]
    homes = [HEADER + " alphalib.md", other + " betatool.md", HEADER + " alphalib.md", HEADER + " alphalib.md"]
    got = field_first("Under which license is alphalib released?", texts, homes, [2.0, 1.5, 0.5, 1.8], [0, 3],
                      max_sentences=3)
    assert got[0] == 2  # alphalib's line, not betatool's better-scored one, nor the question's words
    assert field_first("Under which license is gammakit released?", texts, homes, [2.0, 1.5, 0.5, 1.8], [0, 3],
                       max_sentences=3) == [0, 3]  # no line of the thing asked about: the check decides


def test_verify_asks_for_the_package_and_a_value() -> None:
    kinds = {(c.kind, c.text) for c in question_constraints("Which Python version does betatool require?")}
    assert ("entity", "betatool") in kinds and ("asks", "the required Python version") in kinds
    chunks = {"a1": ChunkText(HEADER, "", "alphalib.md")}
    # another package's field line: refused, naming the package asked about
    v = verify_quotes("Which Python version does betatool require?", "Requires-Python: >=3.9 [a1]", ["a1"], chunks,
                      refusal="The corpus does not say.")
    assert v.refused and "betatool" in v.text
    ok = verify_quotes("Which Python version does alphalib require?", "Requires-Python: >=3.9 [a1]", ["a1"], chunks,
                       refusal="The corpus does not say.")
    assert not ok.refused and ok.info.action == "passed"
    # the package's own sentence with no value of the asked kind: refused
    none = verify_quotes("Which Python version does alphalib require?", "The package requires no compiler. [a1]",
                         ["a1"], chunks, refusal="The corpus does not say.")
    assert none.refused and "required Python version" in none.text
    # the author's field line names the author (its key is 'Author-email')
    auth = verify_quotes("Who is the author of alphalib?", "Author-email: Jane Q. Public <jane@example.org> [a1]",
                         ["a1"], chunks, refusal="The corpus does not say.")
    assert not auth.refused


def test_a_list_item_goes_on_about_the_setting_the_item_before_names() -> None:
    doc = ("BORDER\n\n    __init__(self, max_width=80)\n        Constructor\n\n"
           "        - max_width is an integer, specifying the maximum width of the table\n"
           "        - if set to 0, size is unlimited, therefore cells won't be wrapped\n")
    chunks = {"c1": ChunkText(doc, "", "alphalib.md")}
    q = "What happens when alphalib's max_width is set to 0?"
    v = verify_quotes(q, "- if set to 0, size is unlimited, therefore cells won't be wrapped [c1]", ["c1"], chunks,
                      refusal="The corpus does not say.")
    assert not v.refused, v.text
    lone = {"c2": ChunkText("### border_width\n\nIf set to 0, size is unlimited.\n\nmax_width is documented "
                            "elsewhere.", "", "alphalib.md")}
    far = verify_quotes(q, "If set to 0, size is unlimited. [c2]", ["c2"], lone, refusal="The corpus does not say.")
    assert far.refused and "border_width" in far.text  # under another setting's heading, away from max_width


def test_a_header_field_is_about_the_record_its_name_line_names() -> None:
    hdr = "Metadata-Version: 2.1\nName: deltapkg\nAuthor: D. Brown\nLicense: Apache-2.0\nRequires-Dist: numpy\n"
    chunks = {"h": ChunkText(hdr, "", "deltapkg.md")}
    own = verify_quotes("Who is the author of deltapkg?", "Author: D. Brown [h]", ["h"], chunks, refusal="No.")
    assert not own.refused
    dep = verify_quotes("Who is the author of numpy?", "Author: D. Brown [h]", ["h"], chunks, refusal="No.")
    assert dep.refused and "numpy" in dep.text  # listed as a dependency, not the record the header describes
    ru = verify_quotes("Кто автор пакета numpy?", "Author: D. Brown [h]", ["h"], chunks, refusal="No.")
    assert ru.refused  # a Latin name in a Russian question is checked as written


def test_pydoc_margins_are_decoration() -> None:
    doc = ("```\n    class Grid\n     |  set_precision(self, width)\n     |      Set the desired precision for floats\n"
           "     |\n     |      - default value is set to 2\n```\n")
    claims = _claims(doc)
    assert "- default value is set to 2" in claims and "Set the desired precision for floats" in claims
    assert not any("set_precision(" in c or "|" in c for c in claims)


def test_the_field_of_the_record_named_is_found_for_any_phrasing() -> None:
    from core.answer.attributes import field_lines, record_names

    texts = ["License: BSD-3-Clause", "License-Expression: Apache-2.0", "Author: Marta Lindqvist",
             "Author-email: marta@example.org"]
    records = [record_names("Name: gridtext\nLicense: BSD-3-Clause", "gridtext.md"),
               record_names("Name: msgpack\nLicense-Expression: Apache-2.0", "msgpack.md")] + \
        [record_names("Name: gridtext\nAuthor: Marta Lindqvist", "gridtext.md")] * 2
    assert field_lines("Под какой лицензией распространяется gridtext?", texts, records) == [0]
    assert field_lines("Кто автор gridtext?", texts, records) == [2, 3]
    assert field_lines("Under which license is numpy released?", texts, records) == []
    assert field_lines("Under which license is it released?", texts, records) == []  # no record named
    assert field_first("What is the default precision of gridtext?", ["Set the precision for floats",
                       "- default value is set to 2"], ["", ""], [1.0, 0.5], [0, 1], max_sentences=3) == [1, 0]


def test_a_field_value_is_too_short_to_name_a_language() -> None:
    from core.answer.stage import quoted_language
    from core.types import Answer

    ans = Answer("License-Expression: MIT [a1]", ("a1",), False, "extractive")
    assert quoted_language("Under which license is alphalib released?", ans)[0].text == ans.text  # never 'German'


def test_a_chunk_that_opens_inside_a_code_block_and_numbered_items() -> None:
    text = ("python -m venv venv # create environment\nsource venv/bin/activate\n```\n\nInstalling with conda\n\n"
            "1. Download and install miniconda\n2. Install the package.\n\n```sh\nconda install alphalib\n```\n")
    assert _claims(text) == ["1. Download and install miniconda", "2. Install the package."]


def test_a_sentence_that_introduces_a_short_code_line_quotes_it() -> None:
    text = ("Install it with pip:\n\n```\npip install foo\n```\n\nFor AES encryption, install extra dependencies:\n\n"
            "```\npip install foo[crypto]\n```\n\nExample:\n\n```python\nimport foo\nr = foo.read(1)\nr.close()\n```\n")
    quoted = [" ".join(text[s:e].split()) for s, e in claim_spans(text)]
    assert "For AES encryption, install extra dependencies: ``` pip install foo[crypto] ```" in quoted
    assert not any("import foo" in q for q in quoted)  # a longer example is no answer line
    # a wrapper's tag line between the sentence and its block (rendered docs: '<div class="termy">')
    text2 = "First, install uv, and then add Foo to your project:\n\n<div class=\"termy\">\n\n```console\n$ uv add foo\n```\n\n</div>\n"
    quoted2 = [" ".join(text2[s:e].split()) for s, e in claim_spans(text2)]
    assert any("add Foo to your project:" in q and "uv add foo" in q for q in quoted2), quoted2


def test_a_sentence_that_introduces_a_short_list_quotes_it_and_a_long_list_is_left_alone() -> None:
    text = ("alphalib runs on these systems:\n\n- **Linux**\n- **Windows**\n- macOS\n\nIt needs Python 3.9.\n\n"
            "Options:\n\n" + "".join(f"- option {i} sets the value of the field number {i}\n" for i in range(12)))
    quoted = [" ".join(text[s:e].split()) for s, e in claim_spans(text)]
    assert "alphalib runs on these systems: - **Linux** - **Windows** - macOS" in quoted
    assert "Options:" not in " ".join(q for q in quoted if "option 0" in q)  # twelve items: no quote of them all


def test_a_hyphenated_program_name_and_a_call_are_read_as_names() -> None:
    assert subject_names("Which extra must be installed to use markdown-it-py with AES encryption?") == \
        ["markdown-it-py"]
    assert subject_names("What does Ge(x) mean in annotated-types?") == ["annotated-types"]
    assert subject_names("What is an end-to-end test?") == []
    # asked what Ge(x) means, a sentence about Gt(1.5) under a heading that lists both is the neighbouring fact
    v = verify_quotes("What does Ge(x) mean in annotated-types?", "`Annotated[int, Gt(1.5)]` is fine. [c]", ["c"],
                      {"c": ChunkText("### Gt, Ge, Lt, Le\n\n`Annotated[int, Gt(1.5)]` is fine.", "Gt, Ge, Lt, Le",
                                      "annotated-types")}, refusal="The corpus does not say.")
    assert v.refused and "Gt" in v.text


def test_a_sentence_that_points_back_to_a_command_quotes_it_and_an_option_is_a_name() -> None:
    text = "Install it:\n\n```shell\n$ pip install 'foo[fast]'\n```\n\nThis will install foo with compiled parts.\n"
    quoted = [" ".join(text[s:e].split()) for s, e in claim_spans(text)]
    assert "```shell $ pip install 'foo[fast]' ``` This will install foo with compiled parts." in quoted
    # asked what --workers uses, the sentence about --reload is the neighbouring fact
    assert [c.text for c in question_constraints("Which package does the --workers flag use?")] == ["--workers"]
    v = verify_quotes("Which package does the --workers flag use?", "The `--reload` flag will use `watchfiles`. [c]",
                      ["c"], {"c": ChunkText("The `--reload` flag will use `watchfiles`.")}, refusal="No.")
    assert v.refused and "--reload" in v.text


def test_a_changelog_item_is_quoted_with_its_release_heading_when_a_version_is_asked() -> None:
    from core.answer.stage import extractive_answer
    from core.types import Candidate
    log = ("Changelog\n---------\n\n2.4.0 (2024-03-02)\n++++++++++++++++++\n\n- Dropped support for Python 3.7\n"
           "- Faster table drawing\n\n2.3.1 (2023-11-20)\n++++++++++++++++++\n\n- Fixed wrapping of CJK text\n")
    c = [Candidate("alphalib-1", "alphalib", log, 1.0, 1)]
    a = extractive_answer("Which alphalib version dropped support for Python 3.7?", c, threshold=0.0).answer
    assert "Dropped support for Python 3.7" in a.text and "[2.4.0 (2024-03-02)]" in a.text, a.text
    b = extractive_answer("What does alphalib do with CJK text?", c, threshold=0.0).answer
    assert "[2.3.1" not in b.text  # no version asked: the quote stands alone


def test_a_changelog_item_under_a_subheading_is_quoted_with_its_section_release() -> None:
    from core.answer.stage import extractive_answer
    from core.types import Candidate
    # the release's heading line is above a 'New features' subheading, not right above the item's list
    log = ("-----------------\nGammaOS 5.2.0 - released 3 May 2025\n-----------------\nNew features\n"
           "- A dark theme for the settings screen.\n- The offline queue was raised from 12 to 36 hours of events.\n"
           "Changes\n")
    c = [Candidate("gamma-7", "gamma", log, 1.0, 1)]
    q = "Which GammaOS release raised the offline queue to 36 hours?"
    a = extractive_answer(q, c, threshold=0.0).answer
    assert "offline queue was raised" in a.text and "[GammaOS 5.2.0 - released 3 May 2025]" in a.text, a.text
    # a chunk that starts below its release's heading: the chunk's heading path names the release
    rest = "Changes\n- The offline queue was raised from 12 to 36 hours of events.\n- Faster start-up.\n"
    c = [Candidate("gamma-8", "gamma", rest, 1.0, 1)]
    a = extractive_answer(q, c, threshold=0.0, headings={"gamma-8": ("GammaOS notes", "GammaOS 5.2.0")}).answer
    assert "offline queue was raised" in a.text and "[GammaOS 5.2.0]" in a.text, a.text
    b = extractive_answer("How long can the GammaOS offline queue hold events?", c, threshold=0.0,
                          headings={"gamma-8": ("GammaOS notes", "GammaOS 5.2.0")}).answer
    assert "[GammaOS 5.2.0]" not in b.text  # no release asked: the quote stands alone


def test_a_list_item_with_its_indented_line_is_one_quotable_item() -> None:
    from core.answer.support import claim_spans

    text = ("- [Harbour Talk](https://example.org/harbour)\n  Cats and ships on the quay\n\n"
            "- [Quay Bytes](https://example.org/live/X7w?t=382)\n  Episode 402, topic #2\n")
    got = [" ".join(text[s:e].split()) for s, e in claim_spans(text)]
    assert "- [Quay Bytes](https://example.org/live/X7w?t=382) Episode 402, topic #2" in got
    assert not any(g == "Episode 402, topic #2" for g in got)


def test_a_parameter_line_with_its_default_is_quotable_other_code_is_not() -> None:
    from core.answer.support import claim_spans

    text = ("The API is small:\n\n```python\ndef load(\n    data: bytes,\n    /,\n    *,\n    strict_mode: bool = True,\n"
            "    number_mode: Literal['float', 'decimal'] = 'float',\n) -> Any:\n    x = compute(data)\n    "
            "return x\n```\n")
    got = [" ".join(text[s:e].split()) for s, e in claim_spans(text)]
    assert "number_mode: Literal['float', 'decimal'] = 'float'," in got and "strict_mode: bool = True," in got
    assert not any(g.startswith(("x = ", "return", "data: bytes", "def load")) for g in got)
    pydoc = "```\nclass Grid\n |  Methods defined here:\n |\n |  __init__(self, max_cols=12)\n |      Constructor\n```\n"
    assert "__init__(self, max_cols=12)" in [" ".join(pydoc[s:e].split()) for s, e in claim_spans(pydoc)]


TABLE = ("## Performance\n\nThis package is faster than Oldlib.\n\n"
         "| Package  | 99th percentile | 50th percentile |\n|----------|:---------------:|:---------------:|\n"
         "| oldlib   |   2.7 ms    |     0.2 ms      |\n| newlib | 1.9 ms | 0.1 ms |\n\nThe host is a laptop.\n")


def test_a_markdown_table_row_is_quoted_with_its_header() -> None:
    from core.answer.support import claim_spans, claim_text, sentence_contexts

    got = [claim_text(TABLE, s, e) for s, e in claim_spans(TABLE)]
    assert "oldlib: 99th percentile 2.7 ms; 50th percentile 0.2 ms" in got
    assert "newlib: 99th percentile 1.9 ms; 50th percentile 0.1 ms" in got
    assert not any(g.startswith("|") or "Package" in g for g in got)  # the header and its rule are no claims
    ctx = dict(sentence_contexts(TABLE, "speedlib"))
    assert "Package · 99th percentile · 50th percentile" in ctx["oldlib: 99th percentile 2.7 ms; 50th percentile 0.2 ms"]
    # a '|' line outside a table (no rule under a header) stays text
    assert claim_text("| a lone bar line |", 0, 19) == "| a lone bar line |"


def test_a_table_row_meets_the_ordinal_its_column_names_and_no_other() -> None:
    from core.answer.verify import Evidence, check

    row = "oldlib: 99th percentile 2.7 ms; 50th percentile 0.2 ms"
    ok = check("What is the 99th percentile time of oldlib?", Evidence(row, TABLE, "", ""))
    assert all(v.verdict != "unmet" for v in ok.verdicts), ok.verdicts
    miss = check("What is the 90th percentile time of oldlib?", Evidence(row, TABLE, "", ""))
    assert any(v.constraint.kind == "ordinal" and v.verdict == "unmet" for v in miss.verdicts), miss.verdicts


def test_a_sentence_wrapped_inside_a_link_is_not_cut_as_a_heading() -> None:
    from core.answer.support import claim_spans, claim_text

    text = ("*Fernwick was originally developed by [Ada Quill](https://example.org/ada) and [Bo\n"
            "Lind](https://example.org/bo) in close collaboration with the [Quay\nLab](https://example.org/).*\n")
    got = [claim_text(text, s, e) for s, e in claim_spans(text)]
    assert any(g.startswith("*Fernwick was originally developed by [Ada Quill]") and "Lind" in g for g in got), got
    # a short line above a sentence is still its heading, cut from the quote
    text2 = "Supply chain\nThe quoted lead time is twelve weeks for every order.\n"
    assert [claim_text(text2, s, e) for s, e in claim_spans(text2)] == [
        "The quoted lead time is twelve weeks for every order."]


def test_a_link_alone_is_no_claim_and_a_link_with_words_is() -> None:
    text = ("Read it in your language:\n\n"
            "• [Deutsch readme](https://github.com/example/tool/blob/master/README.de.md)\n"
            "• [Python Bytes Podcast](https://www.youtube.com/live/x?t=382) Episode 402, topic #2\n\n"
            ".. image:: https://img.shields.io/badge/docs.svg\n"
            "    :target: https://tool.readthedocs.io/en/latest/?badge=latest\n\n"
            "Home-page: https://github.com/example/tool\n")
    got = _claims(text)
    assert not [c for c in got if "Deutsch readme" in c or ":target:" in c]
    assert any("Episode 402" in c for c in got)
    assert any(c.startswith("Home-page:") for c in got)  # a field whose value is an address states it
