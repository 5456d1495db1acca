#!/usr/bin/env python3
"""The book: the executed notebooks as a static website, in English and in Chinese.

    python tools/book.py build                 # build/book/: English at the root, Chinese in zh/
    python tools/book.py build --no-execute    # fail, naming them, if any notebook would need a run
    python tools/book.py status                # which notebooks have executed copies that are current

Where the outputs come from. ``make test MODE=full STACK=current`` runs every notebook under nbval
with ``CTLKIT_RECORD`` set, and the recorder below (wired in by the repository's conftest.py) keeps
what each code cell printed and displayed, including the monitor's final figure, which reaches the
kernel's client as a display *update* that nbval itself does not keep. A notebook whose every cell
passed is written to ``build/executed/current/`` with a ``ctlkit_run`` record in its metadata: the
machine, the stack's versions, the mode and seed, the time, and a **key**, the hash of the
notebook's own file, every file of the ``ctlkit`` package, ``pyproject.toml``, the stack, the mode
and the seed. ``build`` uses an executed copy only when its key is the one the notebook has now; any
other notebook it runs first, the same way (nbval, full mode, recorded), so an unchanged notebook is
never executed twice and a changed one is never shown with stale outputs. CI runs ``build
--no-execute`` after its full-mode run: the book is made from exactly the outputs that run proved.

How the site is made. Sphinx with myst-nb (``nb_execution_mode = "off"``: nothing is executed
there), the Furo theme, two builds (``book/conf.py``): English into ``build/book/``, Chinese into
``build/book/zh/`` with Chinese search (jieba). A Chinese page shows the English run's outputs:
its code cells are the English ones token for token (``tools/zh.py check``), so they printed
exactly that. Each page gets, under its title, where its outputs come from, a link to the same page
in the other language and an "Open in Colab" link; math is rendered by a MathJax copied into the
site (one file of the ``sphinx-mathjax-offline`` package), so the site needs no network at all.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import datetime as dt
import hashlib
import html
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import nbnorm  # noqa: E402  (tools/ is not a package)

NOTEBOOKS = ROOT / "notebooks"
ZH = NOTEBOOKS / "zh"
EXECUTED = ROOT / "build" / "executed"
SOURCES = ROOT / "build" / "book-src"
OUT = ROOT / "build" / "book"
CONF = ROOT / "book"
BADGE_RE = re.compile(r"\[!\[Open In Colab\]\([^)]*\)\]\((https://colab\.research\.google\.com/[^)]+)\)")
# A line break between two Chinese characters: a browser shows it as a space, which Chinese text
# does not have (the English notebooks' hard-wrapped lines are kept in some translations).
CJK_BREAK_RE = re.compile("(?<=[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef])\n"
                          "(?=[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef])")
TABLE_ROW_RE = re.compile(r"^\| \[(\d\d_[a-z_]+)\]\(notebooks/(?:zh/)?\d\d_[a-z_]+\.ipynb\) \|(.*)$")


# ---------------------------------------------------------------- keys: what an output depends on

def _files_digest(paths) -> str:
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def kit_digest() -> str:
    """The hash of every file of the ctlkit package and of pyproject.toml (its dependencies)."""
    files = [p for p in (ROOT / "ctlkit").rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    return _files_digest(files + [ROOT / "pyproject.toml"])


def run_key(notebook: Path | bytes, stack: str, mode: str, seed: int, kit: str | None = None) -> str:
    """What an executed copy of ``notebook`` (a path, or the file's bytes) must have been made from
    to be shown as its output."""
    source = notebook if isinstance(notebook, bytes) else notebook.read_bytes()
    digest = hashlib.sha256()
    for part in (kit or kit_digest(), source.decode("utf-8"), stack, mode, str(seed)):
        digest.update(part.encode("utf-8") + b"\0")
    return digest.hexdigest()[:20]


def _mode() -> str:
    return "quick" if os.environ.get("CTLKIT_QUICK", "0").strip() not in ("", "0") else "full"


def _seed() -> int:
    return int(os.environ.get("CTLKIT_SEED", "0") or 0)


# ---------------------------------------------------------------- the recorder (used by conftest.py)

def outputs_from_messages(messages: list[dict]) -> tuple[list[dict], int | None]:
    """A code cell's outputs, as Jupyter would store them, from the kernel's iopub messages for that
    cell: streams joined, display updates applied to the output they name, clear_output honoured.
    Also the cell's execution count."""
    outputs: list[dict] = []
    by_display_id: dict[str, list[dict]] = {}
    count, clear_pending = None, False
    for msg in messages:
        kind, content = msg["msg_type"], msg["content"]
        if kind == "execute_input":
            count = content.get("execution_count")
            continue
        if kind == "clear_output":
            if content.get("wait"):
                clear_pending = True
            else:
                outputs.clear()
            continue
        if kind == "update_display_data":
            display_id = (content.get("transient") or {}).get("display_id")
            for out in by_display_id.get(display_id, []):
                out["data"], out["metadata"] = content.get("data", {}), content.get("metadata", {})
            continue
        if kind not in ("stream", "display_data", "execute_result", "error"):
            continue
        if clear_pending:
            outputs.clear()
            clear_pending = False
        if kind == "stream":
            if outputs and outputs[-1]["output_type"] == "stream" and outputs[-1]["name"] == content["name"]:
                outputs[-1]["text"] += content["text"]
            else:
                outputs.append({"output_type": "stream", "name": content["name"], "text": content["text"]})
            continue
        if kind == "error":
            outputs.append({"output_type": "error", "ename": content["ename"], "evalue": content["evalue"],
                            "traceback": content["traceback"]})
            continue
        out = {"output_type": kind, "data": content.get("data", {}), "metadata": content.get("metadata", {})}
        if kind == "execute_result":
            out["execution_count"] = content.get("execution_count")
        outputs.append(out)
        display_id = (content.get("transient") or {}).get("display_id")
        if display_id:
            by_display_id.setdefault(display_id, []).append(out)
    return outputs, count


class Recorder:
    """Keeps what every nbval cell item produced; writes each notebook whose cells all passed."""

    def __init__(self, folder, rootdir):
        self.folder, self.rootdir = Path(folder), Path(rootdir)
        self.cells: dict[Path, dict[int, tuple[list, int | None]]] = {}
        self.failed: set[Path] = set()
        self.started: dict[Path, float] = {}     # the notebook's first cell began
        self.ended: dict[Path, float] = {}       # its latest cell ended
        self.sources: dict[Path, bytes] = {}
        self.kit = kit_digest()

    def collected(self, items) -> None:
        """Keep each notebook's bytes as nbval read it: its key is made from what ran, even if the
        file is edited while the run goes on."""
        for item in items:
            parent = getattr(item, "parent", None)
            if hasattr(item, "cell") and hasattr(parent, "path"):
                path = Path(str(parent.path)).resolve()
                if path not in self.sources:
                    self.sources[path] = path.read_bytes()

    @contextlib.contextmanager
    def capture(self, item):
        parent = getattr(item, "parent", None)
        if not hasattr(item, "cell") or not hasattr(parent, "get_kernel_message"):
            yield
            return
        path = Path(str(parent.path)).resolve()
        self.started.setdefault(path, time.time())
        seen: list[dict] = []
        original = parent.get_kernel_message

        def spy(*args, **kwargs):
            msg = original(*args, **kwargs)
            seen.append(msg)
            return msg

        parent.get_kernel_message = spy
        try:
            yield
        finally:
            del parent.get_kernel_message          # the class's method again
            cell_ids = [m["parent_header"].get("msg_id") for m in seen if m["msg_type"] == "execute_input"]
            mine = [m for m in seen if cell_ids and m["parent_header"].get("msg_id") == cell_ids[-1]]
            self.cells.setdefault(path, {})[item.cell_num] = outputs_from_messages(mine)
            self.ended[path] = time.time()

    def report(self, report) -> None:
        if report.failed:
            self.failed.add((self.rootdir / report.nodeid.split("::")[0]).resolve())

    def finish(self) -> list[Path]:
        """Write every fully passed notebook; return the paths written."""
        from ctlkit import bench  # the kit's own machine description (notebook 12's)
        here = bench.machine()
        machine = (f"{platform.system()} {platform.machine()}, {here['cpu']} ({here['cores']} cores), "
                   f"{here['device']}")
        written = []
        for path, cells in self.cells.items():
            if path in self.failed:
                continue
            source = self.sources.get(path) or path.read_bytes()
            nb = json.loads(source.decode("utf-8"))
            code = [c for c in nb["cells"] if c["cell_type"] == "code"]
            if sorted(cells) != list(range(len(code))):
                continue                            # not every cell ran (a -k selection, a crash)
            for number, cell in enumerate(code):
                cell["outputs"], cell["execution_count"] = cells[number]
            stack = os.environ.get("CTLKIT_STACK", "current")
            nb["metadata"]["ctlkit_run"] = {
                "key": run_key(source, stack, _mode(), _seed(), self.kit),
                "stack": stack, "mode": _mode(), "seed": _seed(), "machine": machine,
                "python": here["python"], "tensorflow": here["tensorflow"], "keras": here["keras"],
                "finished": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "seconds": round(self.ended[path] - self.started[path]),   # its cells, not the session
                # notebooks run at once (make test's JOBS, set by pytest-xdist in its workers): the
                # seconds above were measured beside that many minus one others
                "at_a_time": int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")),
            }
            self.folder.mkdir(parents=True, exist_ok=True)
            target = self.folder / path.name
            # nbnorm's writer: an old copy stays whole until the new one is complete
            nbnorm.write_atomic(target, (json.dumps(nb, ensure_ascii=False, indent=1) + "\n").encode("utf-8"))
            written.append(target)
        return written


# ---------------------------------------------------------------- the build

def english_notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def stale(stack: str = "current", mode: str = "full", seed: int = 0) -> list[Path]:
    """The notebooks without a current executed copy in build/executed/<stack>/."""
    kit = kit_digest()
    found = []
    for notebook in english_notebooks():
        copy_ = EXECUTED / stack / notebook.name
        try:
            recorded = json.loads(copy_.read_text(encoding="utf-8"))["metadata"]["ctlkit_run"]["key"]
        except (OSError, ValueError, KeyError):
            recorded = None
        if recorded != run_key(notebook, stack, mode, seed, kit):
            found.append(notebook)
    return found


def execute(notebooks: list[Path], stack: str = "current") -> None:
    """Run ``notebooks`` under nbval in full mode, recorded (the same run as make test MODE=full)."""
    env = dict(os.environ, CTLKIT_QUICK="0", CTLKIT_STACK=stack, MPLBACKEND="Agg", TF_CPP_MIN_LOG_LEVEL="2",
               CTLKIT_RECORD=str(EXECUTED / stack))
    env.pop("CTLKIT_SEED", None)
    command = [sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env", "-q",
               "-p", "no:cacheprovider", *map(str, notebooks)]
    if len(notebooks) > 1:                        # two at a time, as make test runs them (JOBS)
        command += ["-n", "2", "--dist", "loadfile"]
    print(f"book: executing {len(notebooks)} notebook(s) in full mode: {' '.join(n.stem for n in notebooks)}")
    if subprocess.run(command, cwd=ROOT, env=env).returncode != 0:
        raise SystemExit("book: a notebook failed, so the book was not built (the failing cell is above)")


RUN_LINE = {
    "en": ("Outputs on this page: the notebook as run in {mode} mode, seed {seed}, on {finished}, in "
           "{seconds} s{pace_en}, on {machine}; stack {stack} (Python {python}, TensorFlow {tensorflow}, "
           "Keras {keras})."),
    "zh": ("本页输出：此笔记本于 {finished} 以{mode_zh}模式、随机种子 {seed} 运行所得，"
           "用时 {seconds} 秒{pace_zh}；机器：{machine}；"
           "环境 {stack}（Python {python}，TensorFlow {tensorflow}，Keras {keras}）。"
           "中文版的代码与英文版逐词相同，输出即英文版运行的输出。"),
}
LINKS = {
    "en": '<a class="ctlkit-lang" href="zh/{name}.html" hreflang="zh-CN">中文版</a> · '
          '<a class="ctlkit-colab" href="{colab}">Open in Colab</a>',
    "zh": '<a class="ctlkit-lang" href="../{name}.html" hreflang="en">English</a> · '
          '<a class="ctlkit-colab" href="{colab}">在 Colab 中打开</a>',
}


def _header_cell(lang: str, name: str, colab: str, run: dict) -> dict:
    facts = {k: html.escape(str(v)) for k, v in run.items()}
    facts["mode_zh"] = {"full": "完整", "quick": "快速"}.get(run.get("mode"), run.get("mode"))
    n = run.get("at_a_time")                         # absent in copies recorded before it was kept
    facts["pace_en"] = "" if n is None else (" (one notebook at a time)" if n == 1 else
                                             f" ({n} notebooks at a time; alone it may run faster)")
    facts["pace_zh"] = "" if n is None else ("（每次只运行这一个笔记本）" if n == 1 else
                                             f"（同时运行 {n} 个笔记本；单独运行可能更快）")
    text = (LINKS[lang].format(name=name, colab=html.escape(colab)) + "\n\n"
            + "<p class=\"ctlkit-run\">" + RUN_LINE[lang].format(**facts) + "</p>\n")
    return {"cell_type": "markdown", "id": f"ctlkit-run-{lang}", "metadata": {}, "source": text}


def join_cjk_lines(markdown: str) -> str:
    """``markdown`` with the line breaks between two Chinese characters removed, outside code blocks."""
    parts = re.split(r"(^```.*?^```[^\n]*$)", markdown, flags=re.M | re.S)
    return "".join(part if index % 2 else CJK_BREAK_RE.sub("", part) for index, part in enumerate(parts))


def page(source_nb: dict, executed: dict, lang: str, name: str) -> dict:
    """The notebook as the book shows it: ``source_nb``'s cells (English or Chinese) with the
    English run's outputs, the Colab badge as a plain link, and the header cell under the title."""
    nb = copy.deepcopy(source_nb)
    run_cells = executed["cells"]
    if [c["cell_type"] for c in nb["cells"]] != [c["cell_type"] for c in run_cells]:
        raise SystemExit(f"book: {lang}/{name}: its cells do not match the executed English notebook's "
                         f"(run python3 tools/zh.py check)")
    for cell, ran in zip(nb["cells"], run_cells):
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = ran["outputs"], ran["execution_count"]
        elif lang == "zh":
            cell["source"] = join_cjk_lines("".join(cell["source"]))
    title = "".join(nb["cells"][0]["source"])
    badge = BADGE_RE.search(title)
    if badge is None:
        raise SystemExit(f"book: {lang}/{name}: the title cell has no Colab badge")
    nb["cells"][0]["source"] = BADGE_RE.sub("", title).rstrip() + "\n"
    nb["cells"].insert(1, _header_cell(lang, name, badge.group(1), executed["metadata"]["ctlkit_run"]))
    nb["metadata"] = {k: v for k, v in executed["metadata"].items() if k in ("kernelspec", "language_info")}
    return nb


def landing(lang: str) -> str:
    """index.md: what the kit is, the two commands, and the map of notebooks (from the README)."""
    readme = (ROOT / ("README.md" if lang == "en" else "README.zh-CN.md")).read_text(encoding="utf-8")
    rows = []
    for line in readme.splitlines():
        match = TABLE_ROW_RE.match(line)
        if match:
            rows.append(f"| [{match.group(1)}]({match.group(1)}.ipynb) |{match.group(2)}")
    if len(rows) != len(english_notebooks()):
        raise SystemExit(f"book: the notebook map of {'README.md' if lang == 'en' else 'README.zh-CN.md'} "
                         f"has {len(rows)} rows, not one per notebook ({len(english_notebooks())})")
    toc = "\n".join(f"{n.stem}" for n in english_notebooks())
    if lang == "en":
        head = ("# ctlkit: custom training loops in TensorFlow 2 / Keras 3\n\n"
                '<a class="ctlkit-lang" href="zh/index.html" hreflang="zh-CN">中文版</a>\n\n'
                "A notebook-first course in writing your own training loops. Every page below is a "
                "notebook as it ran, outputs included, and every claim in it is an `assert` that passed "
                "in that run. To run them yourself: `make lab` in the repository, or the Colab link on "
                "each page.\n\n| notebook | what you learn | time |\n|---|---|---|\n")
    else:
        head = ("# ctlkit：用 TensorFlow 2 / Keras 3 编写自定义训练循环\n\n"
                '<a class="ctlkit-lang" href="../index.html" hreflang="en">English</a>\n\n'
                "以笔记本为主的自定义训练循环教程。下面每一页都是一个实际运行过的笔记本，输出都保留在页面上；"
                "页面中的每个论断都是那次运行中通过了的 `assert`。想自己运行：在仓库中执行 `make lab`，"
                "或使用每页上的 Colab 链接。\n\n| 笔记本 | 内容 | 时间 |\n|---|---|---|\n")
    return head + "\n".join(rows) + f"\n\n```{{toctree}}\n:hidden:\n:maxdepth: 1\n\n{toc}\n```\n"


def mathjax_file() -> Path:
    """MathJax 3's tex-svg-full.js from the sphinx-mathjax-offline package (PyPI, so CI's registry
    reaches it): TeX input and SVG output in one file that loads nothing else."""
    from importlib import metadata
    try:
        files = metadata.files("sphinx-mathjax-offline") or []
    except metadata.PackageNotFoundError:
        files = []
    found = [f.locate() for f in files if str(f).endswith("static/mathjax/tex-svg-full.js")]
    if not found:
        raise SystemExit("book: sphinx-mathjax-offline is missing; install the book's extra: "
                         "pip install -e '.[book]' (make book does)")
    return Path(found[0])


def prepare(stack: str = "current") -> None:
    """build/book-src/{en,zh}: the pages, the landing page, and MathJax in the static folder."""
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(SOURCES)
    static = SOURCES / "_static_shared"
    (static / "mathjax").mkdir(parents=True)
    shutil.copy2(mathjax_file(), static / "mathjax" / "tex-svg-full.js")
    for lang in ("en", "zh"):
        folder = SOURCES / lang
        folder.mkdir(parents=True)
        for notebook in english_notebooks():
            executed = json.loads((EXECUTED / stack / notebook.name).read_text(encoding="utf-8"))
            source = notebook if lang == "en" else ZH / notebook.name
            if not source.exists():
                raise SystemExit(f"book: {source.relative_to(ROOT)} is missing (python3 tools/zh.py sync)")
            nb = page(json.loads(source.read_text(encoding="utf-8")), executed, lang, notebook.stem)
            (folder / notebook.name).write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
        (folder / "index.md").write_text(landing(lang), encoding="utf-8")


def sphinx(lang: str) -> None:
    target = OUT if lang == "en" else OUT / "zh"
    env = dict(os.environ, CTLKIT_BOOK_LANG=lang, CTLKIT_BOOK_STATIC=str(SOURCES / "_static_shared"))
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-c", str(CONF),
               "-d", str(ROOT / "build" / "book-doctrees" / lang), str(SOURCES / lang), str(target)]
    if subprocess.run(command, cwd=ROOT, env=env).returncode != 0:
        raise SystemExit(f"book: sphinx failed on the {lang} edition (its messages are above)")


def build(no_execute: bool, stack: str = "current") -> int:
    start = time.perf_counter()
    missing = stale(stack)
    if missing and no_execute:
        print("book: these notebooks have no executed copy made from their current content (run "
              "`make test STACK=current MODE=full WHAT=notebooks`, or make book, which runs them):",
              file=sys.stderr)
        for notebook in missing:
            print(f"  {notebook.relative_to(ROOT)}", file=sys.stderr)
        return 1
    if missing:
        execute(missing, stack)
        still = stale(stack)
        if still:
            raise SystemExit(f"book: no executed copy was written for {[n.stem for n in still]}")
    cached = len(english_notebooks()) - len(missing)
    for folder in (OUT, ROOT / "build" / "book-screenshots"):   # nothing of an earlier build stays
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(folder)
    prepare(stack)
    for lang in ("en", "zh"):
        sphinx(lang)
    pages = len(list(OUT.rglob("*.html")))
    print(f"book: {OUT.relative_to(ROOT)}/ built in {time.perf_counter() - start:.0f} s: "
          f"{len(missing)} notebook(s) executed, {cached} from build/executed/{stack}/; "
          f"{pages} HTML files (open {OUT.relative_to(ROOT)}/index.html, or serve the folder)")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_build = sub.add_parser("build", help="build build/book/ (English) and build/book/zh/ (Chinese)")
    p_build.add_argument("--no-execute", action="store_true",
                         help="fail instead of running notebooks whose executed copy is missing or stale")
    sub.add_parser("status", help="list the notebooks without a current executed copy")
    args = parser.parse_args(argv)
    if args.command == "status":
        missing = stale()
        for notebook in english_notebooks():
            print(f"{'stale  ' if notebook in missing else 'current'}  {notebook.name}")
        return 1 if missing else 0
    return build(args.no_execute)


if __name__ == "__main__":
    sys.exit(main())
