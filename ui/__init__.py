"""PD Lab's user interface helpers: pure plotly figure builders, translations, shared widgets.

Figure builders take the simulator's tables and return a plotly figure; they never import
streamlit, so they are tested without a browser. Streamlit is used by app_pages/ and by the
glue they call through ui/widgets.py (language, url_widgets, sim_cache, figure_cache,
engine_notes), plus model_upload and warmup.
"""
