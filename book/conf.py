"""Sphinx configuration of the book (tools/book.py runs it twice: CTLKIT_BOOK_LANG=en, then zh).

Nothing here reaches the network: myst-nb renders the notebooks without executing them
(nb_execution_mode "off": tools/book.py hands it notebooks that already carry the outputs
of a full-mode run), MathJax 3 is served from the site itself (one file copied from the
sphinx-mathjax-offline package into _static/mathjax), the Furo theme ships its own assets, and
the ipywidgets loader that myst-nb would fetch from a CDN is switched off (the monitor's final
figure is stored as a PNG).
"""
import os

lang = os.environ.get("CTLKIT_BOOK_LANG", "en")

project = "ctlkit"
author = "the ctlkit authors"
copyright = "the ctlkit authors, Apache-2.0"
language = "zh_CN" if lang == "zh" else "en"
html_title = ("ctlkit：自定义训练循环" if lang == "zh" else "ctlkit: custom training loops")

extensions = ["myst_nb"]
nb_execution_mode = "off"
nb_ipywidgets_js = {}
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath"]
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
suppress_warnings = ["mystnb.unknown_mime_type", "myst.header"]

html_theme = "furo"
html_favicon = "favicon.svg"        # a page with no icon makes the browser ask for /favicon.ico (a 404)
html_static_path = [os.environ["CTLKIT_BOOK_STATIC"]] if os.environ.get("CTLKIT_BOOK_STATIC") else []
html_show_sourcelink = False
html_copy_source = False
html_last_updated_fmt = None
html_search_language = "zh" if lang == "zh" else "en"
if lang == "zh":                       # jieba splits Chinese into words for the search index
    import logging

    import jieba
    jieba.setLogLevel(logging.WARNING)

    # Sphinx's Chinese search ships the English stemmer (js_stemmer_rawcode = 'english-stemmer.js',
    # sphinx/search/zh.py) but names it after its language ("window.Stemmer = ChineseStemmer",
    # sphinx/search/__init__.py, get_js_stemmer_code), a name nothing defines on Sphinx 9.0: the
    # search page then stops with a ReferenceError. Naming the language English names the stemmer
    # the file defines; the index is still split into Chinese words by jieba.
    from sphinx import search as _search
    from sphinx.search import zh as _zh

    class _ChineseSearch(_zh.SearchChinese):
        language_name = "English"

    _search.languages["zh"] = _ChineseSearch

# MathJax 3.2 from the site itself: tex-svg-full.js is one file holding the TeX input with every
# extension and the SVG output, whose glyphs are paths inside it, so typesetting loads no font and
# no further component. tools/book.py copies it from the sphinx-mathjax-offline package (only its
# files are used, not its Sphinx extension). myst-nb marks each page "tex2jax_ignore" and its math
# "math"; the options below are that same rule.
mathjax_path = "mathjax/tex-svg-full.js"
mathjax3_config = {
    "tex": {"inlineMath": [["\\(", "\\)"]], "displayMath": [["\\[", "\\]"]], "processEscapes": True},
    "options": {"processHtmlClass": "tex2jax_process|mathjax_process|math|output_area",
                "ignoreHtmlClass": "tex2jax_ignore|mathjax_ignore"},
    "svg": {"fontCache": "global"},
}
