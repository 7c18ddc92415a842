"""General readings of the check (issue #42) that refused right answers: a model code's plural, a Russian role stem
inside a longer word, the board of directors, a power in watts, a superlative of a quantity met by its cap, a
license that is the question's topic. Tiny invented fixtures."""
from __future__ import annotations

from core.answer.attributes import asked_attribute
from core.answer.verify import Evidence, check, question_constraints


def _verdicts(q: str, sentence: str, chunk: str = "") -> dict[str, str]:
    ck = check(q, Evidence(sentence, chunk or sentence, "", ""))
    return {v.constraint.kind + ":" + v.constraint.text: v.verdict for v in ck.verdicts}


def test_the_plural_of_a_model_code_is_that_model() -> None:
    s = "A fault in the serial driver caused ZX-210 units to restart once a week."
    assert _verdicts("Some of our ZX-210s were rebooting every week. What was the cause?", s)["entity:ZX-210s"] == "met"
    assert _verdicts("Why did the A320s stop at Porto?", "The A320 fleet stopped at Porto for new brakes.")[
        "entity:A320s"] == "met"
    # another model stays another model: a longer code, or a code with its own 's' ('5s' is no plural)
    assert _verdicts("Why were our ZX-210s rebooting?", "A fault caused ZX-2100 units to restart.")[
        "entity:ZX-210s"] == "unmet"


def test_a_russian_role_is_a_word_not_a_stem_inside_a_longer_word() -> None:
    kinds = {c.kind + ":" + c.text for c in question_constraints("Какой лимит на гостиницу в Порту для командировок?")}
    assert not any(k.startswith("role:") for k in kinds)
    kinds = {c.kind + ":" + c.text for c in question_constraints("Кто был командиром полка в Порту?")}
    assert "role:командир" in kinds  # the role in its cases still is one


def test_the_board_of_directors_is_no_director_asked() -> None:
    for q in ("Во сколько обошлась закупка модулей ZX-55, одобренная советом директоров?",
              "How much did the ZX-55 purchase approved by the board of directors cost?"):
        assert not any(c.kind == "role" for c in question_constraints(q)), q
    assert any(c.kind == "role" for c in question_constraints("Who was the director of Vireo in 2020?"))


def test_a_value_in_watts_states_a_power() -> None:
    s = "The ZX-210 is rated for 0 to +55 °C and draws at most 6 W from a 24 V DC supply."
    assert _verdicts("How much power does the ZX-210 draw?", s)["attribute:power"] == "met"
    s2 = "The ZX-210 is rated for 0 to +55 °C."
    assert _verdicts("How much power does the ZX-210 draw?", s2)["attribute:power"] == "unmet"


def test_a_superlative_of_a_quantity_is_met_by_its_cap() -> None:
    s = "The delay doubles after each failed attempt until it reaches 60000 milliseconds."
    assert _verdicts("What is the longest wait between upload retries?", s)["superlative:longest"] == "met"
    s = "The Helio pump delivers up to 40 litres a minute."
    assert _verdicts("What is the highest rate the Helio pump delivers?", s)["superlative:highest"] == "met"
    # a floor is no cap; a contrary superlative and a ranked thing (no quantity) stay unmet
    s = "Each retry waits at least 2 seconds."
    assert _verdicts("What is the longest wait between retries?", s)["superlative:longest"] == "unmet"
    s = "The shortest wait is up to 2 seconds."
    assert _verdicts("What is the longest wait between retries?", s)["superlative:longest"] == "unmet"
    s = "Rivers in Vireo run for up to 300 km."
    assert _verdicts("What is the longest river in Vireo?", s)["superlative:longest"] == "unmet"
    s = "Vireo's children are up to 12 years old."
    assert _verdicts("Who is the youngest child of Vireo?", s)["superlative:youngest"] == "unmet"


def test_a_license_in_a_condition_is_the_topic_not_the_attribute_asked() -> None:
    assert asked_attribute("What happens if our Helio licence runs out - do we lose the old data?") is None
    assert asked_attribute("Что будет, если лицензия Helio истечёт?") is None
    assert asked_attribute("Under which license is helio released?").value == "license"
    assert asked_attribute("If I fork helio, which license applies?").value == "license"


def test_a_name_in_the_sections_above_the_sentence_meets_the_name_asked() -> None:
    from core.answer.verify import ChunkText, verify_quotes
    sent = "The contract signed in May covers 2,500 containers in the first stage."
    text = f"Contract\n\n{sent}"  # an HTML page's '<h3>Contract</h3>' under '<h2>Helio Shipping</h2>'
    q = "How many containers does the first stage of the Helio Shipping contract cover?"
    got = verify_quotes(q, f"{sent} [c1]", ["c1"], {"c1": ChunkText(text, "Clients / Helio Shipping / Contract",
                                                                     "clients.html / Clients")}, refusal="No.")
    assert not got.refused, got.text
    other = verify_quotes(q, f"{sent} [c1]", ["c1"], {"c1": ChunkText(text, "Clients / Vireo Lines / Contract",
                                                                       "clients.html / Clients")}, refusal="No.")
    assert other.refused  # another client's section stays another client's


def test_a_document_titled_in_lower_case_names_what_a_question_asks_about() -> None:
    from core.answer.verify import ChunkText, verify_quotes

    q = "Which organisations funded the development of fernwick?"
    known = ["fernwick", "tollbar-cli", "Pricing"]
    kinds = {c.kind + ":" + c.text for c in question_constraints(q, known)}
    assert "entity:fernwick" in kinds
    assert not any(k.startswith("entity:") for k in {c.kind + ":" + c.text for c in question_constraints(q)})
    # a capitalised title is an ordinary word in a lower-case question
    assert not any(c.kind == "entity" for c in question_constraints("What does the pricing page list?", known))
    # a hyphenated package name, written with '_' or '-'
    assert "entity:tollbar_cli" in {c.kind + ":" + c.text for c in
                                    question_constraints("Who maintains tollbar_cli?", known)}
    other = "We are grateful to Quarry Labs and Ostend Futures for funding. [d1-c1]"
    chunks = {"d1-c1": ChunkText("We are grateful to Quarry Labs and Ostend Futures for funding.", "", "tollbar-cli"),
              "d2-c1": ChunkText("Fernwick is funded by Quarry Labs.", "", "fernwick")}
    v = verify_quotes(q, other, ["d1-c1"], chunks, refusal="The corpus does not say.", known=known)
    assert v.refused and "fernwick" in v.text  # another package's funders are not fernwick's
    assert not verify_quotes(q, other, ["d1-c1"], chunks, refusal="The corpus does not say.").refused  # before
    right = "Fernwick is funded by Quarry Labs. [d2-c1]"
    assert not verify_quotes(q, right, ["d2-c1"], chunks, refusal="The corpus does not say.", known=known).refused


def test_which_episode_number_asks_a_number_that_several_does_not_state() -> None:
    q = "Which episode number of the Harbour Talk podcast featured Fernwick?"
    assert "asks:a number" in {c.kind + ":" + c.text for c in question_constraints(q)}
    assert _verdicts(q, "Fernwick has been featured in several talks on the Harbour Talk podcast.")[
        "asks:a number"] == "unmet"
    assert _verdicts(q, "Fernwick was on the Harbour Talk podcast, episode 402.")["asks:a number"] == "met"
    assert "asks:a number" in {c.kind + ":" + c.text for c in question_constraints("Какой номер выпуска у подкаста?")}
    # 'how many' is still met by a vague quantity
    assert _verdicts("How many talks featured Fernwick?", "Fernwick has been featured in several talks.")[
        "asks:a number"] == "met"


def test_a_config_key_asked_is_met_as_written_beside_a_lower_case_word() -> None:
    from core.answer.verify import ChunkText, verify_quotes

    chunk = ("Output:\n\n```python\nName(id='bar', ctx=Load())\nTrue\n```\n\n"
             "In general `is_widget_ready` returns False for the following values:\n"
             "- Literals (e.g. `123`, `'abc'`)\n- Variables or attributes whose name is equal to the value's "
             "`__name__`, such as `foo` above or `self.foo` if it was a method.\n- Builtins (e.g. `len`) referred to by their usual name.\n\n"
             "To make things easier, you can combine the checks with:\n\n```python\nwidgets.ready_grouped(root)\n```")
    ans = ("- Literals (e.g. `123`, `'abc'`) [d-c] In general `is_widget_ready` returns False for the following "
           "values: [d-c]")
    v = verify_quotes("What does is_widget_ready return for literals?", ans, ["d-c"],
                      {"d-c": ChunkText(chunk, "`widgetkit`", "widgetkit.md / widgetkit")}, refusal="R.",
                      known=["widgetkit"])
    assert not v.refused and "returns False" in v.text


def test_a_list_item_is_about_what_it_names_not_its_siblings() -> None:
    chunk = ("## Appears on\n\nFernwick was featured in several podcasts:\n\n"
             "- [Harbour Talk](https://example.org/harbour)\n  Cats and ships on the quay\n\n"
             "- [Quay Bytes](https://example.org/live/X7w?t=382)\n  Episode 402, topic #2\n")
    item = "- [Quay Bytes](https://example.org/live/X7w?t=382) Episode 402, topic #2"
    # the item's own podcast: met in the item itself
    assert _verdicts("Which episode of the Quay Bytes podcast featured Fernwick?", item, chunk)[
        "entity:Quay Bytes"] == "met"
    # the sibling item's podcast stands in the chunk only inside another item: not met by this one
    assert _verdicts("Which episode number of the Harbour Talk podcast featured Fernwick?", item, chunk)[
        "entity:Harbour Talk"] == "unmet"
    # a name the list's lead-in states still meets a question about an item under it
    lead = "Fernwick was featured on Harbour Talk:\n\n- Episode 12, about quays\n- Episode 14, about ships\n"
    assert _verdicts("Which episode of Harbour Talk was about quays?", "- Episode 12, about quays", lead)[
        "entity:Harbour Talk"] == "met"


def test_a_number_inside_a_web_address_states_no_value() -> None:
    q = "Which episode number of the Harbour Talk podcast featured Fernwick?"
    s = "- [Harbour Talk](https://example.org/episodes/16702460-the-rise) The rise of Fernwick"
    assert _verdicts(q, s)["asks:a number"] == "unmet"
    assert _verdicts(q, s + ", episode 31")["asks:a number"] == "met"


def test_a_web_address_does_not_label_a_quote_with_a_language() -> None:
    from core.answer.stage import quoted_language
    from core.types import Answer

    a = Answer("- [Quay Bytes Podcast](https://www.example.org/live/N7w_ESVW40I?si=y-wN1uCsAuJOKlOT&t=382) Episode 402, "
               "topic #2 [d-c]", ("d-c",), False, "extractive")
    assert quoted_language("Which episode of the Quay Bytes podcast featured Fernwick?", a)[0].text == a.text


def test_who_maintains_asks_the_maintainer_a_field_or_a_sentence_states() -> None:
    q = "Who maintains fernwick?"
    assert "role:maintainer" in {c.kind + ":" + c.text for c in question_constraints(q, ["fernwick"])}
    assert _verdicts(q, "Maintainer-email: Ada Quill <ada@example.org>")["role:maintainer"] == "met"
    assert _verdicts(q, "Fernwick is maintained by the Quay team.")["role:maintainer"] == "met"
    # the author is not the maintainer the question asks about
    assert _verdicts(q, "Author-email: Quay Development Team <dev@example.org>")["role:maintainer"] == "unmet"
    assert _verdicts(q, "Fernwick powers the configuration system of Quay and Harbour.")["role:maintainer"] == "unmet"


def test_a_name_with_a_word_of_its_own_beside_the_asked_one_is_its_sibling() -> None:
    chunk = ("## Compatibility\n\nFernwick works with Linux, macOS and Windows. True color works with new Windows "
             "Terminal, classic terminal is limited to 16 colors.")
    s = "True color works with new Windows Terminal, classic terminal is limited to 16 colors."
    assert _verdicts("How many colors is the classic macOS terminal limited to?", s, chunk)["entity:macOS"] == "unmet"
    assert _verdicts("How many colors is the classic Windows terminal limited to?", s, chunk)[
        "entity:Windows"] == "met"


def test_who_wrote_a_package_is_answered_by_its_author_field() -> None:
    from core.answer.attributes import subject_names

    assert subject_names("Who wrote fernwick?") == ["fernwick"]
    assert subject_names("Who wrote Hamlet?") == []  # a capitalised name is the check's own constraint
    assert _verdicts("Who wrote fernwick?", "Author: Ada Quill")["role:writer"] == "met"
    assert _verdicts("Who wrote fernwick?", "Maintainer: Ada Quill")["role:writer"] == "unmet"
