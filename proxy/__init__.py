"""The proxy: the app factory and command line, settings, the app's state and the per-request record, the policy
for `auto`, the error tree, and its rooms: `edge/` (where a client's bytes arrive), `routes/`, `upstream/`,
`shadow/` and `observability/`, each saying in its `__init__.py` what it may import.

The proxy may import `strategies` (it hands them the request and an upstream), never `eval`."""

from contextlift.proxy.app import create_app
from contextlift.proxy.embedded_models import LocalModelError
from contextlift.proxy.errors import ProxyError
from contextlift.proxy.local_model import LocalModel
from contextlift.proxy.settings import Settings, SettingsError, load_settings

__all__ = ["LocalModel", "LocalModelError", "ProxyError", "Settings", "SettingsError", "create_app", "load_settings"]
