"""The app's pages in menu order: one list for the menu and for everything that visits them.

app.py builds its menu from `PAGES`; the warm-up (ui/warmup.py), the load benchmark
(bench/bench_load.py) and the tests read their URL paths and titles from here, so a new page is
added in one place. Data only: importing it starts nothing.
"""

PAGES = (  # (file, url path, title key, icon)
    ("app_pages/home.py", "home", "nav.home", "🏠"),
    ("app_pages/prefill_decode.py", "prefill-vs-decode", "nav.prefill_decode", "⚖️"),
    ("app_pages/batching.py", "batching", "nav.batching", "📦"),
    ("app_pages/chunked.py", "chunked-prefill", "nav.chunked", "🧩"),
    ("app_pages/long_prompts.py", "long-prompts", "nav.long_prompts", "📜"),
    ("app_pages/memory.py", "memory", "nav.memory", "🧠"),
    ("app_pages/prefix_caching.py", "prefix-caching", "nav.prefix_caching", "♻️"),
    ("app_pages/speculative.py", "speculative-decoding", "nav.speculative", "🎯"),
    ("app_pages/disaggregation.py", "disaggregation", "nav.disaggregation", "🔀"),
    ("app_pages/playground.py", "playground", "nav.playground", "🧪"),
    ("app_pages/live.py", "live", "nav.live", "🔬"),
    ("app_pages/serve.py", "serve", "nav.serve", "📡"),
)
HOME = "home"  # the default page: app.py serves it at the root, and at /home as well
FILES = tuple(file for file, _, _, _ in PAGES)
URLS = tuple(url for _, url, _, _ in PAGES)
# The real-model pages run nothing on open: Live waits for a click, Real servers for a URL.
REAL_MODEL = ("live", "serve")
# The others simulate their default view as they open: what the warm-up fills the caches with.
SIMULATED = tuple(url for url in URLS if url not in REAL_MODEL)
