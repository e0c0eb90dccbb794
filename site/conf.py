"""Sphinx settings for the course website (built by `make site`, scripts/build_site.py).

The lessons are the committed, executed notebooks, rendered by myst-nb without running
them. scripts/build_site.py copies this file, the home page, the panel pictures, the
figures and the lessons into build/site-src/ and builds from there; see its docstring.
"""

project = "agent-loop primer"
author = "the agent-loop primer authors"
extensions = ["myst_nb"]

# The notebooks are committed executed; the site shows their outputs as they are.
nb_execution_mode = "off"
nb_merge_streams = True
# Widget outputs are replaced by pictures before the build, so no widget script is needed
# (myst-nb would otherwise load one from a CDN).
nb_ipywidgets_js = {}

html_theme = "sphinx_book_theme"
html_title = "agent-loop primer"
html_theme_options = {
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
    "use_download_button": False,
    "use_fullscreen_button": False,
}
html_copy_source = False
html_show_sourcelink = False
html_last_updated_fmt = None
html_static_path = ["_static"]
html_css_files = ["course.css"]
exclude_patterns = ["_build"]
