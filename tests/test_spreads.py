"""tools/spreads.py: the range over seeds of every number the notebooks print (issue 33)."""
import importlib.util
import json
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "spreads", Path(__file__).resolve().parents[1] / "tools" / "spreads.py")
spreads = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(spreads)


def executed(*cells):
    return {"cells": [{"cell_type": "markdown", "source": "gain 9"}] + [
        {"cell_type": "code", "outputs": [{"output_type": "stream", "name": "stdout", "text": text}]}
        for text in cells]}


def test_numbers_become_slots_and_padding_does_not_split_a_line():
    assert spreads.template("gain  +8.5 points (required: 5); 3 of 20, 1e-05, 95%") == (
        "gain #1 points (required: #2); #3 of #4, #5, #6", [8.5, 5.0, 3.0, 20.0, 1e-05, 95.0])
    assert spreads.template("loss 0.5  ok")[0] == spreads.template("loss 10.25 ok")[0]


def test_each_slot_gets_the_range_over_the_seeds_and_a_flipping_verdict_is_set_apart():
    runs = {0: executed("gain +8.5 (required: 5)\nsame 1.0\nverdict: faster\n"),
            1: executed("gain +6.9 (required: 5)\nsame 1.0\nverdict: slower\n"),
            9: executed("gain +3.1 (required: 5)\nsame 1.0\nverdict: faster\n")}
    rows, apart = spreads.spreads(runs)
    assert rows == [(1, "gain #1 (required: #2)", [(3.1, 8.5), (5.0, 5.0)], 3)]   # "same" never moves
    assert apart == [(1, "verdict: faster", [0, 9]), (1, "verdict: slower", [1])]


def test_main_reads_the_sweeps_folders_and_says_what_to_run_when_there_are_none(tmp_path, capsys):
    assert spreads.main(["--dir", str(tmp_path)]) == 1
    assert 'make sweep KEEP=1 SEEDS="0 1 2"' in capsys.readouterr().err
    for seed, gain in ((0, "8.5"), (1, "6.9")):
        d = tmp_path / f"quick-seed{seed}"
        d.mkdir()
        (d / "13_probe.ipynb").write_text(json.dumps(executed(f"gain +{gain}\n")))
    assert spreads.main(["--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "## 13_probe: 2 seeds (0, 1), quick mode" in out and "| 1 | `gain #1` | #1 6.9..8.5 |" in out
