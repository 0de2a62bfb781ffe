"""PD Lab's user interface helpers: pure plotly figure builders, translations, shared widgets.

Figure builders take the simulator's tables and return a plotly figure; they never import
streamlit, so they are tested without a browser. Only ui/widgets.py and app_pages/ use streamlit.
"""
