"""From user text to FTS5 expressions, without a database: user text never reaches MATCH as syntax, trivial
queries are recognised, and the light stemmer does what the prefix queries rely on."""

from __future__ import annotations

import sqlite3

import pytest

from memory.recall.query import MAX_TERMS, parse_query, stem

TOKENIZERS = {"words": "unicode61 remove_diacritics 2", "trigrams": "trigram"}

DOCUMENTS = [
    ("Runtime docs", "Where the runtime docs live",
     "The runtime documentation is built with mkdocs from docs/runtime."),
    ("Café notes", "Accents", "The café résumé mentions a naïve façade in Ångström units."),
    ("東京", "天気", "東京の天気は晴れです。运行时文档在哪里"),
    ("Документация", "Где живёт", "Документация рантайма живёт в docs/runtime."),
    ("Operators", "Words that look like syntax", "near and or not match column name body"),
]

HOSTILE_QUERIES = {
    "unbalanced double quote": '"where do the runtime docs live',
    "balanced double quotes": 'say "runtime docs" twice, then "built"',
    "doubled double quotes": 'runtime ""docs"" ""',
    "single quotes": "it's the runtime's docs, isn't it 'built'",
    "sql injection shape": "' OR 1=1; DROP TABLE memory_chunks; --",
    "AND": "runtime AND docs",
    "OR": "runtime OR docs",
    "NOT": "NOT runtime docs",
    "leading NOT": "NOT NOT NOT",
    "NEAR operator": "NEAR(runtime docs, 2)",
    "NEAR slash": "runtime NEAR/3 docs",
    "bare operators only": "AND OR NOT NEAR",
    "star suffix": "run* doc* build*",
    "lone star": "* * *",
    "leading star": "*runtime *docs",
    "minus": "-runtime -docs",
    "dash between": "runtime - docs -- built",
    "caret": "^runtime ^docs",
    "colon": "runtime: docs: built:",
    "column filter": "name:runtime body:docs description:built",
    "column set filter": "{name body}: runtime docs",
    "parentheses": "(runtime OR docs) AND (built)",
    "unbalanced parentheses": ")) runtime (( docs (",
    "plus": "runtime + docs ++",
    "emoji": "🚀 deploy the runtime docs 🔥 fast 👍🏽",
    "emoji only": "🚀🔥👍🏽🎉",
    "CJK": "東京 の 天気 は どう ですか",
    "CJK without spaces": "运行时文档在哪里",
    "Korean": "런타임 문서는 어디에 있나요",
    "Cyrillic": "где живёт документация рантайма",
    "accented": "café résumé naïve façade Ångström",
    "backslashes": "C:\\Users\\runtime\\docs\\ \\\\ \\",
    "escaped quotes": '\\"runtime\\" \\\'docs\\\'',
    "control characters": "runtime\tdocs\x01\x02\x1f\x7f built\r\n\x0b\x0c",
    "punctuation soup": "!@#$%^&*()_+=[]{}|;:,.<>?/~`",
    "underscores": "runtime_docs __init__ snake_case_name",
    "digits": "python 3.12 port 8080 v2",
    "very long repeated": "where are the runtime docs built " * 600,
    "very long distinct": " ".join(f"term{index}word" for index in range(2000)),
    "very long single word": "runtimedocumentation" * 200,
    "empty": "",
    "whitespace": "   \t  \n ",
}


@pytest.fixture(scope="module")
def fts():
    connection = sqlite3.connect(":memory:")
    for table, tokenizer in TOKENIZERS.items():
        connection.execute(
            f"CREATE VIRTUAL TABLE {table} USING fts5(name, description, body, tokenize=\"{tokenizer}\")")
        connection.executemany(f"INSERT INTO {table} (name, description, body) VALUES (?, ?, ?)", DOCUMENTS)
    yield connection
    connection.close()


def match(connection, table: str, expression: str) -> list[int]:
    return [row[0] for row in connection.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH ?", [expression])]


@pytest.mark.parametrize("text", HOSTILE_QUERIES.values(), ids=HOSTILE_QUERIES.keys())
@pytest.mark.parametrize("table", TOKENIZERS)
def test_user_text_never_produces_an_fts5_syntax_error(fts, table, text):
    query = parse_query(text)
    unicode_expression = query.unicode_expression()
    trigram_expression = query.trigram_expression(set(query.terms), set(query.terms))
    assert (unicode_expression is None) == (not query.terms)
    for expression in (unicode_expression, trigram_expression):
        if expression is not None:
            match(fts, table, expression)  # raises sqlite3.OperationalError on a syntax error


@pytest.mark.parametrize("text", HOSTILE_QUERIES.values(), ids=HOSTILE_QUERIES.keys())
def test_every_term_is_a_quoted_string_literal(text):
    query = parse_query(text)
    for expression in (query.unicode_expression(), query.trigram_expression(set(query.terms), set(query.terms))):
        if expression is None:
            continue
        for part in expression.split(" OR "):
            literal = part[:-1] if part.endswith("*") else part
            assert literal.startswith('"') and literal.endswith('"'), part
            assert '"' not in literal[1:-1].replace('""', ""), part


def test_operator_words_are_searched_as_plain_words_not_as_syntax(fts):
    query = parse_query("near match column")
    assert query.terms == ("near", "match", "column")
    assert match(fts, "words", query.unicode_expression()) == [5]


def test_diacritics_are_folded_on_both_sides(fts):
    assert match(fts, "words", parse_query("cafe resume").unicode_expression()) == [2]
    assert match(fts, "words", parse_query("café résumé").unicode_expression()) == [2]


def test_a_term_is_found_in_other_scripts(fts):
    assert 4 in match(fts, "words", parse_query("документация рантайма").unicode_expression())
    query = parse_query("运行时文档 晴れ")
    assert match(fts, "trigrams", query.trigram_expression(set(query.terms), set())) == [3]


def test_terms_are_lowercased_deduplicated_and_capped():
    assert parse_query("Docs docs DOCS build Build").terms == ("docs", "build")
    assert len(parse_query(" ".join(f"word{index}x" for index in range(100))).terms) == MAX_TERMS


def test_the_terms_of_a_question_are_or_joined_not_all_required():
    expression = parse_query("where do the runtime docs live and how are they built?").unicode_expression()
    assert " AND " not in expression
    assert expression.count(" OR ") == 3  # runtime, docs, live, built


@pytest.mark.parametrize(("text", "trivial"), [
    ("", True),
    ("   ", True),
    ("where is it?", True),
    ("a b c d e f", True),
    ("the of and", True),
    ("docs", False),
    ("the docs", False),
    ("x y deploy", False),
    ("the of and runtime", False),
    ("🚀 runtime", False),
    ("runtime docs", False),
    ("go db", False),
    ("where do the runtime docs live?", False),
    ("Docs DOCS docs", False),
    ("東京 天気", False),
])
def test_only_a_query_with_no_meaningful_word_is_trivial(text, trivial):
    assert parse_query(text).trivial is trivial


def test_stopwords_and_one_character_tokens_do_not_count_as_meaningful():
    assert parse_query("the a I x 7 runtime").terms == ("runtime",)


@pytest.mark.parametrize(("word", "stemmed"), [
    ("camping", "camp"),
    ("running", "run"),
    ("deployments", "deploy"),
    ("builds", "build"),
    ("docs", "docs"),
    ("run", "run"),
    ("camp", "camp"),
    ("go", "go"),
    ("v2", "v2"),
    ("3.12", "3.12"),
])
def test_the_stemmer_strips_suffixes_and_leaves_short_words_alone(word, stemmed):
    assert stem(word) == stemmed


def test_on_the_unstemmed_turns_index_a_stem_prefix_matches_the_other_forms_of_a_word():
    connection = sqlite3.connect(":memory:")
    connection.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize=\"unicode61 remove_diacritics 2\")")
    connection.executemany("INSERT INTO t (body) VALUES (?)", [("we camped by the lake",), ("camps open in may",),
                                                               ("the office is closed",)])
    expression = parse_query("camping lake").prefix_expression()
    assert expression == '"camp"* OR "lake"*'
    assert sorted(match(connection, "t", expression)) == [1, 2]


def test_on_the_word_index_the_tokenizer_stems_the_query_and_the_memories_alike():
    from memory.catalog.fts import WORD_TOKENIZER

    connection = sqlite3.connect(":memory:")
    connection.execute(f"CREATE VIRTUAL TABLE t USING fts5(body, tokenize=\"{WORD_TOKENIZER}\")")
    connection.executemany("INSERT INTO t (body) VALUES (?)", [("we camped by the lake",), ("camps open in may",),
                                                               ("the campus is closed",)])
    expression = parse_query("camping").unicode_expression()
    assert expression == '"camping"'
    assert sorted(match(connection, "t", expression)) == [1, 2]


def test_typos_are_looked_up_by_four_grams_only_when_the_word_index_never_saw_them():
    query = parse_query("documantation runtime")
    rare = {"documantation", "runtime"}
    known = query.trigram_expression(rare, set())
    unknown = query.trigram_expression(rare, {"documantation"})
    assert known == '"documantation" OR "runtime"'
    assert '"docu"' in unknown and '"tion"' in unknown and '"runtime"' in unknown
    assert '"runt"' not in unknown
    # 4-grams found in most memories are left out (counted by the pipeline); the term itself and the rest stay.
    cut = query.trigram_expression(rare, {"documantation"}, {"tion", "atio"})
    assert '"documantation"' in cut and '"docu"' in cut and '"tion"' not in cut and '"atio"' not in cut


def test_common_terms_are_left_out_of_the_word_query_unless_nothing_else_is_left():
    query = parse_query("runtime documentation")
    assert query.unicode_expression({"runtime"}) == '"documentation"'
    assert query.unicode_expression({"runtime", "documentation"}) == '"runtime" OR "documentation"'


def test_common_terms_are_left_out_of_the_trigram_query():
    query = parse_query("runtime documentation")
    assert query.trigram_expression({"documentation"}, set()) == '"documentation"'


def test_the_terms_a_text_holds_are_those_the_word_boundary_regex_finds():
    import re

    from memory.recall.pipeline import TermPattern, terms_in

    pattern = TermPattern(("deploy", "db", "caf\u00e9"), (False, True, True))
    texts = ["Deployment of the DB", "redeploy the db2 and dbs", "under_db deploys", "the café opens", "cafés",
             "nothing here", "db", "deploy_db", ""]
    for text in texts:
        lowered = text.lower()
        expected = {index for index, (needle, whole) in enumerate(zip(pattern.needles, pattern.whole, strict=True), 1)
                    if re.search(rf"(?<![^\W_]){re.escape(needle)}" + (r"(?![^\W_])" if whole else ""), lowered)}
        assert terms_in(pattern, text) == expected, text
    assert terms_in(pattern, "Deployment of the DB") == {1, 2}
    assert terms_in(pattern, "redeploy the db2 and dbs") == set()
