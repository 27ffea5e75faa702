"""The bilingual model card: rendering, front matter, the hand-written section, and its hooks.

Run with ``UPDATE_GOLDEN=1`` to rewrite ``tests/golden/card_seed001.md`` after an intended change
to the templates; review the diff before committing it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from datetime import date
from pathlib import Path

import pytest
from click.testing import CliRunner
from huggingface_hub import ModelCard
from markdown_it import MarkdownIt

from registry.card import handwritten, render_card
from registry.card.markdown import md_cell, md_code, md_fenced
from registry.card.metadata import base_model_relation
from registry.cli import main
from registry.core.errors import RegistryError
from registry.core.models import Base, DataRef, Entry, Index, Localized, RegistryInfo, Score, Serving
from registry.core.repo import render_index
from registry.core.resources import template_dir
from registry.ops.validate import validate

from .conftest import snapshot

GOLDEN = Path(__file__).parent / "golden" / "card_seed001.md"

BASE_A = "rwkv7-g1k-7.2b-20260930-ctx25600"
BASE_B = "rwkv7-g1k-7.2b-20261120-ctx25600"
SHA_A = "0853d4ce2e4e0629762797d05036a84cc69fb2fb9eff5590dd22aeb518a4c842"
SHA_B = "b" * 64
DATA_STATE = DataRef(version="v1.41", sha256="feb2fd6b" + "0" * 56, dataset_repo="No-22/rwkv-agent-distill")
DATA_MISS = DataRef(version="v2.1", sha256="2fbf6760" + "0" * 56, dataset_repo="No-22/rwkv-agent-distill")
DAY1, DAY2 = date(2026, 10, 16), date(2026, 10, 17)
BACKEND1, BACKEND2 = "rwkv_lightning 1.8.1", "rwkv_lightning 1.8.2"
CJK = re.compile(r"[\u4e00-\u9fff]")
ENGLISH_SENTENCE = re.compile(r"\b[A-Za-z]+(?:[ ,]+[A-Za-z]+){4,}")


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _score(value: float, day: date, backend: str, notes: str = "") -> Score:
    return Score(benchmark="exam", value=value, unit="%", date=day, backend=backend, runs=2, notes=notes)


def _miss(run_name: str, content_version: str, notes: str, score: Score, recommended: bool = False) -> Entry:
    return Entry(
        path=f"{BASE_A}/miss/v2.1/{run_name}/adapter-final.pth",
        method="miss",
        base_sha256=SHA_A,
        data=DATA_MISS,
        sha256=content_version[::-1],
        size=36 << 20,
        content_version=content_version,
        recommended=recommended,
        notes=notes,
        scores=[score],
        serving=Serving(profile="g1k-think", sampling="g1k-agent"),
    )


def seed001_index() -> Index:
    """A registry shaped like seed 001: two bases, one State file, three MiSS runs, two score days."""
    state = Entry(
        path=f"{BASE_A}/state/v1.41/v141b-s1224.pth",
        method="state",
        base_sha256=SHA_A,
        data=DATA_STATE,
        sha256="1" * 64,
        size=16 << 20,
        recommended=True,
        notes="lr 0.01→0.00167，第 1224 步（共 1374 步）。State 推荐",
        scores=[_score(46.9, DAY1, BACKEND1)],
        serving=Serving(profile="g1k", sampling="g1k-agent"),
    )
    miss = [
        _miss(
            "r16-lr2e-5-e2",
            "360fa110a40e324bd1bf2976a7b31739e46379752c6ebc4bf8c370c77d93daa5",
            "lr 2e-5→2e-6，2 epoch 共 1378 步，最终权重。MiSS 推荐",
            _score(52.2, DAY2, BACKEND2, "296.5 题；对 v2.0 逐题 +95/−54，p=0.001"),
            recommended=True,
        ),
        _miss(
            "r16-lr1e-5-e2",
            "3935b51573ca92350ceb783958171a54b765f09b79ad29be5422ea338dd59ee7",
            "lr 1e-5→1e-6，对照组",
            _score(51.3, DAY2, BACKEND2, "291.5 题 | 与 2e-5 分不出"),
        ),
        _miss(
            "r16-lr3e-5-e2",
            "a5d0b1b11d2f11efeeebc50f2290b5b0dd3978adeaaf8095f017b857429a5782",
            "lr 3e-5→3e-6，对照组\n读对了却取错值的题变多",
            _score(49.4, DAY2, BACKEND2),
        ),
    ]
    bases = [
        Base(
            name=BASE_B,
            filename=f"{BASE_B}.pth",
            source="BlinkDL/rwkv7-g1",
            sha256=SHA_B,
            vocab="rwkv_vocab_v20230424.txt",
        ),
        Base(
            name=BASE_A,
            filename=f"{BASE_A}.pth",
            source="BlinkDL/rwkv7-g1",
            sha256=SHA_A,
            vocab="rwkv_vocab_v20230424.txt",
        ),
    ]
    info = RegistryInfo(title="RWKV-Agent 权重（State 与 MiSS 适配器）", repo_id="No-22/rwkv-agent-weights")
    return Index(registry=info, bases=bases, entries=[miss[1], state, miss[2], miss[0]])


def full_entry(path: str = f"{BASE_A}/full/v1.0/rwkv-final.pth") -> Entry:
    return Entry(path=path, method="full", base_sha256=SHA_A, data=DATA_STATE, sha256="f" * 64, size=1)


@pytest.fixture
def seed_card() -> str:
    return render_card(seed001_index(), None)


def sections(text: str, level: str = "## ") -> dict[str, str]:
    """Sections of ``text`` by heading (for a whole card: the body, after the front matter)."""
    body = text.split("\n---\n", 1)[1] if text.startswith("---\n") else text
    parts = re.split(rf"^{level}(.+)$", body, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def base_section(card: str, name: str = BASE_A) -> str:
    return sections(card)[f"基模 {name} 上的权重 · Weights on {name}"]


def split_row(line: str) -> list[str]:
    """Cells of a GFM table row, honouring backslash escapes (``\\|`` is not a separator)."""
    cells, cell, chars = [], "", iter(line.strip()[1:-1])
    for char in chars:
        if char == "\\":
            cell += char + next(chars, "")
        elif char == "|":
            cells.append(cell)
            cell = ""
        else:
            cell += char
    return cells + [cell]


def tables(card: str) -> list[list[str]]:
    """Every Markdown table (outside code blocks) as its list of row lines."""
    found, current, fenced = [], [], False
    for line in card.splitlines() + [""]:
        fenced ^= line.startswith("```")
        if not fenced and line.startswith("|"):
            current.append(line)
        elif current:
            found.append(current)
            current = []
    return found


# ----------------------------------------------------------------------------------------------
# content


def test_golden_seed001(seed_card):
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(seed_card, encoding="utf-8")
    assert seed_card == GOLDEN.read_text(encoding="utf-8"), "card changed: review, then rerun with UPDATE_GOLDEN=1"


def test_front_matter_parses_with_huggingface_hub(seed_card):
    data = ModelCard(seed_card).data
    assert data.language == ["zh", "en"]
    assert data.library_name == "rwkv"
    assert data.tags == ["rwkv", "rwkv-7"]
    assert data.base_model == ["BlinkDL/rwkv7-g1"]  # both bases come from it: deduplicated
    assert data["base_model_relation"] == "adapter"
    assert data.datasets == ["No-22/rwkv-agent-distill"]
    assert "license" not in data.to_dict()
    assert data.model_name == "RWKV-Agent 权重（State 与 MiSS 适配器）"
    results = {(r.metric_name, r.metric_value, r.dataset_name, r.dataset_config) for r in data.eval_results}
    assert results == {
        (f"{BASE_A}/state/v1.41/v141b-s1224.pth (%)", 46.9, "exam", f"2026-10-16 {BACKEND1}"),
        (f"{BASE_A}/miss/v2.1/r16-lr2e-5-e2/adapter-final.pth (%)", 52.2, "exam", f"2026-10-17 {BACKEND2}"),
        (f"{BASE_A}/miss/v2.1/r16-lr1e-5-e2/adapter-final.pth (%)", 51.3, "exam", f"2026-10-17 {BACKEND2}"),
        (f"{BASE_A}/miss/v2.1/r16-lr3e-5-e2/adapter-final.pth (%)", 49.4, "exam", f"2026-10-17 {BACKEND2}"),
    }
    assert len(data.eval_results) == 4  # one per score


def test_license_in_front_matter_and_body_when_set():
    index = seed001_index()
    index.registry.license = "Apache-2.0"  # as typed: the front matter carries the Hub's lower-case id
    card = render_card(index, None)
    assert ModelCard(card).data.license == "apache-2.0"
    assert "尚未指定许可证" not in card and "`Apache-2.0`" in sections(card)["许可证与署名 · License and attribution"]


def test_no_license_is_said_in_both_languages(seed_card):
    license_section = sections(seed_card)["许可证与署名 · License and attribution"]
    assert "本仓库尚未指定许可证" in license_section and "No license has been specified" in license_section


@pytest.mark.parametrize(
    ("methods", "relation"),
    [
        (["state"], "adapter"),
        (["miss", "state"], "adapter"),
        (["full"], "finetune"),
        (["full", "miss"], "adapter"),
        ([], None),
    ],
)
def test_base_model_relation(methods, relation):
    index = Index(
        entries=[full_entry(f"x/{m}/v1/{i}.pth").model_copy(update={"method": m}) for i, m in enumerate(methods)]
    )
    assert base_model_relation(index) == relation


def test_empty_registry_states_no_relation_and_no_model_index():
    data = ModelCard(render_card(Index(), None)).data.to_dict()
    assert "base_model_relation" not in data and "model-index" not in data and "model_name" not in data


def test_every_table_row_has_its_header_column_count(seed_card):
    found = tables(seed_card)
    assert len(found) == 5  # bases, files of base A, two score days, content_version
    for rows in found:
        width = len(split_row(rows[0]))
        assert re.fullmatch(r"\|( --- \|)+", rows[1]) and len(split_row(rows[1])) == width
        for row in rows[2:]:
            assert len(split_row(row)) == width, row


def test_cells_escape_pipes_and_newlines(seed_card):
    assert "291.5 题 \\| 与 2e-5 分不出" in seed_card
    assert "lr 3e-5→3e-6，对照组<br>读对了却取错值的题变多" in seed_card
    assert md_cell("a|b\nc\r\nd\\e") == "a\\|b<br>c<br>d\\\\e"
    assert md_code("a`b") == "``a`b``"


def test_every_section_is_in_both_languages(seed_card):
    for heading, text in sections(seed_card).items():
        assert CJK.search(heading) and re.search(r"[A-Za-z]{4,}", heading), heading
        assert CJK.search(text), f"no Chinese in {heading}"
        assert ENGLISH_SENTENCE.search(text), f"no English in {heading}"


def test_scores_are_grouped_by_date_and_backend(seed_card):
    scores = sections(base_section(seed_card), "#### ")
    headings = list(scores)
    assert [h.split("：")[0] for h in headings] == [f"2026-10-16 · {BACKEND1}", f"2026-10-17 · {BACKEND2}"]
    for heading in headings:
        assert "同日同后端" in heading and "same day, same backend" in heading
    day1, day2 = (scores[h] for h in headings)
    assert "46.9%" in day1 and "52.2%" not in day1
    assert [v for v in ("52.2%", "51.3%", "49.4%") if v in day2] == ["52.2%", "51.3%", "49.4%"]


def test_files_table_lists_state_then_the_recommended_miss_then_the_controls(seed_card):
    files = sections(base_section(seed_card), "### ")["文件 · Files"]
    paths = re.findall(r"^\| `([^`]+)`", files, flags=re.M)
    assert paths == [
        "state/v1.41/v141b-s1224.pth",
        *(f"miss/v2.1/{run}/adapter-final.pth" for run in ("r16-lr2e-5-e2", "r16-lr1e-5-e2", "r16-lr3e-5-e2")),
    ]
    assert "`feb2fd6b…`" in files and "`2fbf6760…`" in files


def test_usage_is_filled_from_the_index_for_present_methods_only(seed_card):
    usage = sections(seed_card)["用法 · Usage"]
    assert f"rwkv-cli state upload --api-url <URL> --file {BASE_A}/state/v1.41/v141b-s1224.pth" in usage
    assert "--profile g1k --sampling g1k-agent\n" in usage and "--profile g1k-think --sampling g1k-agent" in usage
    register = (
        "rwkv-cli adapter register --api-url <URL> --adapter-id v21-r16-lr2e-5-e2 "
        f"--file {BASE_A}/miss/v2.1/r16-lr2e-5-e2/adapter-final.pth"
    )
    assert register in usage and usage.count("rwkv-cli adapter register") == 1  # the recommended run
    assert "3935b51573ca92350ceb783958171a54b765f09b79ad29be5422ea338dd59ee7" in usage
    assert "RWKV_V7_ON" not in seed_card and "完整权重 · Full" not in seed_card


def test_full_checkpoint_usage_names_the_path_without_pth():
    index = seed001_index()
    index.entries.append(full_entry())
    card = render_card(index, None)
    usage = sections(card)["用法 · Usage"]
    for needle in (
        'os.environ["RWKV_V7_ON"] = "1"',
        'os.environ["RWKV_CUDA_ON"] = "1"',
        f'RWKV(model="{BASE_A}/full/v1.0/rwkv-final"',
        'PIPELINE(model, "rwkv_vocab_v20230424")',
        "    temperature=0,\n    top_p=0,\n    alpha_frequency=0,\n    alpha_presence=0,\n    "
        "token_stop=[0],\n    chunk_len=256,",
        'prompt = """User: 你好\n\nAssistant:"""',
        'split("\\n\\nUser:", 1)',
    ):
        assert needle in usage, needle
    assert ModelCard(card).data["base_model_relation"] == "adapter"


def test_method_without_a_pth_file_says_so_instead_of_an_example():
    index = seed001_index()
    index.entries.append(
        full_entry(f"{BASE_A}/full/v1.0/model.safetensors.index.json").model_copy(
            update={"format": "safetensors-sharded"}
        )
    )
    usage = sections(render_card(index, None))["用法 · Usage"]
    full = sections(usage, "### ")["完整权重 · Full checkpoints"]
    assert "RWKV(model=" not in full and "都不是 `.pth` 文件" in full and "is a `.pth` file" in full


def test_new_base_procedure_and_checksums_use_registry_commands(seed_card):
    procedure = sections(seed_card)["换新基模 · Adding a new base"]
    for command in ("registry add-base", "registry add ", "registry card", "registry sums"):
        assert procedure.count(command) >= 2, command  # once per language
    assert "sha256sum -c SHA256SUMS" in sections(seed_card)["校验文件 · Checking the files"]


def test_output_is_deterministic_whatever_the_index_order(seed_card):
    index = seed001_index()
    index.entries.reverse()
    index.bases.reverse()
    assert render_card(index, None) == seed_card == render_card(seed001_index(), None)


def test_entry_with_unregistered_base_still_rendered():
    index = seed001_index()
    index.entries.append(full_entry("elsewhere/full/v1/x.pth").model_copy(update={"base_sha256": "c" * 64}))
    card = render_card(index, None)
    assert "## 基模 cccccccc… 上的权重" in card and "`elsewhere/full/v1/x.pth`" in card and "registry validate" in card


# ----------------------------------------------------------------------------------------------
# the hand-written section


def _with_handwritten(card: str, text: str) -> str:
    start, end = card.index(handwritten.START) + len(handwritten.START), card.index(handwritten.END)
    return card[:start] + text + card[end:]


def test_handwritten_section_survives_rerender_verbatim(seed_card):
    mine = (
        "\n### 已知问题 · Known problems\n\n- MiSS 模型被问身份时可能自称 Qwen。  \r\n- It may call itself Qwen "
        "| sic.\n\n"
    )
    existing = _with_handwritten(seed_card, mine)
    changed = seed001_index()
    changed.entries.append(full_entry())
    again = render_card(changed, existing)
    assert handwritten.extract(again) == mine
    assert render_card(changed, again) == again


def test_default_handwritten_section_is_bilingual(seed_card):
    default = handwritten.default(("zh", "en"))
    assert handwritten.extract(seed_card) == default
    assert CJK.search(default) and ENGLISH_SENTENCE.search(default)
    assert not CJK.search(handwritten.default(("en",))) and not ENGLISH_SENTENCE.search(handwritten.default(("zh",)))
    assert handwritten.extract(seed_card, ("en",)) == handwritten.default(
        ("en",)
    )  # the placeholder follows the languages


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda c: c.replace(handwritten.END, ""), "no end marker"),
        (lambda c: c.replace(handwritten.START, ""), "no start marker"),
        (lambda c: c + handwritten.START + "\n" + handwritten.END + "\n", "2 start and 2 end"),
        (
            lambda c: (
                c.replace(handwritten.START, "@@")
                .replace(handwritten.END, handwritten.START)
                .replace("@@", handwritten.END)
            ),
            "comes before",
        ),
        (lambda c: "my own README\n", "no hand-written section"),
    ],
)
def test_broken_markers_are_refused(seed_card, mutate, needle):
    with pytest.raises(RegistryError) as err:
        render_card(seed001_index(), mutate(seed_card))
    assert err.value.code == "card.markers" and err.value.file == "README.md"
    assert needle in err.value.message and "registry:handwritten" in err.value.fix


# ----------------------------------------------------------------------------------------------
# bad templates and bytes


@pytest.fixture
def templates(tmp_path) -> Path:
    return Path(shutil.copytree(template_dir(), tmp_path / "templates"))


def _break_line(path: Path, line: int, text: str) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[line - 1] = text + "\n"
    path.write_text("".join(lines), encoding="utf-8")


def test_template_syntax_error_names_template_and_line(templates):
    path = templates / "card" / "base.md.j2"
    _break_line(path, 3, "{% if base.entries %}never closed")
    with pytest.raises(RegistryError) as err:
        render_card(seed001_index(), None, templates)
    assert err.value.code == "card.template-syntax" and "endif" in err.value.message
    assert re.fullmatch(rf"{re.escape(str(path))}:\d+", err.value.file)


def test_template_syntax_error_line_is_the_broken_line(templates):
    _break_line(templates / "card" / "license.md.j2", 4, "{{ index.registry.license | }}")
    with pytest.raises(RegistryError) as err:
        render_card(seed001_index(), None, templates)
    assert err.value.file == f"{templates / 'card' / 'license.md.j2'}:4"


def test_misspelled_name_fails_with_template_and_line(templates):
    _break_line(templates / "card" / "bases.md.j2", 2, "{{ view.known_basez }}")
    with pytest.raises(RegistryError) as err:
        render_card(seed001_index(), None, templates)
    assert err.value.code == "card.template-error"
    assert err.value.file == f"{templates / 'card' / 'bases.md.j2'}:2" and "known_basez" in err.value.message


def test_template_not_utf8_is_refused(templates):
    path = templates / "card" / "overview.md.j2"
    path.write_bytes(path.read_bytes().replace("本仓库".encode(), b"\xff\xfe", 1))
    with pytest.raises(RegistryError) as err:
        render_card(seed001_index(), None, templates)
    assert (
        err.value.code == "card.template-not-utf8"
        and "overview.md.j2" in err.value.file
        and "UTF-8" in err.value.message
    )


def test_lone_surrogate_in_index_text_is_refused():
    index = seed001_index()
    index.entries[0].notes = "bad \ud800 text"
    with pytest.raises(RegistryError) as err:
        render_card(index, None)
    assert (
        err.value.code == "card.not-utf8"
        and err.value.file == "index.json"
        and "$.entries[0].notes" in err.value.message
    )


# ----------------------------------------------------------------------------------------------
# hooks: init, registry card, validate


def _retitle(root: Path, title: str) -> None:
    index = Index.model_validate_json((root / "index.json").read_text(encoding="utf-8"))
    index.registry.title = title
    (root / "index.json").write_bytes(render_index(index))


def test_init_writes_a_fresh_card_covered_by_sums(empty_registry):
    assert (empty_registry / "README.md").is_file()
    assert "README.md" in (empty_registry / "SHA256SUMS").read_text()
    assert run("card", empty_registry, "--check").exit_code == 0


def test_check_exits_1_with_diff_after_index_change_then_0_after_card(empty_registry):
    _retitle(empty_registry, "Renamed registry")
    before = snapshot(empty_registry)
    stale = run("card", empty_registry, "--check")
    assert stale.exit_code == 1
    assert (
        "--- README.md" in stale.output
        and "-# RWKV-7 weights" in stale.output
        and "+# Renamed registry" in stale.output
    )
    assert snapshot(empty_registry) == before
    assert {f.code for f in validate(empty_registry)} == {"card.stale", "sums.mismatch"}

    # index.json was edited by hand: card refuses to vouch for it until `registry sums` accepts it.
    refused = run("card", empty_registry)
    assert refused.exit_code == 3 and "index.json" in refused.output and "registry sums" in refused.output
    assert snapshot(empty_registry) == before
    assert run("sums", empty_registry).exit_code == 0
    rendered = run("card", empty_registry)
    assert rendered.exit_code == 0 and "rendered" in rendered.output
    assert run("card", empty_registry, "--check").exit_code == 0
    assert validate(empty_registry) == []  # SHA256SUMS was refreshed with the card
    assert run("card", empty_registry).output.strip() == "README.md and evaluation.json were already up to date"


def test_card_command_renders_the_seed_registry(empty_registry):
    (empty_registry / "index.json").write_bytes(render_index(seed001_index()))
    assert run("sums", empty_registry).exit_code == 0  # accept the hand-written index
    assert run("card", empty_registry).exit_code == 0
    assert (empty_registry / "README.md").read_text(encoding="utf-8") == GOLDEN.read_text(encoding="utf-8")


def test_check_json_and_missing_card(empty_registry):
    fresh = run("card", empty_registry, "--check", "--json")
    assert fresh.exit_code == 0 and json.loads(fresh.output) == {"ok": True, "problems": [], "diff": ""}
    (empty_registry / "README.md").unlink()
    assert "card.missing" in {f.code for f in validate(empty_registry)}
    missing = run("card", empty_registry, "--check", "--json")
    document = json.loads(missing.output)
    assert (
        missing.exit_code == 1
        and document["diff"].startswith("--- /dev/null")
        and document["problems"][0]["code"] == "card.missing"
    )
    assert run("card", empty_registry).exit_code == 0 and validate(empty_registry) == []


def test_editing_the_handwritten_section_keeps_the_card_fresh(empty_registry):
    card = empty_registry / "README.md"
    card.write_text(
        card.read_text(encoding="utf-8").replace("这一段由人维护", "MiSS 可能自称 Qwen。"), encoding="utf-8"
    )
    assert {f.code for f in validate(empty_registry)} == {"sums.mismatch"}
    assert run("sums", empty_registry).exit_code == 0
    assert validate(empty_registry) == []
    assert "MiSS 可能自称 Qwen。" in card.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("damage", "code"),
    [
        (lambda text: text.encode().replace("这一段由人维护".encode(), b"\xff\xfe"), "card.not-utf8"),
        (lambda text: text.replace(handwritten.END, "").encode(), "card.markers"),
    ],
)
def test_failures_leave_the_registry_unchanged(empty_registry, damage, code):
    card = empty_registry / "README.md"
    card.write_bytes(damage(card.read_text(encoding="utf-8")))
    before = snapshot(empty_registry)
    result = run("card", empty_registry)
    assert result.exit_code == 3 and "README.md" in result.output and "fix:" in result.output
    assert snapshot(empty_registry) == before
    assert run("card", empty_registry, "--check").exit_code == 1
    assert code in {f.code for f in validate(empty_registry)}
    assert snapshot(empty_registry) == before


def test_template_failure_leaves_the_registry_unchanged(empty_registry, templates, monkeypatch):
    _break_line(templates / "card.md.j2", 1, "{% for %}")
    monkeypatch.setattr("registry.card.render.bundled_templates", lambda: templates)
    index = Index.model_validate_json((empty_registry / "index.json").read_text())
    index.registry.title = "changed"
    (empty_registry / "index.json").write_bytes(render_index(index))
    before = snapshot(empty_registry)
    result = run("card", empty_registry)
    assert result.exit_code == 3 and "card.md.j2:1" in result.output
    assert snapshot(empty_registry) == before
    assert not list((empty_registry / ".registry" / "staging").iterdir())


# ----------------------------------------------------------------------------------------------
# What users type is text on the card: no raw HTML, no heading or code block of its own

HOSTILE = {
    "script": "<script>alert(1)</script>",
    "onerror": '<img src=x onerror="alert(1)">',
    "comment": "see below <!-- the rest of the card",
    "fence": "```\n# Injected heading\n```",
    "heading": "first line\n\n## Injected heading",
    "setext": "Injected heading\n===",
    "quote and list": "> quoted\n- item\n1. item\n---",
}


def _markdown_shape(card: str) -> tuple[list[str], list[str], int]:
    """The card as a renderer reads it: heading texts, raw HTML blocks and spans, code blocks."""

    tokens = MarkdownIt("commonmark").enable("table").parse(card.split("\n---\n", 1)[1])
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    html = [t.content for t in tokens if t.type == "html_block"] + [
        c.content
        for t in tokens
        if t.type == "inline"
        for c in t.children or []
        if c.type == "html_inline" and c.content != "<br>"
    ]  # md_cell's line breaks
    return headings, html, sum(t.type in ("fence", "code_block") for t in tokens)


def _typed_everywhere(text: str) -> Index:
    """seed 001's index with ``text`` in every field a user types that the card shows."""

    index = seed001_index()
    index.registry.title = text
    for field in ("summary", "intended_use", "limitations", "attribution"):
        setattr(index.registry, field, Localized(zh=[text], en=[text]))
    index.bases[1].known_issues = Localized(en=[text])
    index.entries[1].notes = text
    index.entries[1].scores[0].notes = text
    index.entries[1].scores[0].footnote = text
    index.entries[1].known_issues = Localized(en=[text])
    return index


@pytest.mark.parametrize("case", list(HOSTILE))
def test_user_text_cannot_add_html_headings_or_code_blocks(case):
    headings, html, code = _markdown_shape(render_card(_typed_everywhere("plain text"), None))
    hostile_headings, hostile_html, hostile_code = _markdown_shape(render_card(_typed_everywhere(HOSTILE[case]), None))
    assert hostile_html == html  # the card's own comments (its generated notice, the hand-written markers) only
    assert hostile_code == code
    assert len(hostile_headings) == len(headings) and hostile_headings[1:] == headings[1:]  # the title differs, as text


def test_set_summary_with_an_unterminated_comment_hides_no_heading(tmp_path):
    assert run("init", tmp_path / "reg").exit_code == 0
    before, _, code_before = _markdown_shape((tmp_path / "reg" / "README.md").read_text())
    assert run("set", "summary", "intro <!-- never closed", "-C", tmp_path / "reg", "--lang", "en").exit_code == 0
    assert run("set", "limitations", "```", "-C", tmp_path / "reg", "--lang", "en").exit_code == 0
    card = (tmp_path / "reg" / "README.md").read_text()
    headings, html, code = _markdown_shape(card)
    assert (
        len(headings) == len(before) + 1 and code == code_before and "intro &lt;!-- never closed" in card
    )  # + the Limitations heading
    assert all(h.startswith("<!--") and h.rstrip().endswith("-->") for h in html)


def test_a_train_command_holding_a_fence_stays_in_its_code_block():
    block = md_fenced("echo ```\n```\n# not a heading", "bash")
    headings, _, code = _markdown_shape("---\n---\n" + block + "\n")
    assert headings == [] and code == 1 and block.startswith("````bash\n")
