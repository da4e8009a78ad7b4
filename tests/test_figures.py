"""Every figure README.md and docs/benchmarks.md quote is read from a result file here (issue 40 item 1).

A figure is written right after a marker naming its result file and a JSON pointer (RFC 6901) into it:

    <!-- figure: docs/benchmarks/startup_sweep.json#/figure/gain_at_0/ratio -->1.83x

The number after the marker must equal the file's value rounded to the decimals the text shows; a number
followed by "%" stands for the file's fraction times 100 (0.9605 -> "96 %"). In the
README's headline table and in the figure column of docs/benchmarks.md's table every number carries a
marker, so a figure cannot be changed, or added, without the result file that backs it. The result files
are written by `comfy-cluster bench NAME` (cluster/bench/results.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = {"README.md": "## Headline figures", "docs/benchmarks.md": "| benchmark"}
MARKER = re.compile(r"<!--\s*figure:\s*(?P<file>[^#\s]+)#(?P<pointer>/[^>]*?)\s*-->")
# not the digits of a name (Flux1-Dev, SD3.5) or of a version (0.3.64)
NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?!\.\d)")
PERCENT = re.compile(r"\s?%")


def resolve(doc: dict | list, pointer: str) -> object:
    """The value at a JSON pointer: '/a/0/b c' (~1 stands for '/', ~0 for '~')."""
    value = doc
    for part in pointer.split("/")[1:]:
        key = part.replace("~1", "/").replace("~0", "~")
        if isinstance(value, list):
            value = value[int(key)]
        elif isinstance(value, dict) and key in value:
            value = value[key]
        else:
            raise KeyError(f"no {key!r} at {pointer}")
    return value


def check_markers(text: str, root: Path) -> list[str]:
    """What is wrong with the marked figures of `text`: each marker must be followed by a number equal to
    its result file's value rounded as written."""
    errors, files = [], {}
    for m in MARKER.finditer(text):
        where = f"{m.group('file')}#{m.group('pointer')}"
        num = NUMBER.match(text, m.end())
        if not num:
            errors.append(f"{where}: no number right after the marker")
            continue
        path = root / m.group("file")
        if not path.is_file():
            errors.append(f"{where}: result file missing")
            continue
        try:
            doc = files.setdefault(path, json.loads(path.read_text()))
            value = resolve(doc, m.group("pointer"))
        except (KeyError, IndexError, ValueError) as e:
            errors.append(f"{where}: {e}")
            continue
        written = num.group().replace(",", "")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            errors.append(f"{where}: the file holds {value!r}, not a number, for {written}")
            continue
        if PERCENT.match(text, num.end()):
            value = 100 * value
        decimals = len(written.split(".")[1]) if "." in written else 0
        if f"{value:.{decimals}f}" != written:
            errors.append(f"{where}: the text says {written}, the result file {value:.{decimals}f} ({value!r})")
    return errors


def unmarked_numbers(cell: str) -> list[str]:
    """Numbers of a table cell that no marker precedes (link targets and the markers themselves aside)."""
    cell = re.sub(r"\]\([^)]*\)", "]", cell)
    cell = re.sub(MARKER.pattern + r"\s*" + NUMBER.pattern, "", cell)
    cell = MARKER.sub("", cell)
    return NUMBER.findall(cell)


def figure_cells(text: str, table_start: str) -> list[tuple[str, str]]:
    """(row label, figure cell) of the table that begins at the first line starting with `table_start`
    (or follows that heading): the second column, the one that holds the figures."""
    lines = text.split("\n")
    i = next(k for k, line in enumerate(lines) if line.startswith(table_start))
    while not lines[i].startswith("|"):
        i += 1
    rows = []
    for line in lines[i + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        rows.append((cells[0], cells[1]))
    return rows


@pytest.mark.parametrize("doc", sorted(DOCS))
def test_marked_figures_equal_their_result_files(doc):
    errors = check_markers((REPO / doc).read_text(), REPO)
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize(
    "doc,label,cell",
    [
        (doc, label, cell)
        for doc, start in sorted(DOCS.items())
        for label, cell in figure_cells((REPO / doc).read_text(), start)
    ],
)
def test_every_figure_in_the_tables_carries_a_marker(doc, label, cell):
    assert not unmarked_numbers(cell), (
        f"{doc}, row {label!r}: {unmarked_numbers(cell)} carry no <!-- figure: FILE#POINTER --> marker; record the "
        "result file (`comfy-cluster bench ...` writes it under docs/benchmarks/) or say 'not yet recorded'"
    )


def test_a_figure_edited_without_its_file_fails(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps({"figure": {"ratio": 1.8349, "runs": [2.5, 3], "a/b": 7}}))
    good = (
        "<!-- figure: r.json#/figure/ratio -->1.83x, <!-- figure: r.json#/figure/runs/0 -->2.5 s, "
        "<!-- figure: r.json#/figure/a~1b -->7"
    )
    assert check_markers(good, tmp_path) == []
    assert check_markers(good.replace("1.83x", "1.84x"), tmp_path) == [
        "r.json#/figure/ratio: the text says 1.84, the result file 1.83 (1.8349)"
    ]
    assert "no number" in check_markers("<!-- figure: r.json#/figure/ratio --> about two", tmp_path)[0]
    assert "missing" in check_markers("<!-- figure: gone.json#/figure/ratio -->1.83", tmp_path)[0]
    assert "no 'x'" in check_markers("<!-- figure: r.json#/figure/x -->1.83", tmp_path)[0]


def test_a_percentage_is_the_files_fraction_times_100(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps({"share": 0.9605}))
    assert check_markers("<!-- figure: r.json#/share -->96 % of", tmp_path) == []
    assert check_markers("<!-- figure: r.json#/share -->96.05% of", tmp_path) == []
    assert check_markers("<!-- figure: r.json#/share -->97 % of", tmp_path) != []
    assert check_markers("<!-- figure: r.json#/share -->96 of", tmp_path) != []  # no "%": the fraction itself


def test_a_number_added_to_a_table_without_a_marker_fails():
    text = "## Headline figures\n\n| what | figure |\n|---|---|\n| speed | [<!-- figure: r.json#/a -->1.83x vs 2 s](x.md) |\n"
    ((label, cell),) = figure_cells(text, "## Headline figures")
    assert label == "speed" and unmarked_numbers(cell) == ["2"]
    assert unmarked_numbers("Flux1-Dev and SD3.5 on ComfyUI 0.3.64, 0.5 s") == ["0.5"]
    assert unmarked_numbers(cell.replace("vs 2 s", "vs a plain script")) == []


def test_the_real_readme_fails_when_a_headline_figure_is_edited(tmp_path):
    """A copy of the repository's docs with one marked headline figure changed fails the check."""
    readme = (REPO / "README.md").read_text()
    m = next(MARKER.finditer(readme[readme.index("## Headline figures") :]), None)
    assert m, "the headline table has no marked figure"
    start = readme.index("## Headline figures") + m.end()
    num = NUMBER.match(readme, start)
    doctored = readme[:start] + str(float(num.group().replace(",", "")) + 1) + readme[num.end() :]
    assert check_markers(readme, REPO) == []
    assert check_markers(doctored, REPO), "an edited headline figure passed the check"
