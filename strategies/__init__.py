"""Long-context strategies: the request model, document detection, the strategy plugins and their pipeline.

The core sits here: the request model (`request`, `spans`), the plugin surface (`plugin`), the registry and the
pipeline, the selection grammar, the embedder and tokenizer seams, the upstream interface, the executors' shared
helpers (`evidence`, `copied_text`) and the positional probes. Its rooms: `detection/` (finding the documents),
`builtin/` (the built-in strategies, one module each) and `rankers/`. A strategy author imports from
`contextlift.strategies.plugin` alone; the built-in strategies are registered through the `contextlift.strategies`
entry-point group like any other (see `contextlift.strategies.registry`).

The core imports none of its rooms (this face re-exports them); nothing here may import `proxy` or `eval`."""

from contextlift.strategies.detection.declared import DeclaredFormat
from contextlift.strategies.detection.explain import explain_detection, render_explanation
from contextlift.strategies.detection.find import DECLINED, SHAPES, parse_request
from contextlift.strategies.detection.limits import DocumentLimitError, DocumentLimits
from contextlift.strategies.embedder import Embedder, SentenceTransformerEmbedder, embed_off_loop
from contextlift.strategies.pipeline import (
    Pipeline,
    PipelineResult,
    Step,
    apply_transforms,
    rankings_of,
    render_applied,
    render_rankings,
    run_pipeline,
)
from contextlift.strategies.plugin import (
    AppliedStep,
    Executor,
    Param,
    Params,
    Role,
    Services,
    StepContext,
    Strategy,
    StrategyOutcome,
    Transform,
    send_once,
)
from contextlift.strategies.registry import ENTRY_POINT_GROUP, StrategyRegistry, build_registry
from contextlift.strategies.request import ChatRequest, Document, DocumentBlock, DocumentOrder, document_order
from contextlift.strategies.selection import StepRequest, StrategySelectionError, parse_selection
from contextlift.strategies.spans import DocumentFormat
from contextlift.strategies.tokens import TiktokenTokenizer, Tokenizer
from contextlift.strategies.upstream import Completion, CompletionStream, Upstream, UpstreamFailure, add_usage

__all__ = [
    "DECLINED",
    "ENTRY_POINT_GROUP",
    "SHAPES",
    "AppliedStep",
    "ChatRequest",
    "Completion",
    "CompletionStream",
    "DeclaredFormat",
    "Document",
    "DocumentBlock",
    "DocumentFormat",
    "DocumentLimitError",
    "DocumentLimits",
    "DocumentOrder",
    "Embedder",
    "Executor",
    "Param",
    "Params",
    "Pipeline",
    "PipelineResult",
    "Role",
    "SentenceTransformerEmbedder",
    "Services",
    "Step",
    "StepContext",
    "StepRequest",
    "Strategy",
    "StrategyOutcome",
    "StrategyRegistry",
    "StrategySelectionError",
    "TiktokenTokenizer",
    "Tokenizer",
    "Transform",
    "Upstream",
    "UpstreamFailure",
    "add_usage",
    "apply_transforms",
    "build_registry",
    "document_order",
    "embed_off_loop",
    "explain_detection",
    "parse_request",
    "parse_selection",
    "rankings_of",
    "render_applied",
    "render_explanation",
    "render_rankings",
    "run_pipeline",
    "send_once",
]
