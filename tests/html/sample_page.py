"""The news page both HTML test modules read (``tests/html``, ``tests/stages/test_html.py``): an article between a
menu, a cookie banner, share buttons, a sidebar and a footer, and a one-stage pipeline that cleans it."""

from __future__ import annotations

from ragtrim.models import Chunk
from ragtrim.pipeline import Pipeline
from ragtrim.stages.html import HtmlCleaner

ARTICLE_PARAS = [
    (
        "The city council voted on Tuesday to expand the bus network, adding three routes that connect the "
        "northern suburbs with the harbour, a plan that had been debated for more than two years."
    ),
    (
        "Supporters said the routes would cut commuting times, reduce traffic, and help workers reach jobs in "
        "the port, while critics questioned the cost, the timetable, and the choice of contractor."
    ),
    (
        "The first of the new routes is expected to open in the spring, officials said, with the others "
        "following by the end of next year if funding from the regional government arrives on time."
    ),
]

PAGE = f"""<!DOCTYPE html><html><head><title>Buses</title><style>p {{color: red}}</style>
<script>var tracking = 1;</script></head><body>
<header class="site-header"><a href="/">Daily News</a><nav><ul><li><a href="/w">World</a></li>
<li><a href="/s">Sports</a></li><li><a href="/b">Business</a></li></ul></nav></header>
<div id="cookie-banner">We use cookies to improve your experience. <button>Accept</button></div>
<main><article class="story">
<h1>Council expands bus network</h1>
<div class="share-tools"><a href="#">Share on Facebook</a> <a href="#">Tweet</a> <a href="#">Email</a></div>
<div class="story-body">
<p>{ARTICLE_PARAS[0]}</p>
<p>{ARTICLE_PARAS[1]}</p>
<h2>What comes next</h2>
<p>{ARTICLE_PARAS[2]}</p>
</div></article></main>
<aside class="sidebar"><h3>Most read</h3><ul><li><a href="/1">Storm hits coast, thousands without power</a></li>
<li><a href="/2">Local team wins the cup after a dramatic final</a></li></ul></aside>
<footer><p>Copyright 2024 Daily News. All rights reserved.</p><a href="/privacy">Privacy</a></footer>
</body></html>"""


def run(chunks: list[str] | list[Chunk], **params: object) -> tuple[list[str], list[dict[str, object]]]:
    result = Pipeline([HtmlCleaner(**params)], tokenizer="whitespace").run(chunks)  # type: ignore[arg-type]
    return [c.text for c in result.chunks], [r.to_dict() for r in result.removals]
