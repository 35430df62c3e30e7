"""docs/findings.md, the findings' index (reports/findings_index.py): the shipped index is what its
sources make, every claim of docs/evidence/findings.toml has its finding's entry and page, every
entry its page, every link of the index a page and a heading there; and render_index on hand-made
indexes, claims and pages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kchaos.errors import ConfigError
from kchaos.harness import findings as registry
from kchaos.reports import findings_index as fi

REPO = Path(__file__).resolve().parents[2]
INDEX, CLAIMS, OUTPUT = REPO / fi.INDEX, REPO / fi.CLAIMS, REPO / fi.OUTPUT
LINK = re.compile(r"\]\(([^)\s]+)\)")


def shipped() -> tuple[fi.Index, list[dict]]:
    return fi.load_index(INDEX), fi.load_claims(CLAIMS)


def test_docs_findings_md_is_what_its_index_and_claims_make():
    assert OUTPUT.read_text() == fi.render_index(INDEX, CLAIMS), \
        "docs/findings.md is stale: run `python -m kchaos.reports.findings_index`"


def test_docs_findings_md_stays_an_index():
    assert len(OUTPUT.read_text().splitlines()) < 300


def test_every_claim_has_its_findings_entry_page_and_heading():
    index, claims = shipped()
    assert fi.problems(index, claims, REPO) == []
    entries = {f.id: f for f in index.findings}
    for claim in claims:
        owner = fi.finding_of(claim["finding"])
        assert owner in entries, f"claim {claim['finding']}:{claim['bundle']} has no index entry"
        page = REPO / entries[owner].page
        assert page.is_file(), f"{claim['finding']}: no page {page}"
        assert any(h.startswith(f"{claim['finding']}. ") for _, h in fi.headings(page.read_text())), \
            f"{claim['finding']} has no heading on {page}"


def test_every_entry_has_its_page_headed_with_its_id():
    index, _ = shipped()
    assert [f.id for f in index.findings] == [f"F{n}" for n in range(1, 25)]
    for f in index.findings:
        page = REPO / f.page
        assert page.is_file() and page.parent == REPO / "docs" / "findings", f.page
        assert page.read_text().startswith(f"# {f.id}. "), f.page
        assert len(f.title) < 120 and f.versions and f.upstream and f.rate and (f.replay or f.replay_note)


def test_every_link_of_the_index_reaches_a_page_and_its_heading():
    text = OUTPUT.read_text()
    links = LINK.findall(text)
    assert len(links) > 50
    for link in links:
        target, _, fragment = link.partition("#")
        path = (OUTPUT.parent / target).resolve()
        assert path.is_file(), f"{link}: no {path}"
        if fragment:
            assert fragment in fi.anchors(path.read_text()), f"{link}: no heading with that anchor"


def test_every_page_under_docs_findings_is_linked_from_the_index():
    linked = {(OUTPUT.parent / link.partition("#")[0]).resolve() for link in LINK.findall(OUTPUT.read_text())}
    pages = {p.resolve() for p in (REPO / "docs" / "findings").glob("*.md")}
    assert pages - linked == set()


def test_the_claims_table_is_the_one_kchaos_findings_prints():
    evidence = CLAIMS.parent
    assert fi.claims_table(evidence, fi.load_claims(CLAIMS)) == \
        registry.claims_markdown(evidence, registry.load_claims(evidence))


def test_the_anchors_are_githubs():
    assert fi.anchor("F1a. confluent-kafka (librdkafka), transaction.version 1: lost write, lost input") == \
        "f1a-confluent-kafka-librdkafka-transactionversion-1-lost-write-lost-input"
    assert fi.anchor("F8 at Kafka's default session timeout, 9 s (issue 61)") == \
        "f8-at-kafkas-default-session-timeout-9-s-issue-61"
    assert fi.anchor("The clock hunt: `hunt-clock`, not found beyond F9") == "the-clock-hunt-hunt-clock-not-found-beyond-f9"
    assert fi.anchors("# A\n## B\n```\n# not a heading\n```\n## B\n") == {"a", "b", "b-1"}


# -- hand-made: a tiny repository with an index, claims, bundles and pages --------------------------

ENTRY = """
[[finding]]
id = "{id}"
title = "{title}"
component = {component}
versions = "Kafka 4.4.0"
upstream = "not filed"
rate = "3 of 3 seeds"
replay = ["kchaos findings verify {id}"]
page = "docs/findings/{id}.md"
"""


def tree(root: Path, entries: list[dict], claims: str, pages: dict[str, str], head: str = "") -> Path:
    """``root`` as a repository: docs/evidence/findings-index.toml of ``entries``, findings.toml
    with ``claims`` (each claim's bundle given a seed), and the pages under docs/findings/."""
    (root / "docs" / "evidence").mkdir(parents=True)
    (root / "docs" / "findings").mkdir(parents=True)
    text = head + "".join(ENTRY.format(**{"component": '["kafka"]', "title": "a finding", **e}) for e in entries)
    (root / fi.INDEX).write_text(text)
    (root / fi.CLAIMS).write_text(claims)
    for bundle in re.findall(r'bundle = "([^"]+)"', claims):
        (root / "docs" / "evidence" / bundle).mkdir()
        (root / "docs" / "evidence" / bundle / "seed").write_text("7\n")
    for name, page in pages.items():
        (root / "docs" / "findings" / name).write_text(page)
    return root


HEAD = '''[index]
intro = """
What a finding is.
"""
claims_intro = "The claims."

[[page]]
path = "docs/findings/reproducing.md"
about = "how to replay"
'''

CLAIM_F1A = '[[claim]]\nfinding = "F1a"\nbundle = "b-one"\nverdict = "invalid"\nany_of = ["lost-write"]\n' \
            'trigger = "a held EndTxn"\nsighting = true\n'
CLAIM_F10 = '[[claim]]\nfinding = "F10"\nbundle = "b-ten"\nverdict = "invalid"\nany_of = ["duplicate"]\n' \
            'trigger = "a kill"\nseeds = [2, 3]\nat_least = 2\n'
PAGES = {"F1.md": "# F1. The first (one sighting)\n\ntext\n\n## F1a. Its part: `one`, lost\n\nmore\n",
         "F10.md": "# F10. The tenth\n\n```\n## not a section\n```\n",
         "F2.md": "# F2. The second\n",
         "reproducing.md": "# Reproducing\n"}


def test_render_index_on_a_hand_made_index(tmp_path):
    root = tree(tmp_path, [{"id": "F10", "title": "ten"}, {"id": "F1", "title": "one | two", "component": '["kafka", "streams"]'},
                           {"id": "F2", "title": "two"}], CLAIM_F1A + CLAIM_F10, PAGES, HEAD)
    text = fi.render_index(root / fi.INDEX, root / fi.CLAIMS)
    lines = text.splitlines()
    assert lines[0].startswith("<!-- Generated by") and lines[1] == "# Findings" and "What a finding is." in lines
    rows = [line for line in lines if line.startswith("| [F")]
    assert [r.split("]")[0] for r in rows] == ["| [F1", "| [F2", "| [F10"]  # by number, not as written
    assert rows[0] == ("| [F1](findings/F1.md) | one \\| two | kafka, streams | Kafka 4.4.0 | not filed | 3 of 3 seeds "
                       "| `kchaos findings verify F1` |")
    assert "- [Reproducing](findings/reproducing.md): how to replay" in lines
    # each finding under its page's own heading, its sections linked by anchor, its bundles named
    assert "### F1. The first (one sighting)" in lines and "### F10. The tenth" in lines
    assert "- [F1a. Its part: `one`, lost](findings/F1.md#f1a-its-part-one-lost)" in lines
    assert "[docs/findings/F1.md](findings/F1.md). Bundles: `b-one` (F1a)." in lines
    assert "[docs/findings/F2.md](findings/F2.md). Bundles: none." in lines
    assert not any("not a section" in line for line in lines)
    # the claims, as `kchaos findings --markdown` prints them
    assert "## Faithfulness, claim by claim" in lines and "The claims." in lines
    assert "| F1a | `b-one` | INVALID (lost-write); one sighting | the bundle (seed 7): reported, not claimed to " \
           "reproduce | a held EndTxn |" in lines
    assert "| F10 | `b-ten` | INVALID (duplicate) | the bundle (seed 7) and seeds 2, 3, always: at least 2 of 3 " \
           "| a kill |" in lines
    evidence = root / "docs" / "evidence"
    assert fi.claims_table(evidence, fi.load_claims(root / fi.CLAIMS)) == \
        registry.claims_markdown(evidence, [registry.Claim("F1a", "b-one", "invalid", ("lost-write",), "a held EndTxn",
                                                           sighting=True),
                                            registry.Claim("F10", "b-ten", "invalid", ("duplicate",), "a kill", (2, 3), 2)])


def refused(tmp_path: Path, words: str, entries=None, claims=CLAIM_F1A, pages=None) -> None:
    entries = entries if entries is not None else [{"id": "F1"}]
    root = tree(tmp_path, entries, claims, pages if pages is not None else {"F1.md": PAGES["F1.md"]})
    with pytest.raises(ConfigError, match=words):
        fi.render_index(root / fi.INDEX, root / fi.CLAIMS)


def test_a_claim_whose_finding_has_no_entry_is_refused(tmp_path):
    refused(tmp_path, "claim F3:b-three: finding F3 has no entry",
            claims=CLAIM_F1A + '[[claim]]\nfinding = "F3"\nbundle = "b-three"\nverdict = "valid"\n')


def test_a_claim_whose_finding_has_no_page_is_refused(tmp_path):
    refused(tmp_path, "F1: its page docs/findings/F1.md does not exist", pages={})


def test_a_claim_whose_sub_finding_has_no_heading_on_its_page_is_refused(tmp_path):
    refused(tmp_path, "claim F1a:b-one: no heading 'F1a. ...' on F1's page", pages={"F1.md": "# F1. The first\n"})


def test_an_entry_without_its_page_or_with_another_heading_is_refused(tmp_path):
    refused(tmp_path / "a", "F2: its page docs/findings/F2.md does not exist", entries=[{"id": "F1"}, {"id": "F2"}])
    refused(tmp_path / "b", "F1: docs/findings/F1.md does not begin with its heading",
            pages={"F1.md": "# F2. Another\n\n## F1a. Its part\n"})


def test_an_entry_of_the_wrong_shape_is_refused(tmp_path):
    refused(tmp_path / "a", "title of 130 characters", entries=[{"id": "F1", "title": "x" * 130}])
    refused(tmp_path / "b", "component", entries=[{"id": "F1", "component": '["zookeeper"]'}])
    refused(tmp_path / "c", "F1 has two entries", entries=[{"id": "F1"}, {"id": "F1"}])
    root = tree(tmp_path / "d", [], "", {})
    (root / fi.INDEX).write_text('[[finding]]\nid = "F1"\ntitle = "t"\npage = "docs/findings/F1.md"\nowner = "me"\n')
    with pytest.raises(ConfigError, match=r"missing component, versions, upstream, rate; unknown keys \['owner'\]"):
        fi.load_index(root / fi.INDEX)


def test_main_writes_the_index_and_check_says_whether_it_is_current(tmp_path, capsys):
    root = tree(tmp_path, [{"id": "F1"}], CLAIM_F1A, {"F1.md": PAGES["F1.md"]})
    assert fi.main(["--check", "--root", str(root)]) == 1  # no docs/findings.md yet
    assert fi.main(["--root", str(root)]) == 0
    assert (root / fi.OUTPUT).read_text() == fi.render_index(root / fi.INDEX, root / fi.CLAIMS)
    assert fi.main(["--check", "--root", str(root)]) == 0
    (root / "docs" / "findings" / "F1.md").write_text("# F1. Retitled\n\n## F1a. Its part\n")
    assert fi.main(["--check", "--root", str(root)]) == 1
    (root / "docs" / "findings" / "F1.md").unlink()
    assert fi.main(["--check", "--root", str(root)]) == 3
    assert "does not exist" in capsys.readouterr().err
