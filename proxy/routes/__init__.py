"""Every route of the app: chat completions with strategies (and how its answer is streamed or relayed back), the
Responses API with the strategies that rewrite a request, the rest of `/v1` relayed to the upstream as it is, and the
proxy's own (`/metrics`, the health probes, `/v1/contextlift/detect`).

Routes sit above the edge and the upstream: they may import edge/, upstream/, shadow/, observability/ and the shared
modules; nothing below imports a route."""

from contextlift.proxy.routes.chat import CHAT_ROUTE_NAME, chat_completions
from contextlift.proxy.routes.relay import list_models, pass_through
from contextlift.proxy.routes.responses import responses
from contextlift.proxy.routes.service import detect, healthz, metrics, readyz, startupz

ROUTES = [chat_completions, responses, detect, list_models, pass_through, metrics, startupz, healthz, readyz]

__all__ = ["CHAT_ROUTE_NAME", "ROUTES"]
