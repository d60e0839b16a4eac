"""``/docs`` and ``/redoc`` work without internet (issue 31 item 5).

The pages referred to a CDN for their scripts and stylesheet (and to other hosts for a
favicon and fonts), so they were blank where the service usually runs. Now every URL
they name is on the service itself, and each answers 200 with the asset, over real
HTTP with API keys on (the docs pages and their assets need no key, as before).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from service.settings import Settings
from tests.service.serving import ServerThread

# src="..." / href="..." attributes, and the quoted URLs of the pages' inline scripts
# (Swagger UI's ``url: '/openapi.json'``, its OAuth2 redirect) and of <redoc spec-url>.
_ATTR = re.compile(r"""\b(?:src|href|spec-url)\s*=\s*["']([^"']+)["']""")
_SCRIPT_URL = re.compile(r"""\b(?:url|oauth2RedirectUrl)\s*:\s*[^'"\n]*["']([^"']+)["']""")
# Any scheme-qualified or protocol-relative URL, wherever it is in the page.
_EXTERNAL = re.compile(r"""(?:\b[a-z][a-z0-9+.-]*:)?//[A-Za-z0-9][^\s"'<>]*""", re.IGNORECASE)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    data_dir: Path = tmp_path_factory.mktemp("docs-offline")
    settings = Settings(data_dir=str(data_dir), api_keys="k=predict+update+admin")
    with ServerThread(settings) as srv, srv.client() as c:  # no key: the docs are open
        yield c


def referenced_urls(html: str) -> list[str]:
    return [*_ATTR.findall(html), *_SCRIPT_URL.findall(html)]


@pytest.mark.parametrize(
    ("page", "kinds"),
    [("/docs", {".js", ".css", ".json"}), ("/redoc", {".js", ".json"})],
)
def test_docs_pages_name_no_external_host(client: httpx.Client, page: str, kinds: set[str]) -> None:
    r = client.get(page)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/html")
    external = _EXTERNAL.findall(r.text)
    assert not external, (page, external, r.text)
    urls = referenced_urls(r.text)
    assert {Path(u).suffix for u in urls} >= kinds, (page, urls)


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_every_asset_the_docs_pages_name_is_served(client: httpx.Client, page: str) -> None:
    urls = referenced_urls(client.get(page).text)
    assert urls
    for url in urls:
        assert url.startswith("/"), (page, url)
        r = client.get(url)
        assert r.status_code == 200, (page, url, r.status_code)
        assert r.content, (page, url)
        if url.endswith(".js"):
            assert "javascript" in r.headers["content-type"], (url, r.headers)
            assert len(r.content) > 100_000, url  # the bundle itself, not a stub
        if url.endswith(".css"):
            assert r.headers["content-type"].startswith("text/css"), (url, r.headers)


def test_the_assets_are_cacheable_and_unknown_ones_are_404(client: httpx.Client) -> None:
    urls = [u for u in referenced_urls(client.get("/docs").text) if u.endswith(".js")]
    r = client.get(urls[0])
    assert r.headers.get("etag") and r.headers.get("last-modified"), r.headers
    again = client.get(urls[0], headers={"if-none-match": r.headers["etag"]})
    assert again.status_code == 304
    base = urls[0].rsplit("/", 1)[0]
    assert client.get(f"{base}/nope.js").status_code == 404
