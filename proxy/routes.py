"""Every route of the app: chat completions with strategies, the rest of `/v1` relayed, the proxy's own."""

from proxy.chat_route import chat_completions
from proxy.relay_routes import list_models, pass_through
from proxy.service_routes import detect, healthz, metrics, readyz, startupz

ROUTES = [chat_completions, detect, list_models, pass_through, metrics, startupz, healthz, readyz]

__all__ = ["ROUTES"]
