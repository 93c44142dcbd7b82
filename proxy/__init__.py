"""The HTTP edge of contextlift: the app factory, settings, the upstream client, errors and logging."""

from proxy.app import create_app
from proxy.errors import ProxyError
from proxy.local_model import LocalModel, LocalModelError
from proxy.settings import Settings, SettingsError, load_settings

__all__ = ["LocalModel", "LocalModelError", "ProxyError", "Settings", "SettingsError", "create_app", "load_settings"]
