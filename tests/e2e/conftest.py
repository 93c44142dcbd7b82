from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.local_serving import serving


@pytest.fixture(scope="session")
def proxy_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The proxy in front of the embedded model, for the whole session."""
    with serving(tmp_path_factory.mktemp("e2e") / "serve.log") as url:
        yield url
