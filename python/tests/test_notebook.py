"""The example notebook runs, and its figure is the CLI's `reproduce raidplus --quick`."""

from __future__ import annotations

import json
import shutil

import nbformat
from nbclient import NotebookClient

from conftest import REPO


def test_raidplus_notebook_reproduces_figure_10(cli, tmp_path):
    src = REPO / "examples" / "raidplus-fig10.ipynb"
    shutil.copy(src, tmp_path / src.name)
    nb = nbformat.read(tmp_path / src.name, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "the figure is drawn"
    last = nb.cells[-1]["outputs"]
    points = json.loads("".join(o["text"] for o in last if o.output_type == "stream"))

    report = cli.json("reproduce", "raidplus", "--quick", "--json", "--out", tmp_path / "cli")
    rows = {e["id"]: e["rows"] for e in report["reports"][0]["experiments"]}
    for fig in ("fig10a", "fig10b"):
        want = [r["ours"] for r in rows[fig] if r["label"].endswith(": RAID+ rebuild")]
        got = [t for _, _, t in points[fig]]
        assert got == want, fig
        labels = [r["label"] for r in rows[fig] if r["label"].endswith(": RAID+ rebuild")]
        assert labels == [f"n={n} k={k}: RAID+ rebuild" for n, k, _ in points[fig]]
